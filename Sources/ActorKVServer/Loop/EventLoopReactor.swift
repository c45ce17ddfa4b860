#if canImport(Glibc)
import Glibc
#endif
import ActorKVEtcd
import CActorKVSys
import Synchronization

/// What the event loop keeps of the descriptors, jobs and timers it runs as a ``Reactor``
/// (cluster mode's connections to etcd). Loop thread only, except `jobs` and `thread`.
final class ReactorRegistry: @unchecked Sendable {
    /// Tokens from here up name reactor descriptors in epoll (connections count up from 16).
    static let firstToken: UInt64 = 1 << 62
    @exclusivity(unchecked) var handlers: [UInt64: (fd: Int32, handler: any ReactorHandler)] = [:]
    @exclusivity(unchecked) var nextToken = firstToken
    @exclusivity(unchecked) var timers: [(deadline: Double, job: @Sendable () -> Void)] = []
    /// Jobs submitted from other threads; once the loop has stopped, none are queued.
    let jobs = Mutex<(queued: [@Sendable () -> Void], stopped: Bool)>(([], false))
    /// The loop thread's `pthread_t`, while it runs.
    let thread = Atomic<UInt>(0)
}

extension EventLoop: Reactor {
    var isReactorThread: Bool { reactor.thread.load(ordering: .acquiring) == pthread_self() }

    /// Once the loop has stopped, `job` runs on the caller's thread (the reactor's users have
    /// let go of it by then: a job can only fail what was under way).
    func submit(_ job: @escaping @Sendable () -> Void) {
        if isReactorThread {
            job()
            return
        }
        // nil: the loop has stopped; true: the first job waiting (the loop must be woken).
        let first = reactor.jobs.withLock { jobs -> Bool? in
            guard !jobs.stopped else { return nil }
            jobs.queued.append(job)
            return jobs.queued.count == 1
        }
        switch first {
        case nil: job()
        case true?: wake()
        case false?: break
        }
    }

    func schedule(after seconds: Double, _ job: @escaping @Sendable () -> Void) {
        submit { self.reactor.timers.append((monotonicSeconds() + seconds, job)) }
    }

    func watch(_ fd: Int32, handler: any ReactorHandler) -> UInt64? {
        let token = reactor.nextToken
        let events = ACTORKV_EPOLLIN | ACTORKV_EPOLLOUT | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLET
        guard actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, fd, events, token) == 0 else { return nil }
        reactor.nextToken += 1
        reactor.handlers[token] = (fd, handler)
        return token
    }

    func unwatch(_ token: UInt64) {
        guard let entry = reactor.handlers.removeValue(forKey: token) else { return }
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_DEL, entry.fd, 0, 0)
    }

    // MARK: - The loop's side

    /// Starts serving as the back end's reactor (the loop thread, as it starts).
    func startReactor() {
        reactor.thread.store(pthread_self(), ordering: .releasing)
        processor.backend.attach(to: self)
    }

    /// Stops serving as a reactor (the loop thread, as it stops): the back end's exchanges
    /// under way fail, and jobs submitted later run on their callers' threads.
    func stopReactor() {
        processor.backend.detachFromReactor()
        let left = reactor.jobs.withLock { jobs -> [@Sendable () -> Void] in
            jobs.stopped = true
            defer { jobs.queued = [] }
            return jobs.queued
        }
        for job in left { job() }
        reactor.timers.removeAll()
        reactor.thread.store(0, ordering: .releasing)
    }

    /// Passes an epoll event to the handler of reactor token `token`.
    func reactorEvent(_ token: UInt64, flags: UInt32) {
        guard let entry = reactor.handlers[token] else { return }
        let readable = flags & (ACTORKV_EPOLLIN | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLHUP | ACTORKV_EPOLLERR) != 0
        entry.handler.ready(readable: readable, writable: flags & (ACTORKV_EPOLLOUT | ACTORKV_EPOLLERR) != 0)
    }

    /// Runs the jobs other threads submitted.
    func runReactorJobs() {
        let jobs = reactor.jobs.withLock { jobs -> [@Sendable () -> Void] in
            defer { jobs.queued.removeAll(keepingCapacity: true) }
            return jobs.queued
        }
        for job in jobs { job() }
    }

    /// Runs the timers that are due.
    func runDueTimers() {
        guard !reactor.timers.isEmpty else { return }
        let now = monotonicSeconds()
        let due = reactor.timers.filter { $0.deadline <= now }
        guard !due.isEmpty else { return }
        reactor.timers.removeAll { $0.deadline <= now }
        for timer in due { timer.job() }
    }

    /// `timeout` (milliseconds for epoll_wait, -1: none) shortened to the next timer.
    func untilNextTimer(_ timeout: Int32) -> Int32 {
        guard let next = reactor.timers.map(\.deadline).min() else { return timeout }
        let milliseconds = Int32(max(0, min(60_000, ((next - monotonicSeconds()) * 1000).rounded(.up))))
        return timeout < 0 ? milliseconds : min(timeout, milliseconds)
    }
}
