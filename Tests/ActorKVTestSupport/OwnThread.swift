import Foundation
import Synchronization

/// How many ``onOwnThread(_:)`` bodies may run at once: the machine's cores, at least 2 (as many
/// blocking tests as the cooperative pool ran at once when they blocked it).
public let ownThreadLimit = max(2, ProcessInfo.processInfo.activeProcessorCount)

/// Runs `body`, which blocks (sockets read and written blocking, child processes waited for,
/// `usleep` polls), on a thread of its own rather than on Swift's cooperative pool, and returns
/// what it returns. At most ``ownThreadLimit`` bodies run at once; the others wait their turn
/// suspended, holding no thread.
///
/// The pool has as many threads as the machine has cores (2 on the CI machine): a few blocking
/// tests on it stall every other test in the process, and a test that judges "in time" from its
/// own instants (a timeout test) then sees its reply arrive seconds late. `body` runs in a child
/// task, so `#expect` and `Issue.record` inside it belong to the calling test as usual.
///
///     @Test func quitRepliesThenCloses() async throws {
///         try await onOwnThread {
///             let server = try ServerProcess()
///             …
///         }
///     }
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    await OwnThreadGate.shared.enter()
    defer { OwnThreadGate.shared.leave() }
    return try await withThrowingTaskGroup(of: T.self) { group in
        // A child task's first job goes to its preferred executor, and `body` never suspends:
        // it runs whole on the thread that executor starts.
        group.addTask(executorPreference: ThreadPerJobExecutor.shared) { try body() }
        return try await group.next()!
    }
}

/// Whether the caller runs on a thread ``onOwnThread(_:)`` started (for its own test). Marked in
/// the thread's own dictionary, not judged by its name: on Linux a new thread inherits its
/// creator's name, so a thread started from one of ours (a Dispatch worker, say) carries it too.
public var isOnOwnThread: Bool {
    Thread.current.threadDictionary[ThreadPerJobExecutor.threadName] as? Bool == true
}

/// A task executor that runs every job on a new thread: a job may block as long as it likes
/// without holding up any other. Only for tests, where such jobs are few.
final class ThreadPerJobExecutor: TaskExecutor {
    static let shared = ThreadPerJobExecutor()
    /// The name of the threads it starts (seen in debuggers), and the key that marks them.
    static let threadName = "akv-own-thread"  // at most 15 bytes: Linux thread names are that short

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let thread = Thread {
            Thread.current.name = ThreadPerJobExecutor.threadName
            Thread.current.threadDictionary[ThreadPerJobExecutor.threadName] = true
            job.runSynchronously(on: ThreadPerJobExecutor.shared.asUnownedTaskExecutor())
        }
        thread.start()
    }
}

/// Lets at most ``ownThreadLimit`` blocking bodies run at once; the others await their turn (suspended,
/// holding no thread), first come first served.
final class OwnThreadGate: Sendable {
    static let shared = OwnThreadGate()

    private struct State {
        var inside = 0
        var waiting: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())

    /// Returns once the caller may run.
    func enter() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let admitted = state.withLock { state -> Bool in
                guard state.inside < ownThreadLimit else {
                    state.waiting.append(continuation)
                    return false
                }
                state.inside += 1
                return true
            }
            if admitted { continuation.resume() }
        }
    }

    /// Hands the caller's place to the first waiting caller, or frees it.
    func leave() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard !state.waiting.isEmpty else {
                state.inside -= 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
