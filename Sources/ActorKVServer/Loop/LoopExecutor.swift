#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// A task executor that runs jobs on the event-loop thread, between its epoll turns.
///
/// The loop starts each turn's requests in a task that prefers this executor, so the namespace
/// actors (default actors) run on the loop thread when they are free: a request is read, run
/// against the in-memory map, appended to the log and answered without handing it to another
/// thread and back. fsync stays on each namespace's syncer queue and blocking file work on
/// ``BlockingIO``'s threads, so one namespace's fsync still never stalls the loop.
/// Jobs enqueued from other threads (a task resumed after an fsync, say) wake the loop.
/// Once the loop has stopped (``detach()``), jobs run on Dispatch threads instead, so that a task
/// still waiting then (past the shutdown grace) cannot leave an actor unscheduled.
final class LoopExecutor: TaskExecutor, @unchecked Sendable {
    private struct State {
        var jobs: [UnownedJob] = []
        var detached = false

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
    /// The loop thread's `pthread_t`, once ``run()`` of the loop has started.
    private let loopThread = Atomic<UInt>(0)

    /// Creates an executor; `wake` must make the loop call ``runPending()`` soon.
    init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    /// Marks the calling thread as the loop thread.
    func attachToCurrentThread() {
        loopThread.store(pthread_self(), ordering: .releasing)
    }

    /// Whether the caller runs on the loop thread.
    var isLoopThread: Bool {
        loopThread.load(ordering: .acquiring) == pthread_self()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let (wasEmpty, detached) = state.withLock { state -> (Bool, Bool) in
            if state.detached { return (false, true) }
            state.jobs.append(job)
            return (state.jobs.count == 1, false)
        }
        if detached { runElsewhere(job); return }
        // The loop runs its queue empty before it waits again, so only other threads need to wake it.
        if wasEmpty && !isLoopThread { wake() }
    }

    /// Whether jobs are waiting.
    var hasPending: Bool { state.withLock { !$0.jobs.isEmpty } }

    /// Called when the loop stops: waiting jobs and all later ones run on Dispatch threads.
    func detach() {
        let left = state.withLock { state -> [UnownedJob] in
            state.detached = true
            return state.takeJobs()
        }
        for job in left { runElsewhere(job) }
    }

    private func runElsewhere(_ job: UnownedJob) {
        DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Runs jobs until none are waiting, including jobs they enqueue. Loop thread only.
    func runPending() {
        let unowned = asUnownedTaskExecutor()
        var batch: [UnownedJob] = []
        swap(&batch, &spare)
        defer { swap(&batch, &spare) }
        while true {
            state.withLock { swap(&$0.jobs, &batch) }
            if batch.isEmpty { return }
            for job in batch { job.runSynchronously(on: unowned) }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
