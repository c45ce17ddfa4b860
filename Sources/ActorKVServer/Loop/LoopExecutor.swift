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
///
/// The two roles are two objects, so that each job runs as what it was enqueued for: a task's
/// job (``enqueue(_:)``) on the task executor, outside any actor, where the nonisolated async
/// functions it calls need no hop; a namespace's job (``serial``) isolated to the namespaces'
/// serial executor. (Run isolated to the serial executor, a task's job made every nonisolated
/// async function it entered hop off it again: a job more per call.)
final class LoopExecutor: TaskExecutor, @unchecked Sendable {
    private enum Mode { case early, attached, detached }
    /// A job and whether it is a namespace's (enqueued on ``serial``) rather than a task's.
    private typealias Job = (job: UnownedJob, isolated: Bool)
    private struct State {
        var jobs: [Job] = []
        var mode = Mode.early

        /// The waiting jobs, leaving none (swapped out: no copy, no new buffer).
        mutating func takeJobs() -> [Job] {
            var taken: [Job] = []
            swap(&jobs, &taken)
            return taken
        }
    }

    /// The namespaces' serial executor (``ActorKVStore/StoreOptions/serialExecutor``): its jobs
    /// go into this executor's queue and run isolated to it.
    final class Serial: SerialExecutor, @unchecked Sendable {
        unowned let loop: LoopExecutor
        init(loop: LoopExecutor) { self.loop = loop }

        func enqueue(_ job: consuming ExecutorJob) {
            loop.enqueue(UnownedJob(job), isolated: true)
        }

        /// The namespaces' code runs only in this executor's jobs or on the loop thread (the
        /// loop's synchronous runs); anything else is a bug.
        func checkIsolated() {
            precondition(loop.isLoopThread, "a namespace was entered off the event loop's thread")
        }
    }

    /// The namespaces' serial executor. (It holds this executor unowned: the store that runs
    /// namespaces on it holds this one too, as its background executor.)
    private(set) var serial: Serial!
    private let state = Mutex(State())
    /// The jobs ``runPending()`` takes, swapped with the waiting ones and kept, emptied but with
    /// its capacity, for the next swap: enqueuing a job then allocates nothing. Loop thread only.
    private var spare: [Job] = []
    private let wake: @Sendable () -> Void
    /// Where jobs run while the loop does not run them: serial, so the namespaces stay exclusive.
    private let offLoop = DispatchQueue(label: "actorkvd.loop-executor")
    /// The loop thread's `pthread_t`, once ``run()`` of the loop has started.
    private let loopThread = Atomic<UInt>(0)

    /// Creates an executor; `wake` must make the loop call ``runPending()`` soon.
    init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
        serial = Serial(loop: self)
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
        enqueue(UnownedJob(job), isolated: false)
    }

    private func enqueue(_ job: UnownedJob, isolated: Bool) {
        let (wasEmpty, mode) = state.withLock { state -> (Bool, Mode) in
            guard state.mode == .attached else { return (false, state.mode) }
            state.jobs.append((job, isolated))
            return (state.jobs.count == 1, .attached)
        }
        if mode != .attached { runOffLoop((job, isolated)); return }
        // The loop runs its queue empty before it waits again, so only other threads need to wake it.
        if wasEmpty && !isLoopThread { wake() }
    }

    /// Whether jobs are waiting.
    var hasPending: Bool { state.withLock { !$0.jobs.isEmpty } }

    /// Called when the loop stops: waiting jobs and all later ones run on the serial queue.
    func detach() {
        let left = state.withLock { state -> [Job] in
            state.mode = .detached
            return state.takeJobs()
        }
        for job in left { runOffLoop(job) }
    }

    private func runOffLoop(_ job: Job) {
        offLoop.async { self.run(job) }
    }

    /// Jobs run so far, of both kinds (for tests: how many jobs a piece of work took).
    let jobsRun = Atomic<Int>(0)

    private func run(_ job: Job) {
        jobsRun.add(1, ordering: .relaxed)
        if job.isolated {
            job.job.runSynchronously(isolatedTo: serial.asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        } else {
            job.job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }

    /// Runs jobs until none are waiting, including jobs they enqueue. Loop thread only.
    func runPending() {
        var batch: [Job] = []
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
