import ActorKVProtocol
import Dispatch
import Foundation
import Synchronization
import Glibc  // Linux only, like the server (MSG_NOSIGNAL, SOCK_CLOEXEC).

/// What became of one request sent on a ``Connection``.
enum SendResult: Sendable {
    /// The server's reply (which may be an error reply).
    case reply(Reply)
    /// The request was sent (or may have been), then the connection failed.
    case failed(ActorKVError)
    /// The request was not sent: the connection had already failed, or is closing. Safe to retry
    /// on a new connection.
    case notSent(ActorKVError)
}

/// Where a pending call waits for its reply.
typealias ReplyContinuation = CheckedContinuation<SendResult, Never>

/// One connected Unix socket with pipelined requests: replies are matched to callers in FIFO order.
///
/// Threads and locks:
/// - A caller appends its continuation to `pending` and its encoded request to the socket in one
///   critical section of `state`, so the order of `pending` is the order of the requests on the wire.
///   If the writer thread is idle, the caller sends right there with `MSG_DONTWAIT` (a non-blocking
///   copy into the kernel's socket buffer, no waiting); whatever does not fit goes to `outbox` and
///   the writer thread is woken. The lock is never held across a blocking call or a round trip.
/// - The writer thread does the blocking sends of `outbox`, so a full socket buffer never blocks a
///   task on Swift's cooperative pool. While it is busy, callers append to `outbox` (which also
///   coalesces concurrent requests into one write).
/// - The reader thread does blocking reads, decodes replies with `ReplyDecoder` and resumes the
///   oldest pending continuations, one per reply, outside the lock.
/// - The first failure (EOF, read or write error, a framing error, a timeout, a refusal,
///   `shutdown(with:)`) is recorded, the socket is shut down (waking both threads, which then exit)
///   and every pending call is failed with it. Later sends are refused unsent
///   (``SendResult/notSent(_:)``), and the client retries them on a new connection. The descriptor
///   is closed in `deinit`, when neither thread nor the client holds the connection any more, so it
///   can never be reused while a thread uses it.
/// - A failed write is the one failure whose pending calls the reader fails, once it has read what
///   the server sent before closing: the replies to earlier requests, or the `-MAXCLIENTS` /
///   `-NOPERM` that explains why the server closed a connection it refused.
/// - With a timeout, the reader's blocking read has `SO_RCVTIMEO` set; when it times out while
///   calls are waiting and nothing has been read for `timeout` since the oldest of them started
///   waiting, the connection fails with ``ActorKVError/timedOut(_:)``.
/// - A connection whose descriptor another process may share (a held lock's, handed to a child
///   by ``duplicateDescriptor()``) can be let go instead (``letGo(after:)``, or a `send` with
///   `lettingGo`): a last request is sent, and once its reply has arrived both threads stop
///   without shutting the socket down, which would end the connection for every process that has
///   it; `deinit` then closes only this process's descriptor. (A blocked read cannot be woken
///   otherwise: closing the descriptor does not end it, and the read keeps the socket open.)
final class Connection: Sendable {
    private let fd: Int32
    /// The socket's path, for error messages.
    let path: String
    /// How long a waiting call may go without a byte from the server; nil waits forever.
    let timeout: Duration?
    private let state = Mutex(State())
    private let writerWakeup = DispatchSemaphore(value: 0)

    private struct State {
        /// The calls waiting for their replies, in the order of their requests; nil for a
        /// request whose reply nobody waits for (``letGo(after:)``'s).
        var pending = FIFO<ReplyContinuation?>()
        var outbox: [UInt8] = []
        var writerBusy = false
        var failure: ActorKVError?
        var closing = false
        /// Set with `failure` after a failed write: the reader fails the pending calls once it has
        /// read whatever the server sent before it closed.
        var readerFails = false
        /// When `pending` last became non-empty (kept only with a timeout).
        var waitingSince = ContinuousClock.Instant.now
        /// Whether a reply has arrived on this connection (a refusal can only be the first).
        var answered = false
        /// Set with `closing` by ``letGo(after:)``: the threads stop once the last reply has
        /// arrived, and a failure does not shut the socket down.
        var lettingGo = false
    }

