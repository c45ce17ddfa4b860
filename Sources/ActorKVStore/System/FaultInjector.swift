#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Test hooks for one store: makes chosen syscalls fail and stops the engine at named points.
///
/// A test creates an injector, hands it to the store through ``StoreOptions/faults``, and arms it;
/// only that store's syscalls and steps consult it, so a fault armed for one store never fires in
/// another running at the same time in the same process. A store without one (the default, and
/// always in production) pays one nil check per syscall.
///
/// Two kinds of fault, both off until armed:
/// - a syscall fault: the next `count` calls of one ``Operation`` on a path containing a given
///   text fail with an errno (ENOSPC on a log append, EIO on fsync, …);
/// - a failpoint: a named step of the engine (`compaction.afterRename`, …). When hit it either
///   throws (in-process tests), ends the process at once with `_exit` (crash tests), or holds
///   the thread until the test lets it go (``FailpointGate``: what happens meanwhile).
///
/// One failpoint is process-wide instead: the environment variable `ACTORKV_FAILPOINT=name`
/// ends the process with `_exit(86)` when any store reaches that step, with or without an
/// injector (crash tests that run the engine in a child process: actorkv-stress, actorkvd).
///
/// An injector may also carry a ``FileOperationRecorder``, which every mutating syscall of its
/// store reports to (the power-loss tests work out crash states from that trace).
///
/// Unarmed, each check of an injector is one relaxed atomic load.
public final class FaultInjector: Sendable {
    /// The syscalls that can be made to fail.
    public enum Operation: String, Sendable {
        /// open(2)
        case open
        /// pwrite(2)
        case write
        /// pread(2) and directory reads
        case read
        /// fsync(2) and fdatasync(2)
        case fsync
        /// ftruncate(2)
        case truncate
        /// rename(2)
        case rename
        /// unlink(2) and rmdir(2)
        case unlink
        /// mkdir(2)
        case mkdir
    }

    /// What a failpoint does when it is hit.
    public enum FailpointAction: Sendable, Equatable {
        /// Throw an I/O error from that step.
        case fail
        /// End the process immediately with this exit status, as a crash would.
        case exit(Int32)
        /// Hold the first thread that reaches it until the gate is opened (later ones pass).
        case hold(FailpointGate)
    }

    struct SyscallFault {
        var operation: Operation
        var pathContains: String
        var errno: Int32
        var remaining: Int?
    }

    struct State {
        var syscallFaults: [SyscallFault] = []
        var failpoints: [String: FailpointAction] = [:]
        var hits: [String: Int] = [:]
    }

    private let armed = Atomic<Bool>(false)
    private let state = Mutex(State())

    /// The failpoint named by `ACTORKV_FAILPOINT`, read once.
    private static let environmentFailpoint: String? = {
        guard let raw = getenv("ACTORKV_FAILPOINT") else { return nil }
        return String(cString: raw)
    }()

    /// Where this store's mutating file operations are recorded, if anywhere.
    public let recorder: FileOperationRecorder?

    /// An injector with nothing armed, recording into `recorder` if one is given.
    public init(recording recorder: FileOperationRecorder? = nil) {
        self.recorder = recorder
    }

    /// Makes the next `count` calls (every call when nil) of `operation` on a path containing
    /// `pathContains` fail with `errno`.
    public func failSyscall(_ operation: Operation, pathContains: String, errno: Int32, count: Int? = 1) {
        state.withLock {
            $0.syscallFaults.append(SyscallFault(operation: operation, pathContains: pathContains,
                                                 errno: errno, remaining: count))
        }
        armed.store(true, ordering: .relaxed)
    }

    /// Arms the failpoint `name` with `action`.
    public func arm(failpoint name: String, _ action: FailpointAction) {
        state.withLock { $0.failpoints[name] = action }
        armed.store(true, ordering: .relaxed)
    }

    /// Removes every armed fault and failpoint, and forgets the hits.
    public func reset() {
        state.withLock { $0 = State() }
        armed.store(false, ordering: .relaxed)
    }

    /// How often the failpoint `name` has been reached while anything was armed, since the last reset.
    public func hits(_ name: String) -> Int {
        state.withLock { $0.hits[name] ?? 0 }
    }

    /// Called by ``SystemCalls`` before each syscall: throws the injected errno if a fault matches.
    func check(_ operation: Operation, path: String) throws(Errno) {
        guard armed.load(ordering: .relaxed) else { return }
        let injected: Int32? = state.withLock { s in
            guard let i = s.syscallFaults.firstIndex(where: {
                $0.operation == operation && path.contains($0.pathContains)
            }) else { return nil }
            let code = s.syscallFaults[i].errno
            if let left = s.syscallFaults[i].remaining {
                if left <= 1 { s.syscallFaults.remove(at: i) } else { s.syscallFaults[i].remaining = left - 1 }
            }
            return code
        }
        if let injected { throw Errno(injected) }
    }

    /// Marks the named step `name` of the engine for a store whose injector is `injector`: exits
    /// if it is `ACTORKV_FAILPOINT`, then throws or exits if `injector` has it armed.
    static func failpoint(_ name: String, in injector: FaultInjector?) throws(StoreError) {
        if environmentFailpoint == name { _exit(86) }
        try injector?.failpoint(name)
    }

    /// Counts a hit of failpoint `name` and throws or exits if it is armed.
    private func failpoint(_ name: String) throws(StoreError) {
        guard armed.load(ordering: .relaxed) else { return }
        let action: FailpointAction? = state.withLock { s in
            s.hits[name, default: 0] += 1
            return s.failpoints[name]
        }
        switch action {
        case nil: return
        case .fail: throw StoreError(.io, "injected failure at failpoint \(name)")
        case .exit(let status): _exit(status)
        case .hold(let gate): gate.pass()
        }
    }
}

/// Holds the first thread that reaches a failpoint armed with ``FaultInjector/FailpointAction/hold(_:)``
/// until ``open()``, so that a test can act while a step is under way (write while a compaction
/// writes its snapshot). Later threads pass. The held thread sleeps in 1 ms steps: test use only.
public final class FailpointGate: Sendable, Equatable {
    private let state = Mutex((reached: false, opened: false))

    /// A closed gate.
    public init() {}

    /// Whether a thread has reached the failpoint.
    public var reached: Bool { state.withLock { $0.reached } }

    /// Lets the held thread go on, and every later one through.
    public func open() { state.withLock { $0.opened = true } }

    /// Called at the failpoint: the first caller waits until the gate is open.
    func pass() {
        let first = state.withLock { s in
            defer { s.reached = true }
            return !s.reached
        }
        guard first else { return }
        while !state.withLock({ $0.opened }) { usleep(1000) }
    }

    /// Gates are equal when they are the same gate.
    public static func == (lhs: FailpointGate, rhs: FailpointGate) -> Bool { lhs === rhs }
}
