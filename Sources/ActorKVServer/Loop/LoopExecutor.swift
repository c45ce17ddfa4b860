#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// The executor of the event-loop thread: it runs jobs there, between epoll turns, both as a task
/// executor (tasks the loop starts prefer it) and as the serial executor of the namespace actors
/// (``ActorKVStore/StoreOptions/serialExecutor``).
///
/// As the namespaces' serial executor, it lets the loop run a turn's requests on a namespace
/// synchronously (``ActorKVStore/Store/executeNow(_:inNamespace:)``, after the isolation check
/// that `assumeIsolated` makes): read, run against the in-memory map, appended to the log and
/// answered with no task and no hop. fsync stays on each namespace's syncer queue and blocking
/// file work on ``BlockingIO``'s threads, so one namespace's fsync still never stalls the loop.
/// Jobs enqueued from other threads (a task resumed after an fsync, say) wake the loop.
///
/// Its jobs run one at a time wherever they run, as a serial executor's must: before the loop
/// attaches (while the store opens its namespaces) and after it stops (``detach()``), on one
/// serial Dispatch queue; in between, on the loop thread only. Attaching waits until the jobs
/// already handed to the queue have run.
final class LoopExecutor: TaskExecutor, SerialExecutor, @unchecked Sendable {
    private enum Mode { case early, attached, detached }
    private struct State {
        var jobs: [UnownedJob] = []
        var mode = Mode.early

        /// The waiting jobs, leaving none (swapped out: no copy, no new buffer).
        mutating func takeJobs() -> [UnownedJob] {
            var taken: [UnownedJob] = []
            swap(&jobs, &taken)
            return taken
        }
    }
    private let state = Mutex(State())
    /// The jobs ``runPending()`` takes, swapped with the waiting ones and kept, emptied but with
    /// its capacity, for the next swap: enqueuing a job then allocates nothing. Loop thread only.
    private var spare: [UnownedJob] = []
    private let wake: @Sendable () -> Void
    /// Where jobs run while the loop does not run them: serial, so the namespaces stay exclusive.
    private let offLoop = DispatchQueue(label: "actorkvd.loop-executor")
    /// The loop thread's `pthread_t`, once ``run()`` of the loop has started.
    private let loopThread = Atomic<UInt>(0)

    /// Creates an executor; `wake` must make the loop call ``runPending()`` soon.
    init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    /// Marks the calling thread as the loop thread: jobs wait for ``runPending()`` from now on,
    /// once those already handed to the serial queue (before the loop ran) have run.
    func attachToCurrentThread() {
        loopThread.store(pthread_self(), ordering: .releasing)
        state.withLock { $0.mode = .attached }
        offLoop.sync {}
    }

    /// Whether the caller runs on the loop thread.
    var isLoopThread: Bool {
        loopThread.load(ordering: .acquiring) == pthread_self()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let (wasEmpty, mode) = state.withLock { state -> (Bool, Mode) in
            guard state.mode == .attached else { return (false, state.mode) }
            state.jobs.append(job)
            return (state.jobs.count == 1, .attached)
        }
        if mode != .attached { runOffLoop(job); return }
        // The loop runs its queue empty before it waits again, so only other threads need to wake it.
        if wasEmpty && !isLoopThread { wake() }
    }

    /// Whether jobs are waiting.
    var hasPending: Bool { state.withLock { !$0.jobs.isEmpty } }

    /// Called when the loop stops: waiting jobs and all later ones run on the serial queue.
    func detach() {
        let left = state.withLock { state -> [UnownedJob] in
            state.mode = .detached
            return state.takeJobs()
        }
        for job in left { runOffLoop(job) }
    }

    /// The namespaces' code runs only in this executor's jobs or on the loop thread (the loop's
    /// synchronous runs); anything else is a bug.
    func checkIsolated() {
        precondition(isLoopThread, "a namespace was entered off the event loop's thread")
    }

    private func runOffLoop(_ job: UnownedJob) {
        offLoop.async { self.run(job) }
    }

    private func run(_ job: UnownedJob) {
        job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
    }

    /// Runs jobs until none are waiting, including jobs they enqueue. Loop thread only.
    func runPending() {
        var batch: [UnownedJob] = []
        swap(&batch, &spare)
        defer { swap(&batch, &spare) }
        while true {
            state.withLock { swap(&$0.jobs, &batch) }
            if batch.isEmpty { return }
            for job in batch { run(job) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
