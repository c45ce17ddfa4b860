#if canImport(Glibc)
import Glibc
#endif

/// One HTTP/1.1 connection over TCP, with blocking I/O bounded by timeouts: the agent's link to
/// one etcd member. Used by one thread at a time (a pool hands it out), so it needs no lock.
///
/// Failures say whether the request may have reached the server (``Failure/sent``): a request
/// that was not sent may be retried anywhere; a write that was sent and got no answer has an
/// unknown outcome.
public final class HTTPConnection: @unchecked Sendable {
    /// A failed exchange.
    public struct Failure: Error, CustomStringConvertible {
        /// What failed.
        public let description: String
        /// Whether the request was (perhaps partly) sent before the failure.
        public let sent: Bool
    }

    /// The host and port it is connected to.
    public let endpoint: EtcdEndpoint
    private var fd: Int32
    /// The last time it was used, for dropping idle connections (seconds, monotonic).
    var lastUsed: Double

    /// Connects to `endpoint` within `timeout` seconds; each later read and write may take as long.
    public init(endpoint: EtcdEndpoint, timeout: Double) throws(Failure) {
        self.endpoint = endpoint
        fd = try Self.connect(endpoint, timeout: timeout)
        lastUsed = MonotonicClock.seconds()
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// Hands its socket over to the caller, who closes it; the connection is closed.
    func takeDescriptor() -> Int32 {
        defer { fd = -1 }
        return fd
    }

    /// Closes it; later exchanges fail.
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Where answers are read into, kept between exchanges (a small answer needs no allocation).
    private var receiveBuffer = [UInt8](repeating: 0, count: 16 * 1024)

    /// Sends a POST of `body` (JSON) to `path`, with `headers` (whole lines, no line end) added,
    /// and reads the whole response. A close with no byte of an answer counts as sent: the
    /// server may have read the request before it died (a member killed after it took a write),
    /// so a write's outcome is unknown. Check an idle connection with ``isClosedByPeer`` before
    /// reusing it, so that a close while it was idle is found before sending.
    public func post(_ path: String, body: [UInt8], headers: [String] = []) throws(Failure) -> HTTPResponse {
        try send(path, body: body, headers: headers)
        var parser = HTTPResponseParser()
        var received = 0
        while true {
            let n = try receive(into: &receiveBuffer)
            received += n
            do {
                if n == 0 && received == 0 {
                    close()
                    throw Failure(description: "\(endpoint): the connection closed before any answer", sent: true)
                }
                guard n > 0 else { return try parser.finish() }
                parser.feed(receiveBuffer[0..<n])
                if let response = try parser.response() {
                    lastUsed = MonotonicClock.seconds()
                    if !response.keepAlive { close() }
                    return response
                }
            } catch let error as HTTPResponseParser.Malformed {
                close()
                throw Failure(description: "\(endpoint): \(error.description)", sent: true)
            } catch {
                throw error as! Failure
            }
        }
    }

    /// Sends a POST whose response is a stream (etcd's watch), with `headers` (whole lines, no
    /// line end) added: `handle` gets each chunk as it arrives and returns false to stop; after
    /// each read timeout with nothing received, `idle` says whether to go on waiting. Returns
    /// when the stream ends or either says stop; throws when the connection fails or the answer
    /// is not a 200. The connection is closed when it returns.
    public func stream(_ path: String, body: [UInt8], headers: [String] = [], handle: ([UInt8]) -> Bool,
                       idle: () -> Bool) throws(Failure) {
        defer { close() }
        try send(path, body: body, headers: headers)
        var parser = HTTPResponseParser()
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            guard let n = try receive(into: &chunk, timeoutIsIdle: true) else {
                guard idle() else { return }
                continue
            }
            guard n > 0 else { return }
            parser.feed(chunk[0..<n])
            do {
                if parser.status200 == false {
                    // An error answer: read it whole, to say what it was.
                    guard let answer = try parser.response() else { continue }
                    throw Failure(description: "\(endpoint): HTTP \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))", sent: true)
                }
                while let piece = try parser.nextChunk() { guard handle(piece) else { return } }
                if try parser.response() != nil { return }
            } catch let error as HTTPResponseParser.Malformed {
                throw Failure(description: "\(endpoint): \(error)", sent: true)
            } catch {
                throw error as! Failure
            }
        }
    }

    /// Whether the peer has closed the connection (or sent something unasked, which an idle
    /// HTTP/1.1 connection must not have), seen without waiting: a pooled connection that says
    /// so is dropped rather than used.
    public var isClosedByPeer: Bool { Self.isClosedByPeer(fd) }

