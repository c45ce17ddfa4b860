import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

/// `onOwnThread`, which the blocking tests rely on to keep Swift's cooperative pool free for
/// the rest of the run.
@Suite("Test support: blocking test bodies run on threads of their own")
struct OwnThreadTests {
    @Test("the body runs on a thread of its own; the test around it runs on the pool")
    func bodyRunsOffThePool() async throws {
        #expect(!isOnOwnThread)
        #expect(try await onOwnThread { isOnOwnThread })
        #expect(try await onOwnThread { 6 * 7 } == 42)
    }

    @Test("a thread started from a body's thread is not taken for one (Linux threads inherit their creator's name)")
    func threadsStartedFromABodyAreNotOwnThreads() async throws {
        let seen = try await onOwnThread { () -> Bool in
            let result = Mutex<Bool?>(nil)
            let done = DispatchSemaphore(value: 0)
            Thread { result.withLock { $0 = isOnOwnThread }; done.signal() }.start()
            done.wait()
            return result.withLock { $0 } ?? true
        }
        #expect(!seen)
    }

    @Test("an expectation that fails inside the body is recorded for the test, and an error is rethrown")
    func issuesAndErrorsReachTheTest() async throws {
        await withKnownIssue("an expectation inside the body that is recorded for this test") {
            try await onOwnThread { #expect(Bool(false)) }
        }
        struct Failure: Error {}
        await #expect(throws: Failure.self) { try await onOwnThread { throw Failure() } }
    }

    @Test("no more bodies run at once than the limit, and all of them run")
    func boundedConcurrency() async throws {
        let limit = ownThreadLimit
        let probe = Probe()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<(limit + 3) {
                group.addTask { try await onOwnThread { probe.hold() } }
            }
            try await group.waitForAll()
        }
        let (_, most, done) = probe.result
        #expect(done == limit + 3)
        #expect(most <= limit)
    }
}

/// Counts bodies running at once (a class, so the @Sendable bodies can share it).
private final class Probe: Sendable {
    private let counts = Mutex((running: 0, most: 0, done: 0))
    func hold() {
        counts.withLock { $0.running += 1; $0.most = max($0.most, $0.running) }
        usleep(100_000)
        counts.withLock { $0.running -= 1; $0.done += 1 }
    }
    var result: (running: Int, most: Int, done: Int) { counts.withLock { $0 } }
}
