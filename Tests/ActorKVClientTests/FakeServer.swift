import ActorKVTestSupport
import Foundation
import Glibc
import Synchronization

/// A Unix-socket listener that plays a server misbehaving in a chosen way, for the tests of
/// timeouts and refusals: it runs `handle` on each connection it accepts, on its own thread.
/// `handle` returns whether to keep the connection open (until ``stop()``) or close it now.
/// With `accepting: false` it never accepts: connections wait in its queue of `backlog`.
final class FakeServer: Sendable {
    /// The socket's path, in a private temporary directory.
    let path: String
    private let directory: TemporaryDirectory
    private let listener: Int32
    private let stopping = Atomic<Bool>(false)
    private let kept = Mutex<[Int32]>([])
    private let acceptorDone = DispatchSemaphore(value: 0)
    private let accepting: Bool

    init(backlog: Int32 = 16, accepting: Bool = true, handle: @escaping @Sendable (Int32) -> Bool = { _ in true }) throws {
        directory = TemporaryDirectory("akf")
        path = directory.path + "/s"
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.accepting = accepting
        var address = unixSocketAddress(path)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard listener >= 0, bound == 0, listen(listener, backlog) == 0 else {
            let message = "cannot listen on \(path): \(errnoString())"
            if listener >= 0 { close(listener) }
            throw TestFailure(message)
        }
        guard accepting else { return }
        let thread = Thread { [self] in
            defer { acceptorDone.signal() }
            while !stopping.load(ordering: .acquiring) {
                var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 20) > 0 else { continue }
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { continue }
                if handle(connection) {
                    kept.withLock { $0.append(connection) }
                } else {
                    close(connection)
                }
            }
        }
        thread.start()
    }

    /// Stops accepting, closes every connection kept open and the listener, removes the directory.
    /// Later calls do nothing. `handle` must have returned (or return soon: the acceptor is waited for).
    func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if accepting { acceptorDone.wait() }
        for fd in kept.withLock({ fds in defer { fds = [] }; return fds }) { close(fd) }
        close(listener)
        directory.remove()
    }
}

/// Writes all of `bytes` to `fd` (a test's end of a socket); false if a write failed.
@discardableResult
func writeBytes(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
        if n > 0 { offset += n; continue }
        if n < 0 && errno == EINTR { continue }
        return false
    }
    return true
}

/// The text of the current errno.
func errnoString() -> String { String(cString: strerror(errno)) }

/// Runs `body` in a task and waits for it, at most `seconds`; if it has not finished by then,
/// calls `unblock` (which must make it finish: resume a stopped server, close a listener) and
/// waits again. Returns the result and whether it finished within `seconds` on its own, so that a
/// test of something that must not hang fails rather than hangs when it does.
func finishing<T: Sendable>(within seconds: Double, unblock: () async throws -> Void,
                            _ body: @escaping @Sendable () async -> T) async rethrows -> (T, inTime: Bool) {
    let started = Mutex<ContinuousClock.Instant?>(nil), finished = Mutex<ContinuousClock.Instant?>(nil)
    let task = Task {
        started.withLock { $0 = .now }
        let result = await body()
        finished.withLock { $0 = .now }
        return result
    }
    // The time allowed counts from when the body starts: in a full test run, synchronous tests
    // blocking the cooperative pool's few threads can delay that by seconds. For the same reason
    // this watchdog may itself run late, so whether the body was in time is judged from the
    // instants it recorded, not from when the watchdog noticed.
    let allowed = Duration.milliseconds(Int(seconds * 1000))
    while started.withLock({ $0 }) == nil { try? await Task.sleep(for: .milliseconds(10)) }
    let deadline = started.withLock { $0! } + allowed
    while finished.withLock({ $0 }) == nil && ContinuousClock.now < deadline {
        try? await Task.sleep(for: .milliseconds(10))
    }
    if finished.withLock({ $0 }) == nil { try await unblock() }
    let result = await task.value
    let inTime = finished.withLock { $0! } - started.withLock { $0! } <= allowed
    return (result, inTime)
}

