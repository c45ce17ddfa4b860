#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// An ``EtcdChangeStream``'s watch read on a ``Reactor`` (the server's event loop), so that a
/// follower costs a socket and a buffer, not a thread. Touched only on the reactor's thread,
/// but for ``roomFreed()``.
///
/// It connects off the reactor's thread (to the member answering now, or the next), sends the
/// watch request from the revision after the last one received, and reads the stream as it
/// arrives, handing each message to the stream. While the stream's buffer is full it stops
/// reading (TCP then holds etcd back) until the follower takes some. When the stream ends or
/// fails it opens again after ``retrySeconds``; after ``EtcdChangeStream/failureSeconds``
/// without a member answering, the follower is dropped with `-UNAVAILABLE`.
final class ReactorWatch: ReactorHandler, @unchecked Sendable {
    /// The reactor it is read on.
    let reactor: any Reactor
    private let stream: EtcdChangeStream
    private let client: EtcdClient
    private var fd: Int32 = -1
    private var token: UInt64?
    private var parser = HTTPResponseParser()
    private var splitter = WatchMessageSplitter()
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    private var opening = false
    private var stopped = false
    /// Reading waits for room in the stream's buffer (set on the reactor's thread, read by
    /// ``roomFreed()`` on any).
    private let paused = Atomic<Bool>(false)
    /// Since when no member has served the watch (nil: one does).
    private var failingSince: Double?
    /// Seconds between a failed or ended watch and the next attempt.
    static let retrySeconds = 0.2

    init(stream: EtcdChangeStream, client: EtcdClient, reactor: any Reactor) {
        self.stream = stream
        self.client = client
        self.reactor = reactor
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// Opens the watch (again) from the revision after the last one received.
    func open() {
        guard !stopped, !opening, fd < 0, !stream.isOver else { return }
        opening = true
        let (client, request) = (client, stream.resumeRequest())
        DispatchQueue.global().async {
            let result = Result { () throws(EtcdError) -> (Int32, EtcdEndpoint) in
                let connection = try client.streamingConnection()
                return (connection.takeDescriptor(), connection.endpoint)
            }
            self.reactor.submit { self.opened(result, request) }
        }
    }

    /// Stops reading and closes (the follower went).
    func stop() {
        stopped = true
        closeSocket()
    }

    /// The follower took changes from a full buffer: reading goes on (soon, on the reactor's
    /// thread, not inside the follower's read). From any thread.
    func roomFreed() {
        guard paused.load(ordering: .acquiring) else { return }
        reactor.schedule(after: 0) {
            guard self.paused.exchange(false, ordering: .acquiringAndReleasing) else { return }
            self.receive()
        }
    }

    func ready(readable: Bool, writable: Bool) {
        if readable && !paused.load(ordering: .relaxed) { receive() }
    }

    private func opened(_ result: Result<(Int32, EtcdEndpoint), EtcdError>, _ body: [UInt8]) {
        opening = false
        let (descriptor, endpoint): (Int32, EtcdEndpoint)
        switch result {
        case .failure(let error):
            return failed(error)
        case .success(let taken):
            (descriptor, endpoint) = taken
        }
        guard !stopped else {
            Glibc.close(descriptor)
            return
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        fd = descriptor
        parser = HTTPResponseParser()
        splitter = WatchMessageSplitter()
        paused.store(false, ordering: .releasing)
        guard let watched = reactor.watch(descriptor, handler: self) else {
            return failed(EtcdError(.unavailable, "the watch's socket could not be watched"))
        }
        token = watched
        let request = HTTPConnection.request("/v3/watch", body: body, headers: ["Grpc-Metadata-hasleader: true"], to: endpoint)
        // A fresh socket's send buffer takes a request this small whole.
        let sent = request.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else {
            return failed(EtcdError(.unavailable, "\(endpoint): sending the watch failed"))
        }
    }

    /// Reads what has arrived, until the socket is empty, the buffer full, or the watch over.
    private func receive() {
        while fd >= 0 {
            if stream.stopped { return stop() }
            if stream.isFull {
                paused.store(true, ordering: .releasing)
                // Room freed between the check and the mark would have found it unmarked.
                guard !stream.isFull, paused.exchange(false, ordering: .acquiringAndReleasing) else { return }
            }
            let n = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress!, $0.count, 0) }
            if n > 0 {
                parser.feed(buffer[0..<n])
                guard take() else { return }
            } else if n == 0 {
                return failed(EtcdError(.unavailable, "the member closed the watch"))
            } else if errno == EINTR {
                continue
            } else if errno == EAGAIN || errno == EWOULDBLOCK {
                return
            } else {
                return failed(EtcdError(.unavailable, String(cString: strerror(errno))))
            }
        }
    }

    /// Hands the stream the messages the parser has whole; false when reading stops.
    private func take() -> Bool {
        do throws(EtcdError) {
            if parser.status200 == false {
                // An error answer: read it whole, to say what it was.
                guard let answer = try parsed({ (p) throws(HTTPResponseParser.Malformed) in try p.response() }) else { return true }
                throw EtcdError(.unavailable, "HTTP \(answer.status): \(String(decoding: answer.body.prefix(200), as: UTF8.self))")
            }
            while let piece = try parsed({ (p) throws(HTTPResponseParser.Malformed) in try p.nextChunk() }) {
                for message in splitter.messages(piece) {
                    failingSince = nil
                    switch try stream.take(message) {
                    case .more: break
                    case .over:
                        stop()
                        return false
                    case .putMarker: putMarker()
                    }
                }
            }
            if try parsed({ (p) throws(HTTPResponseParser.Malformed) in try p.response() }) != nil { throw EtcdError(.unavailable, "the member ended the watch") }
            return true
        } catch {
            failed(error)
            return false
        }
    }

    /// `step` of the parser, a malformed answer thrown as the watch's failure.
    private func parsed<T>(_ step: (inout HTTPResponseParser) throws(HTTPResponseParser.Malformed) -> T) throws(EtcdError) -> T {
        do { return try step(&parser) } catch { throw EtcdError(.unavailable, "the watch's answer: \(error.description)") }
    }

    /// Writes the namespace's marker for a follower catching up; if that fails, the watch
    /// opens again (and asks again).
    private func putMarker() {
        let (client, put) = (client, stream.markerPut)
        Task {
            do throws(EtcdError) { _ = try await client.call(put.path, body: put.body, write: true) } catch {
                self.reactor.submit { self.failed(error) }
            }
        }
    }

    /// The watch failed or ended: it opens again after ``retrySeconds``, or, when no member has
    /// served it for ``EtcdChangeStream/failureSeconds``, the follower is dropped.
    private func failed(_ error: EtcdError) {
        closeSocket()
        guard !stopped, !stream.isOver else { return }
        let now = MonotonicClock.seconds()
        let since = failingSince ?? now
        failingSince = since
        if now - since >= EtcdChangeStream.failureSeconds {
            stopped = true
            stream.lostEtcd(error)
            return
        }
        reactor.schedule(after: Self.retrySeconds) { self.open() }
    }

    private func closeSocket() {
        guard fd >= 0 else { return }
        if let token { reactor.unwatch(token) }
        token = nil
        Glibc.close(fd)
        fd = -1
    }
}