    /// Limits for replies, wider than a server's request limits: a server may be configured to
    /// store values past the 64 MiB default bulk limit, and a SCAN page of 100,000 entries is an
    /// array of 200,000 elements. The server is local and trusted; these only stop runaway input.
    static let replyLimits = ProtocolLimits(maxInlineLength: 1 << 20, maxBulkLength: Int(Int32.max),
                                            maxArguments: 16 << 20, maxRequestBytes: Int(Int32.max))

    private init(fd: Int32, path: String, timeout: Duration?) {
        self.fd = fd
        self.path = path
        self.timeout = timeout
    }

    deinit {
        _ = Glibc.close(fd)
    }

    /// A stream socket connected to the Unix socket at `path` (close-on-exec; left non-blocking
    /// without `waiting`), as ``open(path:timeout:waiting:)`` and a change
    /// stream's connection need it: nil without `waiting` when the server's accept queue is full;
    /// with `waiting` and a `timeout`, ``ActorKVError/timedOut(_:)`` once that long has passed.
    static func connectedSocket(path: String, timeout: Duration?, waiting: Bool) throws(ActorKVError) -> Int32? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard !pathBytes.isEmpty, pathBytes.count < capacity else {
            throw .cannotConnect(path: path, errno: ENAMETOOLONG,
                                 reason: pathBytes.isEmpty ? "empty socket path"
                                     : "socket path is \(pathBytes.count) bytes; at most \(capacity - 1) fit")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let flags = Int32(SOCK_CLOEXEC.rawValue) | (waiting ? 0 : Int32(SOCK_NONBLOCK.rawValue))
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | flags, 0)
        guard fd >= 0 else { throw .cannotConnect(path: path, errno: errno, reason: errnoText(errno)) }
        // A blocking connect(2) on a Unix socket waits while the listener's queue is full, for
        // at most SO_SNDTIMEO, then fails with EAGAIN; a non-blocking one fails with EAGAIN at once.
        if waiting, let timeout { setTimeout(fd, SO_SNDTIMEO, timeout) }
        var result: Int32
        repeat {
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        } while result != 0 && errno == EINTR
        if result != 0 {
            let code = errno
            _ = Glibc.close(fd)
            let queueFull = code == EAGAIN || code == EWOULDBLOCK || code == EINPROGRESS
            if !waiting && queueFull { return nil }
            if let timeout, queueFull {
                throw .timedOut("cannot connect to \(path): the server did not accept the connection within "
                                + secondsText(timeout))
            }
            throw .cannotConnect(path: path, errno: code, reason: errnoText(code))
        }
        return fd
    }

    /// Connects to the Unix socket at `path` and starts the reader and writer threads.
    ///
    /// Without `waiting`, the connect is non-blocking: it returns nil if the server's queue of
    /// connections to accept is full (the only case in which a connect to a Unix socket waits), so
    /// the caller can wait off its own thread. With `waiting`, it blocks until the server accepts,
    /// and with a `timeout` gives up after that long with ``ActorKVError/timedOut(_:)``. The
    /// `timeout` also bounds each wait for a reply.
    static func open(path: String, timeout: Duration?, waiting: Bool) throws(ActorKVError) -> Connection? {
        guard let fd = try connectedSocket(path: path, timeout: timeout, waiting: waiting) else { return nil }
        if !waiting { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) }  // the threads block
        if let timeout {
            setTimeout(fd, SO_SNDTIMEO, nil)  // the writer's sends block; a timeout shuts them down
            setTimeout(fd, SO_RCVTIMEO, timeout)
        }
        let connection = Connection(fd: fd, path: path, timeout: timeout)
        connection.startThreads()
        return connection
    }

    /// A connection on `fd`, an already connected socket (for tests: one end of a socketpair).
    /// `SO_RCVTIMEO` is set from `timeout`; the threads start only with `startingThreads`.
    static func adopt(fd: Int32, path: String, timeout: Duration?, startingThreads: Bool = true) -> Connection {
        if let timeout { setTimeout(fd, SO_RCVTIMEO, timeout) }
        let connection = Connection(fd: fd, path: path, timeout: timeout)
        if startingThreads { connection.startThreads() }
        return connection
    }

    /// Starts the reader and writer threads (once).
    func startThreads() {
        let reader = Thread { [self] in readLoop() }
        reader.name = "actorkv-client-reader"
        let writer = Thread { [self] in writeLoop() }
        writer.name = "actorkv-client-writer"
        reader.start()
        writer.start()
    }

    /// A new descriptor for this connection's socket (`dup(2)`, so without close-on-exec), or -1
    /// with `errno` set: for a child process that is to keep the connection open (a held lock's).
    func duplicateDescriptor() -> Int32 { Glibc.dup(fd) }

    /// The number of requests waiting for their replies (for tests).
    var pendingCount: Int { state.withLock { $0.pending.count } }

    /// False once the connection has failed, been shut down, or sent its last request.
    var isUsable: Bool { state.withLock { $0.failure == nil && !$0.closing } }

    /// Sends one encoded request and waits for its reply (or the connection's failure).
    /// With `last`, no request is accepted after this one (used for QUIT): later sends return
    /// ``SendResult/notSent(_:)``, in the same critical section that queues this request. With
    /// `lettingGo` too, the connection is let go after the reply, as ``letGo(after:)`` says.
    func send(_ request: [UInt8], last: Bool = false, lettingGo: Bool = false) async -> SendResult {
        await withCheckedContinuation { (continuation: ReplyContinuation) in
            if let error = state.withLock({ enqueue(&$0, request, continuation, last: last || lettingGo, lettingGo: lettingGo) }) {
                continuation.resume(returning: .notSent(error))
            }
        }
    }

    /// Lets this process's copy of the connection go without ending the connection for another
    /// process that has a copy of its descriptor (``duplicateDescriptor()``): sends `request` as
    /// the last one (its reply wakes the reader; nobody waits for it), after which both threads
    /// stop, and never shuts the socket down, not even on a failure. The descriptor is closed
    /// when nothing holds the connection any more. Nothing happens if the connection has failed
    /// or is closing. (``shutdown(with:)`` still shuts it down, for every process.)
    func letGo(after request: [UInt8]) {
        _ = state.withLock { enqueue(&$0, request, nil, last: true, lettingGo: true) }
        writerWakeup.signal()  // an idle writer stops
    }

    /// Queues `request` with the call waiting for its reply (nil: none), sending what fits at
    /// once, as ``send(_:last:lettingGo:)`` describes; returns the error to refuse it with,
    /// unsent, or nil. Call with the lock held.
    private func enqueue(_ s: inout State, _ request: [UInt8], _ continuation: ReplyContinuation?,
                         last: Bool, lettingGo: Bool) -> ActorKVError? {
        if let failure = s.failure { return failure }
        if s.closing { return .closed }
        if timeout != nil && s.pending.isEmpty { s.waitingSince = .now }
        s.pending.append(continuation)
        if last { s.closing = true }
        if lettingGo { s.lettingGo = true }
        if s.writerBusy {
            s.outbox.append(contentsOf: request)
            return nil
        }
        var offset = 0
        while offset < request.count {
            let n = request.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n > 0 { offset += n; continue }
            let code = errno
            if n < 0 && code == EINTR { continue }
            if n < 0 && (code == EAGAIN || code == EWOULDBLOCK) { break }
            recordWriteFailure(&s, code)
            return nil
        }
        if offset < request.count {
            s.outbox.append(contentsOf: request[offset...])
            s.writerBusy = true
            writerWakeup.signal()
        }
        return nil
    }

    /// Fails every pending call with `error` and shuts the connection down (idempotent: only the
    /// first failure counts), for every process that has it, even one being let go.
    func shutdown(with error: ActorKVError) {
        let continuations = state.withLock { s in
            // Failed while being let go, the socket was left as it was: shut it down now.
            if s.lettingGo && s.failure != nil { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
            s.lettingGo = false
            return recordFailure(&s, error)
        }
        resumeAll(continuations, error)
    }

    /// Records the first failure, shuts the socket down (which wakes a blocked read or send) and
    /// wakes the writer. Returns the continuations to fail; call with the lock held.
    private func recordFailure(_ s: inout State, _ error: ActorKVError) -> [ReplyContinuation?] {
        guard markFailed(&s, error) else { return [] }
        return s.pending.removeAll()
    }

    /// Records `error` as the failure unless there is one, shuts the socket down (unless it is
    /// being let go) and wakes the writer. Returns whether it was the first. Call with the lock held.
    private func markFailed(_ s: inout State, _ error: ActorKVError) -> Bool {
        guard s.failure == nil else { return false }
        s.failure = error
        s.outbox = []
        if !s.lettingGo { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
        writerWakeup.signal()
        return true
    }

    /// Records a failed write (errno `code`) like any failure, except that the pending calls are
    /// left for the reader to fail: the server may have closed the connection after sending
    /// replies, or a refusal (`-MAXCLIENTS`, `-NOPERM`), that are still to be read. The shutdown
    /// lets the reader read them and then see the end of the stream, so it never waits for more.
    private func recordWriteFailure(_ s: inout State, _ code: Int32) {
        if markFailed(&s, .connectionLost("write failed: \(errnoText(code))")) { s.readerFails = true }
    }

    /// For the reader, when the connection ends: records `error` unless a failure is recorded
    /// already (or replaces it, with `replacing`), and returns the error to fail the pending calls
    /// with and those calls. Call with the lock held.
    private func finish(_ s: inout State, _ error: ActorKVError,
                        replacing: Bool = false) -> (ActorKVError, [ReplyContinuation?]) {
        let taken = recordFailure(&s, error)
        if replacing { s.failure = error }
        let reported = s.failure ?? error
        return (reported, taken + s.pending.removeAll())
    }

    /// Fails the pending calls with `error` (or the failure recorded before it); for the reader.
    private func finish(with error: ActorKVError) {
        let (reported, continuations) = state.withLock { finish(&$0, error) }
        resumeAll(continuations, reported)
    }

    private func resumeAll(_ continuations: [ReplyContinuation?], _ error: ActorKVError) {
        for continuation in continuations { continuation?.resume(returning: .failed(error)) }
    }

    private func writeLoop() {
        while true {
            writerWakeup.wait()
            while true {
                let chunk: [UInt8]? = state.withLock { s in
                    if s.failure != nil { return nil }
                    if s.outbox.isEmpty {
                        s.writerBusy = false
                        return s.lettingGo ? nil : []  // let go: the last request is sent
                    }
                    defer { s.outbox = [] }
                    return s.outbox
                }
                guard let chunk else { return }
                if chunk.isEmpty { break }
                var offset = 0
                while offset < chunk.count {
                    let n = chunk.withUnsafeBytes {
                        Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
                    }
                    if n > 0 { offset += n; continue }
                    let code = errno
                    if n < 0 && code == EINTR { continue }
                    state.withLock { recordWriteFailure(&$0, code) }
                    return
                }
            }
        }
    }

    private func readLoop() {
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var decoder = ReplyDecoder(limits: Self.replyLimits)
        var lastRead = ContinuousClock.now  // kept only with a timeout
        var armed = timeout  // the socket's SO_RCVTIMEO
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, bufferSize)
            if n == 0 {
                finish(with: .connectionLost("the server closed the connection"))
                return
            }
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                if let timeout, code == EAGAIN || code == EWOULDBLOCK {
                    // SO_RCVTIMEO ran out: time out the waiting calls, or wait again as long as
                    // the oldest of them has left.
                    guard let wait = checkTimeout(timeout, lastRead: lastRead) else { return }
                    if wait != armed {
                        setTimeout(fd, SO_RCVTIMEO, wait)
                        armed = wait
                    }
                    continue
                }
                finish(with: .connectionLost("read failed: \(errnoText(code))"))
                return
            }
            if timeout != nil { lastRead = .now }
            decoder.append(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            var replies: [Reply] = []
            var framingError: ProtocolError?
            do {
                while let reply = try decoder.next() { replies.append(reply) }
            } catch {
                framingError = error
            }
            if !replies.isEmpty && !deliver(replies) { return }
            if let framingError {
                finish(with: .protocolViolation("invalid reply from the server: \(framingError.message)"))
                return
            }
        }
    }

    /// After the reader's read timed out: fails the connection with ``ActorKVError/timedOut(_:)``
    /// and returns nil if calls are waiting and nothing has been read for `timeout` since the
    /// oldest of them started waiting; else returns how long to wait before checking again.
    private func checkTimeout(_ timeout: Duration, lastRead: ContinuousClock.Instant) -> Duration? {
        let now = ContinuousClock.now
        enum Outcome { case wait(Duration), timedOut(ActorKVError, [ReplyContinuation?]) }
        let outcome: Outcome = state.withLock { s in
            guard !s.pending.isEmpty, s.failure == nil else { return .wait(timeout) }
            let deadline = max(s.waitingSince, lastRead) + timeout
            if now < deadline { return .wait(max(deadline - now, .milliseconds(1))) }
            let error = ActorKVError.timedOut("no reply from the server at \(path) within \(secondsText(timeout))")
            let (reported, continuations) = finish(&s, error)
            return .timedOut(reported, continuations)
        }
        switch outcome {
        case .wait(let wait):
            return wait
        case .timedOut(let error, let continuations):
            resumeAll(continuations, error)
            return nil
        }
    }

    /// Resumes the oldest pending calls with `replies`. False (after failing the connection) if
    /// the server sent more replies than there were requests, and once the last reply of a
    /// connection being let go has arrived (the reader stops; the socket is left as it is).
    private func deliver(_ replies: [Reply]) -> Bool {
        enum Outcome {
            case deliver([ReplyContinuation?], last: Bool), unsolicited([ReplyContinuation?]), stop
            case refused([ReplyContinuation?], ActorKVError)
        }
        let outcome: Outcome = state.withLock { s in
            if s.failure != nil && !s.readerFails { return .stop }
            if !s.answered {
                s.answered = true
                // The server refuses a connection (too many clients, a peer not allowed) by
                // sending one error right after accepting it, then closing it. Whether a request
                // was sent before it arrived or not, no request was served: fail them all alike.
                if case .error(let text) = replies[0], case .server(let code, let message) = ActorKVError.fromErrorReply(text),
                   WireErrorCode.refusesConnection(code: code, message: message) {
                    let error = ActorKVError.refused(path: path, code: code, message: message)
                    let (_, continuations) = finish(&s, error, replacing: true)
                    return .refused(continuations, error)
                }
            }
            var continuations: [ReplyContinuation?] = []
            continuations.reserveCapacity(replies.count)
            for _ in replies {
                guard let next = s.pending.popFirst() else {
                    let error: ActorKVError
                    if case .error(let text) = replies[continuations.count] {
                        error = .connectionLost("the server sent an error without a request: \(text)")
                    } else {
                        error = .protocolViolation("the server sent a reply without a request")
                    }
                    _ = recordFailure(&s, error)  // nothing is pending any more
                    return .unsolicited(continuations)
                }
                continuations.append(next)
            }
            let last = s.lettingGo && s.pending.isEmpty
            if last { writerWakeup.signal() }  // the writer stops too, if it has not yet
            return .deliver(continuations, last: last)
        }
        switch outcome {
        case .stop:
            return false
        case .deliver(let continuations, let last):
            for (continuation, reply) in zip(continuations, replies) { continuation?.resume(returning: .reply(reply)) }
            return !last
        case .unsolicited(let continuations):
            for (continuation, reply) in zip(continuations, replies) { continuation?.resume(returning: .reply(reply)) }
            return false
        case .refused(let continuations, let error):
            resumeAll(continuations, error)
            return false
        }
    }
}

/// Sets the `SO_RCVTIMEO` or `SO_SNDTIMEO` (`option`) of `fd` to `timeout`; nil or zero waits forever.
func setTimeout(_ fd: Int32, _ option: Int32, _ timeout: Duration?) {
    var value = timeval()
    if let timeout, timeout > .zero {
        let (seconds, attoseconds) = timeout.components
        value.tv_sec = Int(seconds)
        value.tv_usec = Int(attoseconds / 1_000_000_000_000)
        if value.tv_sec == 0 && value.tv_usec == 0 { value.tv_usec = 1 }  // zero would mean forever
    }
    _ = setsockopt(fd, SOL_SOCKET, option, &value, socklen_t(MemoryLayout<timeval>.size))
}

/// A duration as seconds for messages: "10 s", "0.5 s".
func secondsText(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let value = Double(seconds) + Double(attoseconds) / 1e18
    return String(format: "%g s", value)
}

/// The text of an errno value, e.g. "Connection refused".
func errnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}
