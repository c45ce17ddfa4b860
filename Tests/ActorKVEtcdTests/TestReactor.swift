@testable import ActorKVEtcd
import CActorKVSys
import Foundation
import Glibc
import Synchronization

/// A ``Reactor`` for tests: a thread of its own running an edge-triggered epoll loop with jobs
/// and timers, as the server's event loop does for an agent.
final class TestReactor: Reactor, @unchecked Sendable {
    private let epollFD = actorkv_epoll_create()
    private let wakeFD = actorkv_eventfd()
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let stopping = Atomic<Bool>(false)
    private let thread = Atomic<UInt>(0)
    private let stopped = DispatchSemaphore(value: 0)
    // The loop thread's alone:
    private var handlers: [UInt64: (fd: Int32, handler: any ReactorHandler)] = [:]
    private var nextToken: UInt64 = 16
    private var timers: [(deadline: Double, job: @Sendable () -> Void)] = []

    init() {
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, wakeFD, ACTORKV_EPOLLIN, 1)
        let started = DispatchSemaphore(value: 0)
        Thread { [self] in
            thread.store(pthread_self(), ordering: .releasing)
            started.signal()
            run()
        }.start()
        started.wait()
    }

    /// Stops the thread (after running the jobs waiting) and closes its descriptors.
    func stop() {
        stopping.store(true, ordering: .releasing)
        wake()
        stopped.wait()
    }

    var isReactorThread: Bool { thread.load(ordering: .acquiring) == pthread_self() }

    func submit(_ job: @escaping @Sendable () -> Void) {
        if isReactorThread { return job() }
        jobs.withLock { $0.append(job) }
        wake()
    }

    func schedule(after seconds: Double, _ job: @escaping @Sendable () -> Void) {
        submit { self.timers.append((Self.now() + seconds, job)) }
    }

    func watch(_ fd: Int32, handler: any ReactorHandler) -> UInt64? {
        let token = nextToken
        let events = ACTORKV_EPOLLIN | ACTORKV_EPOLLOUT | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLET
        guard actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, fd, events, token) == 0 else { return nil }
        nextToken += 1
        handlers[token] = (fd, handler)
        return token
    }

    func unwatch(_ token: UInt64) {
        guard let entry = handlers.removeValue(forKey: token) else { return }
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_DEL, entry.fd, 0, 0)
    }

    private func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    private static func now() -> Double { ProcessInfo.processInfo.systemUptime }

    private func run() {
        let events = UnsafeMutableRawPointer.allocate(byteCount: actorkv_epoll_buffer_size(64), alignment: 8)
        defer {
            events.deallocate()
            close(epollFD)
            close(wakeFD)
            stopped.signal()
        }
        while !stopping.load(ordering: .acquiring) {
            let next = timers.map(\.deadline).min().map { Int32(max(0, ($0 - Self.now()) * 1000).rounded(.up)) } ?? -1
            let n = actorkv_epoll_wait(epollFD, events, 64, next)
            for i in 0..<max(0, Int(n)) {
                let token = actorkv_epoll_token(events, Int32(i))
                let flags = actorkv_epoll_flags(events, Int32(i))
                if token == 1 {
                    var count: UInt64 = 0
                    _ = Glibc.read(wakeFD, &count, 8)
                    for job in jobs.withLock({ j in defer { j = [] }; return j }) { job() }
                } else if let entry = handlers[token] {
                    let readable = flags & (ACTORKV_EPOLLIN | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLHUP | ACTORKV_EPOLLERR) != 0
                    entry.handler.ready(readable: readable, writable: flags & (ACTORKV_EPOLLOUT | ACTORKV_EPOLLERR) != 0)
                }
            }
            let now = Self.now()
            let due = timers.filter { $0.deadline <= now }
            timers.removeAll { $0.deadline <= now }
            for timer in due { timer.job() }
        }
        for job in jobs.withLock({ j in defer { j = [] }; return j }) { job() }
    }
}
