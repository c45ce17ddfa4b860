@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The event loop's executor as the namespaces' serial executor: their jobs never overlap,
/// wherever they run (a serial queue before the loop attaches and after it stops, the loop
/// thread in between), and the loop thread can enter a namespace synchronously.
@Suite("The loop executor: one job at a time before, during and after the loop; namespaces entered synchronously on the loop")
struct LoopExecutorTests {
    /// An actor on a given serial executor that notices overlapping calls and records where it ran.
    actor Probe {
        let executor: LoopExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.serial.asUnownedSerialExecutor() }
        private var inside = false
        private(set) var overlaps = 0
        private(set) var calls = 0
        private(set) var threads: Set<UInt> = []

        init(on executor: LoopExecutor) { self.executor = executor }

        func call() {
            if inside { overlaps += 1 }
            inside = true
            usleep(200)  // long enough for a second thread, if any ran this actor's jobs, to come in
            calls += 1
            threads.insert(UInt(pthread_self()))
            inside = false
        }

        /// Holds the actor (and the thread running it) until `gate` opens, after signalling `entered`.
        func hold(entered: DispatchSemaphore, gate: DispatchSemaphore) {
            if inside { overlaps += 1 }
            inside = true
            entered.signal()
            gate.wait()
            calls += 1
            inside = false
        }
    }

    /// A thread that attaches to the executor and runs its jobs until told to stop, as the loop does.
    final class FakeLoop: @unchecked Sendable {
        let executor: LoopExecutor
        let thread = Atomic<UInt>(0)
        private let stop = Atomic<Bool>(false)
        private let done = DispatchSemaphore(value: 0)
        private let wake = DispatchSemaphore(value: 0)

        init() {
            let wake = self.wake
            executor = LoopExecutor { wake.signal() }
        }

        /// Starts the thread; `body` runs on it once attached, before it serves jobs. Returns once
        /// the thread has attached, or, with `beforeAttaching`, once it is about to (attaching may
        /// wait for the serial queue).
        func start(beforeAttaching: Bool = false, _ body: @escaping @Sendable (LoopExecutor) -> Void = { _ in }) {
            let starting = DispatchSemaphore(value: 0)
            let thread = Thread { [self] in
                if beforeAttaching { starting.signal() }
                executor.attachToCurrentThread()
                self.thread.store(UInt(pthread_self()), ordering: .releasing)
                if !beforeAttaching { starting.signal() }
                body(executor)
                while !stop.load(ordering: .acquiring) {
                    executor.runPending()
                    _ = wake.wait(timeout: .now() + .milliseconds(20))
                }
                executor.detach()
                done.signal()
            }
            thread.start()
            starting.wait()
        }

        /// Stops the thread (it detaches the executor) and waits for it.
        func finish() {
            stop.store(true, ordering: .releasing)
            wake.signal()
            done.wait()
        }
    }

    private static func callConcurrently(_ probe: Probe, times: Int) async {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<times { group.addTask { await probe.call() } }
        }
    }

    @Test("before the loop attaches, after it stops, and in between, an actor's jobs never overlap; in between they run on the loop thread")
    func jobsAreSerialEverywhere() async {
        let loop = FakeLoop()
        let probe = Probe(on: loop.executor)
        await Self.callConcurrently(probe, times: 200)  // not attached yet: the serial queue
        #expect(await probe.calls == 200)
        #expect(await probe.overlaps == 0)

        loop.start()
        let before = await probe.threads
        await Self.callConcurrently(probe, times: 200)
        let loopThread = loop.thread.load(ordering: .acquiring)
        let during = await probe.threads.subtracting(before)
        #expect(during.isEmpty || during == [loopThread], "while attached, jobs run on the loop thread only")
        #expect(await probe.threads.contains(loopThread))

        loop.finish()
        await Self.callConcurrently(probe, times: 200)  // detached: the serial queue again
        #expect(await probe.calls == 600)
        #expect(await probe.overlaps == 0)
    }

    @Test("attaching waits for a job still running on the serial queue: the loop runs nothing of the actor meanwhile")
    func attachWaitsForTheQueue() async {
        let loop = FakeLoop()
        let probe = Probe(on: loop.executor)
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        let held = Task { await probe.hold(entered: entered, gate: gate) }  // not attached: runs on the queue
        entered.wait()
        loop.start(beforeAttaching: true)  // attaches while the queue's job holds the actor
        usleep(20_000)  // the thread has switched the executor to the loop by now
        let later = Task { await probe.call() }  // for the loop thread, once attached
        usleep(100_000)  // ample time for a loop that did not wait to run it
        gate.signal()
        await held.value
        await later.value
        #expect(await probe.calls == 2)
        #expect(await probe.overlaps == 0, "the loop ran the actor's job while the queue still ran one")
        loop.finish()
    }

    @Test("a task that prefers the loop executor runs there as a task: the nonisolated async functions it calls run in its own job, with no job more per call, and an actor on the serial side is still entered in a job of its own")
    func tasksRunOutsideTheNamespaces() async {
        let loop = FakeLoop()
        loop.start()
        let probe = Probe(on: loop.executor)
        let before = loop.executor.jobsRun.load(ordering: .relaxed)
        let (sum, thread) = await Task(executorPreference: loop.executor) { () -> (Int, UInt) in
            var sum = 0
            for step in 0..<50 { sum += await Self.nonisolatedStep(step) }
            return (sum, UInt(pthread_self()))
        }.value
        let jobs = loop.executor.jobsRun.load(ordering: .relaxed) - before
        #expect(sum == 1225)
        #expect(thread == loop.thread.load(ordering: .acquiring), "the task ran off the loop thread")
        // Run isolated to the serial executor, each call would hop off it: 50 jobs or more.
        #expect(jobs <= 3, "\(jobs) jobs for one task's 50 calls of a nonisolated async function")
        await probe.call()
        #expect(await probe.threads == [loop.thread.load(ordering: .acquiring)])
        loop.finish()
    }

    /// A nonisolated async function that does not suspend.
    nonisolated static func nonisolatedStep(_ step: Int) async -> Int { step }

    /// A store in `directory` whose namespaces run on `loop`'s executor, as the server's do.
    static func store(in directory: TemporaryDirectory, runningOn loop: FakeLoop) throws -> Store {
        var options = StoreOptions()
        options.serialExecutor = loop.executor.serial
        options.backgroundExecutor = loop.executor
        return try Store(directory: directory.path, options: options)
    }

    @Test("on the loop thread, Store.executeNow runs an open namespace's operations at once; it is nil without the executor or for a namespace not open")
    func executeNowOnTheLoop() async throws {
        let directory = TemporaryDirectory()
        let loop = FakeLoop()
        let store = try Self.store(in: directory, runningOn: loop)
        _ = try await store.namespace("open")  // recovered on the serial queue: the loop is not attached yet
        let results = Mutex<[[Outcome]?]>([])
        let finished = DispatchSemaphore(value: 0)
        loop.start { _ in
            let key = Array("k".utf8)[...]
            let put = store.executeNow([.put(key: key, value: Array("v".utf8)[...])], inNamespace: "open")
            let get = store.executeNow([.get(key)], inNamespace: "open")
            let missing = store.executeNow([.get(key)], inNamespace: "other")
            results.withLock { $0 = [put?.outcomes, get?.outcomes, missing?.outcomes] }
            finished.signal()
        }
        finished.wait()
        let outcomes = results.withLock { $0 }
        #expect(outcomes[0] == [.stored])
        #expect(outcomes[1] == [.value(Array("v".utf8))], "the GET sees the PUT run just before it")
        #expect(outcomes[2] == nil, "a namespace not open is left to the asynchronous path")
        let execution = await store.execute([.get(Array("k".utf8)[...])], inNamespace: "open")
        #expect(execution.outcomes == [.value(Array("v".utf8))])
        loop.finish()
        _ = await store.close()

        let plain = try Store(directory: TemporaryDirectory().path, options: StoreOptions())
        _ = try await plain.namespace("open")
        #expect(plain.executeNow([.get(Array("k".utf8)[...])], inNamespace: "open") == nil)
        _ = await plain.close()
    }

    @Test("Store.executeNow, going round more namespaces than it remembers (names of one length), reaches each one's own keys")
    func executeNowRoundNamespaces() async throws {
        let directory = TemporaryDirectory()
        let loop = FakeLoop()
        let store = try Self.store(in: directory, runningOn: loop)
        let names = (1...6).map { "n\($0)" }
        // Written in one order, read back in others, each name coming back after the rest.
        let reads = names.reversed() + names + [names[2], names[2], names[0]]
        for name in names { _ = try await store.namespace(name) }
        let seen = Mutex<[[Outcome]?]>([])
        let finished = DispatchSemaphore(value: 0)
        loop.start { _ in
            let key = Array("k".utf8)[...]
            for name in names { _ = store.executeNow([.put(key: key, value: Array(name.utf8)[...])], inNamespace: name) }
            for name in reads {
                let outcomes = store.executeNow([.get(key)], inNamespace: name)?.outcomes
                seen.withLock { $0.append(outcomes) }
            }
            finished.signal()
        }
        finished.wait()
        #expect(seen.withLock { $0 } == reads.map { [Outcome.value(Array($0.utf8))] })
        loop.finish()
        _ = await store.close()
    }
}