    /// Whether the peer of the idle connected socket `fd` (-1: none) has closed it, or sent
    /// something unasked, seen without waiting.
    static func isClosedByPeer(_ fd: Int32) -> Bool {
        guard fd >= 0 else { return true }
        var poller = pollfd(fd: fd, events: Int16(POLLIN) | 0x2000, revents: 0)  // 0x2000: POLLRDHUP (a _GNU_SOURCE macro Glibc does not export)
        return poll(&poller, 1, 0) != 0
    }

    /// Sets how long a read may wait (seconds).
    public func setReadTimeout(_ seconds: Double) { Self.setTimeout(fd, SO_RCVTIMEO, seconds) }

    /// The bytes of a POST of `body` (JSON) to `path` on `endpoint`, with `headers` (whole
    /// lines, no line end) added.
    static func request(_ path: String, body: [UInt8], headers: [String], to endpoint: EtcdEndpoint) -> [UInt8] {
        let extra = headers.map { $0 + "\r\n" }.joined()
        var request = Array("POST \(path) HTTP/1.1\r\nHost: \(endpoint.host):\(endpoint.port)\r\nContent-Type: application/json\r\n\(extra)Content-Length: \(body.count)\r\n\r\n".utf8)
        request.append(contentsOf: body)
        return request
    }

    private func send(_ path: String, body: [UInt8], headers: [String] = []) throws(Failure) {
        guard fd >= 0 else { throw Failure(description: "\(endpoint): connection closed", sent: false) }
        let request = Self.request(path, body: body, headers: headers, to: endpoint)
        var offset = 0
        while offset < request.count {
            let n = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                let code = errno
                close()
                throw Failure(description: "\(endpoint): send: \(String(cString: strerror(code)))", sent: offset > 0)
            }
            offset += n
        }
    }

    private func receive(into chunk: inout [UInt8]) throws(Failure) -> Int {
        try receive(into: &chunk, timeoutIsIdle: false)!
    }

    /// Reads what has arrived into `chunk` (0: the peer closed). A read timeout is a failure,
    /// or, with `timeoutIsIdle`, nil.
    private func receive(into chunk: inout [UInt8], timeoutIsIdle: Bool) throws(Failure) -> Int? {
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress!, $0.count, 0) }
            if n >= 0 { return n }
            if errno == EINTR { continue }
            let code = errno
            let timedOut = code == EAGAIN || code == EWOULDBLOCK
            if timedOut && timeoutIsIdle { return nil }
            close()
            throw Failure(description: "\(endpoint): \(timedOut ? "no answer within the timeout" : String(cString: strerror(code)))", sent: true)
        }
    }

    /// A TCP socket connected to `endpoint` within `timeout` seconds (blocking, with that
    /// timeout on each later read and write).
    static func connect(_ endpoint: EtcdEndpoint, timeout: Double) throws(Failure) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(endpoint.host, String(endpoint.port), &hints, &list)
        guard rc == 0, let first = list else {
            throw Failure(description: "\(endpoint): cannot resolve \(endpoint.host): \(String(cString: gai_strerror(rc)))", sent: false)
        }
        defer { freeaddrinfo(list) }
        var lastError = ECONNREFUSED
        var current: UnsafeMutablePointer<addrinfo>? = first
        while let info = current {
            current = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), info.pointee.ai_protocol)
            guard fd >= 0 else { lastError = errno; continue }
            if connectWithin(fd, info.pointee.ai_addr, info.pointee.ai_addrlen, timeout: timeout, error: &lastError) {
                var one: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                setTimeout(fd, SO_RCVTIMEO, timeout)
                setTimeout(fd, SO_SNDTIMEO, timeout)
                return fd
            }
            Glibc.close(fd)
        }
        throw Failure(description: "\(endpoint): connect: \(String(cString: strerror(lastError)))", sent: false)
    }

    private static func connectWithin(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: socklen_t, timeout: Double,
                                      error: inout Int32) -> Bool {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        if Glibc.connect(fd, address, length) == 0 { return true }
        guard errno == EINPROGRESS else { error = errno; return false }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&poller, 1, Int32(timeout * 1000)) == 1 else { error = ETIMEDOUT; return false }
        var code: Int32 = 0
        var size = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &size)
        guard code == 0 else { error = code; return false }
        return true
    }

    private static func setTimeout(_ fd: Int32, _ option: Int32, _ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, option, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// Seconds on the monotonic clock.
enum MonotonicClock {
    static func seconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
