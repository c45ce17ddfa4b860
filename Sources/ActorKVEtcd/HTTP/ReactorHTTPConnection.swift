#if canImport(Glibc)
import Glibc
#endif

/// One keep-alive HTTP/1.1 connection to an etcd member driven by a ``Reactor``: a request is
/// written without blocking and its answer read as it arrives, on the reactor's thread, the
/// only thread that touches it. Its failures say whether the request may have reached the
/// member, as ``HTTPConnection``'s do.
final class ReactorHTTPConnection: ReactorHandler, @unchecked Sendable {
    /// What an exchange comes to.
    typealias Completion = @Sendable (Result<HTTPResponse, HTTPConnection.Failure>) -> Void

    /// The member it is connected to.
    let endpoint: EtcdEndpoint
    private let reactor: any Reactor
    private var fd: Int32
    private var token: UInt64?
    private var output: [UInt8] = []
    private var written = 0
    private var parser = HTTPResponseParser()
    private var received = 0
    private var completion: Completion?
    /// When the exchange under way fails for want of an answer (monotonic seconds).
    private(set) var deadline = Double.infinity
    /// Where answers are read into, kept between exchanges.
    private var buffer = [UInt8](repeating: 0, count: 16 * 1024)

    /// Takes over `fd`, a connected TCP socket, and has `reactor` watch it; nil (and `fd`
    /// closed) if it cannot.
    init?(fd: Int32, endpoint: EtcdEndpoint, reactor: any Reactor) {
        self.fd = fd
        self.endpoint = endpoint
        self.reactor = reactor
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        guard let token = reactor.watch(fd, handler: self) else {
            Glibc.close(fd)
            return nil
        }
        self.token = token
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// Whether it is open.
    var isOpen: Bool { fd >= 0 }

    /// Whether the member has closed it (or sent something unasked, which an idle HTTP/1.1
    /// connection must not have), seen without waiting: checked before an idle connection is
    /// used, so that a close while it was idle is found before a write is sent on it.
    var isClosedByPeer: Bool { HTTPConnection.isClosedByPeer(fd) }

    /// Sends `request` (a whole HTTP request) and calls `completion` once, on the reactor's
    /// thread, with the answer or the failure; ``timeOut()`` fails it if called first.
    func start(_ request: [UInt8], timeout: Double, completion: @escaping Completion) {
        precondition(self.completion == nil, "ReactorHTTPConnection: an exchange is under way")
        guard fd >= 0 else {
            completion(.failure(HTTPConnection.Failure(description: "\(endpoint): connection closed", sent: false)))
            return
        }
        self.completion = completion
        output = request
        written = 0
        parser = HTTPResponseParser()
        received = 0
        deadline = MonotonicClock.seconds() + timeout
        flush()
    }

    func ready(readable: Bool, writable: Bool) {
        guard fd >= 0 else { return }
        guard completion != nil else {
            // Idle: the member closed it, or wrote unasked. Either way it is of no more use.
            if readable { close() }
            return
        }
        if writable && written < output.count { flush() }
        if readable && completion != nil { receive() }
    }

    /// Fails the exchange under way: no answer came in time.
    func timeOut() {
        fail("no answer within the timeout", sent: written > 0)
    }

    /// Fails the exchange under way, if any (saying `reason`), and closes.
    func abort(_ reason: String) {
        if completion != nil { fail(reason, sent: written > 0) } else { close() }
    }

    /// Closes it (the reactor stops watching first).
    func close() {
        guard fd >= 0 else { return }
        if let token { reactor.unwatch(token) }
        token = nil
        Glibc.close(fd)
        fd = -1
    }

    /// Writes what is left of the request, until done or the socket is full (the reactor then
    /// says when it has room).
    private func flush() {
        while written < output.count {
            let n = output.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + written, $0.count - written, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                written += n
                continue
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return }
            fail("send: \(String(cString: strerror(errno)))", sent: written > 0)
            return
        }
    }

    /// Reads what has arrived, until the answer is whole or the socket is empty. A close
    /// before any byte of an answer counts as sent (the member may have read the request
    /// before it died).
    private func receive() {
        while completion != nil {
            let n = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                received += n
                parser.feed(buffer[0..<n])
                do throws(HTTPResponseParser.Malformed) {
                    if let response = try parser.response() { finish(.success(response)) }
                } catch {
                    fail(error.description, sent: true)
                }
            } else if n == 0 {
                guard received > 0 else {
                    fail("the connection closed before any answer", sent: true)
                    return
                }
                do throws(HTTPResponseParser.Malformed) {
                    let response = try parser.finish()
                    close()
                    finish(.success(response))
                } catch {
                    fail(error.description, sent: true)
                }
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                fail(String(cString: strerror(errno)), sent: true)
            }
        }
    }

    private func fail(_ description: String, sent: Bool) {
        close()
        guard completion != nil else { return }
        finish(.failure(HTTPConnection.Failure(description: "\(endpoint): \(description)", sent: sent)))
    }

    private func finish(_ result: Result<HTTPResponse, HTTPConnection.Failure>) {
        guard let done = completion else { return }
        completion = nil
        deadline = .infinity
        output = []
        if case .success(let response) = result, !response.keepAlive { close() }
        done(result)
    }
}
