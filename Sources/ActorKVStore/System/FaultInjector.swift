#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Test hooks: makes chosen syscalls fail and stops the process at named points.
///
/// Two kinds of fault, both off unless a test arms them:
/// - a syscall fault: the next `count` calls of one ``Operation`` on a path containing a given
///   text fail with an errno (ENOSPC on a log append, EIO on fsync, …);
/// - a failpoint: a named step of the engine (`compaction.afterRename`, …). When hit it either
///   throws (in-process tests) or ends the process at once with `_exit` (crash tests), the
///   latter also from the environment variable `ACTORKV_FAILPOINT=name`.
///
/// Unarmed, each check is one relaxed atomic load.
public enum FaultInjector {
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
        /// unlink(2)
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

    private static let armed = Atomic<Bool>(false)
    private static let state = Mutex(State())
    private static let environmentFailpoint: String? = {
        guard let raw = getenv("ACTORKV_FAILPOINT") else { return nil }
        return String(cString: raw)
    }()

    /// Makes the next `count` calls (every call when nil) of `operation` on a path containing
    /// `pathContains` fail with `errno`.
    public static func failSyscall(_ operation: Operation, pathContains: String, errno: Int32, count: Int? = 1) {
        state.withLock {
            $0.syscallFaults.append(SyscallFault(operation: operation, pathContains: pathContains,
                                                 errno: errno, remaining: count))
        }
        armed.store(true, ordering: .relaxed)
    }

    /// Arms the failpoint `name` with `action`.
    public static func arm(failpoint name: String, _ action: FailpointAction) {
        state.withLock { $0.failpoints[name] = action }
        armed.store(true, ordering: .relaxed)
    }

    /// Removes every armed fault and failpoint.
    public static func reset() {
        state.withLock { $0 = State() }
        armed.store(environmentFailpoint != nil, ordering: .relaxed)
    }

    /// How often the failpoint `name` has been reached since the last reset.
    public static func hits(_ name: String) -> Int {
        state.withLock { $0.hits[name] ?? 0 }
    }

    /// Called by ``SystemCalls`` before each syscall: throws the injected errno if a fault matches.
    static func check(_ operation: Operation, path: String) throws(Errno) {
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

    /// Marks a named step of the engine; throws or exits if that failpoint is armed.
    static func failpoint(_ name: String) throws(StoreError) {
        if environmentFailpoint == name { _exit(86) }
        guard armed.load(ordering: .relaxed) else { return }
        let action: FailpointAction? = state.withLock { s in
            s.hits[name, default: 0] += 1
            return s.failpoints[name]
        }
        switch action {
        case nil: return
        case .fail: throw StoreError(.io, "injected failure at failpoint \(name)")
        case .exit(let status): _exit(status)
        }
    }
}
