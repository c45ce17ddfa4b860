import ActorKVProtocol
import Dispatch
import Foundation
import Synchronization
import Glibc  // Linux only, like the rest of the client.

/// One follow of a namespace: a thread of its own connects, sends `CHANGES`, reads the messages
/// with a ``ReplyDecoder``, turns them into events with a ``FollowState`` and hands them to the
/// consumer through a small buffer; when the connection breaks it reconnects as its
/// ``ReconnectPolicy`` says and resumes.
///
/// Threads and locks: the follow thread does every blocking call (connect, send, read, the
/// waits between attempts); the consumer's `next()` only takes an event from the buffer or
/// waits for one, suspended. When the buffer holds ``bufferLimit`` events or ``bufferBytes`` of
/// keys and values (a snapshot page can hold a thousand large values), the thread waits for
/// the consumer and stops reading, so a slow consumer makes the server drop the stream
/// (`-LAGGING`) rather than this process buffer without bound. ``stop()`` shuts the socket down
/// (waking a blocked read), wakes the thread wherever it waits, and ends the consumer's wait; the
/// thread then closes the socket and exits. The descriptor is closed under the lock, so `stop()`
/// never shuts down a descriptor number that was reused.
final class ChangeFollower: Sendable {
    /// Events buffered before the follow thread stops reading.
    static let bufferLimit = 32
    /// Bytes of keys and values buffered (beyond one event) before the follow thread stops reading.
    static let bufferBytes = 1 << 20

    private let path: String
    private let timeout: Duration?
    private let policy: ReconnectPolicy
    private let initialState: FollowState
    private let shared = Mutex(Shared())
    /// Signalled when the consumer takes an event from a full buffer (or on stop).
    private let space = DispatchSemaphore(value: 0)
    /// Signalled on stop, to cut short the wait between attempts.
    private let wakeup = DispatchSemaphore(value: 0)

    typealias Consumer = CheckedContinuation<Result<ChangeEvent?, ActorKVError>, Never>

    private struct Shared {
        var events = FIFO<ChangeEvent>()
        /// The keys and values in `events`, in bytes.
        var eventBytes = 0
        /// The consumer waiting for an event (the buffer is then empty).
        var consumer: Consumer?
        /// The follow thread waits on `space` for the buffer to drain.
        var producerWaiting = false
        var started = false
        var stopped = false
        var end = End.running
        /// The open socket, -1 between connections.
        var fd: Int32 = -1
    }

    private enum End {
        case running
        case failed(ActorKVError)
        case finished
    }

    init(path: String, timeout: Duration?, policy: ReconnectPolicy, state: FollowState) {
        self.path = path
        self.timeout = timeout
        self.policy = policy
        initialState = state
    }

    /// The next event, waiting for it; nil once stopped or finished. Starts the follow thread
    /// the first time. Cancelling the calling task stops the follow.
    func next() async -> Result<ChangeEvent?, ActorKVError> {
        startIfNeeded()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (consumer: Consumer) in
                let ready: Result<ChangeEvent?, ActorKVError>? = shared.withLock { s in
                    if s.stopped { return .success(nil) }
                    if let event = s.events.popFirst() {
                        s.eventBytes -= Self.size(of: event)
                        if s.producerWaiting {
                            s.producerWaiting = false
                            space.signal()
                        }
                        return .success(event)
                    }
                    switch s.end {
                    case .running:
                        precondition(s.consumer == nil, "a change stream's iterator is used by one task at a time")
                        s.consumer = consumer
                        return nil
                    case .failed(let error):
                        s.end = .finished
                        return .failure(error)
                    case .finished:
                        return .success(nil)
                    }
                }
                if let ready { consumer.resume(returning: ready) }
            }
        } onCancel: {
            stop()
        }
    }

    /// Ends the follow: closes the connection and ends the consumer's wait (with nil). Idempotent.
    func stop() {
        let consumer: Consumer? = shared.withLock { s in
            guard !s.stopped else { return nil }
            s.stopped = true
            s.started = true  // never start after a stop
            s.events = FIFO()
            s.eventBytes = 0
            if s.fd >= 0 { _ = Glibc.shutdown(s.fd, Int32(SHUT_RDWR)) }
            if s.producerWaiting {
                s.producerWaiting = false
                space.signal()
            }
            defer { s.consumer = nil }
            return s.consumer
        }
        wakeup.signal()
        consumer?.resume(returning: .success(nil))
    }

    private var isStopped: Bool { shared.withLock { $0.stopped } }

    private func startIfNeeded() {
        let start = shared.withLock { s -> Bool in
            defer { s.started = true }
            return !s.started
        }
        guard start else { return }
        let thread = Thread { [self] in run() }
        thread.name = "actorkv-changes"
        thread.start()
    }

    /// Hands `event` to the waiting consumer or buffers it, waiting while the buffer is full.
    /// False once stopped.
    private func push(_ event: ChangeEvent) -> Bool {
        enum Action { case handed(Consumer), queued, wait, stopped }
        while true {
            let action: Action = shared.withLock { s in
                if s.stopped { return .stopped }
                if let consumer = s.consumer {
                    s.consumer = nil
                    return .handed(consumer)
                }
                if s.events.isEmpty || (s.events.count < Self.bufferLimit && s.eventBytes < Self.bufferBytes) {
                    s.events.append(event)
                    s.eventBytes += Self.size(of: event)
                    return .queued
                }
                s.producerWaiting = true
                return .wait
            }
            switch action {
            case .handed(let consumer):
                consumer.resume(returning: .success(event))
                return true
            case .queued:
                return true
            case .stopped:
                return false
            case .wait:
                space.wait()
            }
        }
    }

    /// The bytes of the keys and values an event holds.
    private static func size(of event: ChangeEvent) -> Int {
        switch event {
        case .snapshot(let page): return page.entries.reduce(0) { $0 + $1.key.count + $1.value.count }
        case .change(let change): return change.keys.reduce(0) { $0 + $1.key.count + ($1.value?.count ?? 0) }
        case .synced: return 0
        }
    }

    /// Records how the follow ended (nil: stopped) and ends a waiting consumer's wait.
    private func finish(_ error: ActorKVError?) {
        let consumer: Consumer? = shared.withLock { s in
            s.end = error.map { .failed($0) } ?? .finished
            guard let consumer = s.consumer else { return nil }
            s.consumer = nil
            s.end = .finished
            return consumer
        }
        consumer?.resume(returning: error.map { .failure($0) } ?? .success(nil))
    }

    // MARK: The follow thread

    /// How one connection ended.
    private enum Outcome {
        /// ``stop()`` was called.
        case stopped
        /// The follow cannot go on.
        case failed(ActorKVError)
        /// The connection could not be made (`connected` false) or broke; `progressed` when the
        /// server had answered its `CHANGES`.
        case broken(ActorKVError, connected: Bool, progressed: Bool)
    }

    private func run() {
        var state = initialState
        var delay = policy.initialDelay
        var failingSince: ContinuousClock.Instant?
        var everConnected = false
        while true {
            switch followOnce(&state) {
            case .stopped:
                finish(nil)
                return
            case .failed(let error):
                finish(error)
                return
            case .broken(let error, let connected, let progressed):
                // A first connection that cannot be made is an error to report, not to wait out
                // (unless the policy says that it is).
                if !connected && !everConnected && !policy.retriesFirstConnection {
                    finish(error)
                    return
                }
                everConnected = everConnected || connected
                let now = ContinuousClock.now
                if progressed {
                    delay = policy.initialDelay
                    failingSince = nil
                }
                let since = failingSince ?? now
                failingSince = since
                var wait = delay
                if let limit = policy.giveUpAfter {
                    let left = since + limit - now
                    if left <= .zero {
                        finish(error)
                        return
                    }
                    wait = min(wait, left)
                }
                _ = wakeup.wait(timeout: .now() + .nanoseconds(nanoseconds(wait)))
                if isStopped {
                    finish(nil)
                    return
                }
                delay = min(delay * 2, policy.maximumDelay)
            }
        }
    }

    /// Connects, sends the state's `CHANGES` and reads its messages until the connection ends.
    private func followOnce(_ state: inout FollowState) -> Outcome {
        let fd: Int32
        do throws(ActorKVError) {
            fd = try FollowSocket.connect(path: path, timeout: timeout)
        } catch {
            return .broken(error, connected: false, progressed: false)
        }
        guard register(fd) else {
            _ = Glibc.close(fd)
            return .stopped
        }
        defer { closeRegistered(fd) }
        state.connectionStarted()
        if let failure = send(state.request, on: fd) { return ended(failure, progressed: false) }
        // Until the server answers CHANGES, a silent server is a failure; after, silence is idle.
        setTimeout(fd, SO_RCVTIMEO, timeout)
        return readMessages(on: fd, &state)
    }

    /// Makes `fd` the socket that ``stop()`` shuts down; false if the follow was stopped already.
    private func register(_ fd: Int32) -> Bool {
        shared.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.fd = fd
            return true
        }
    }

    /// Closes the registered socket `fd`, under the lock (see the type's comment).
    private func closeRegistered(_ fd: Int32) {
        shared.withLock { s in
            s.fd = -1
            _ = Glibc.close(fd)
        }
    }

    /// Reads the answer to `CHANGES` and the messages after it from `fd` until the connection
    /// ends, the follow stops, or a message ends it.
    private func readMessages(on fd: Int32, _ state: inout FollowState) -> Outcome {
        let bufferSize = 64 * 1024
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bufferSize, alignment: 16)
        defer { buffer.deallocate() }
        var decoder = ReplyDecoder(limits: Connection.replyLimits)
        var answered = false
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, bufferSize)
            if n == 0 { return ended(.connectionLost("the server closed the connection"), progressed: state.isStreaming) }
            if n < 0 {
                let code = errno
                if code == EINTR { continue }
                if let timeout, code == EAGAIN || code == EWOULDBLOCK {
                    // Before the answer to CHANGES (the only time a timeout is set): a server
                    // that accepts but does not answer (stopped, hung) is not connected to, so a
                    // first attempt reports it rather than waiting it out.
                    let error = ActorKVError.timedOut("no answer to CHANGES from the server at \(path) within \(secondsText(timeout))")
                    return isStopped ? .stopped : .broken(error, connected: false, progressed: false)
                }
                return ended(.connectionLost("read failed: \(errnoText(code))"), progressed: state.isStreaming)
            }
            decoder.append(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            while true {
                let reply: Reply
                do throws(ProtocolError) {
                    guard let next = try decoder.next() else { break }
                    reply = next
                } catch {
                    return .failed(.protocolViolation("invalid reply from the server: \(error.message)"))
                }
                if let outcome = handle(reply, answered: &answered, on: fd, &state) { return outcome }
            }
        }
    }

    /// Handles one message on `fd`: the answer to `CHANGES` (`answered` false until it came; a
    /// refusal on accept ends the follow), or one after it, whose events are handed to the
    /// consumer. The outcome that ends the connection, or nil to read on.
    private func handle(_ reply: Reply, answered: inout Bool, on fd: Int32, _ state: inout FollowState) -> Outcome? {
        if !answered, case .error(let text) = reply,
           case .server(let code, let message) = ActorKVError.fromErrorReply(text),
           WireErrorCode.refusesConnection(code: code, message: message) {
            // Refused on accept: too many clients may pass; a peer not allowed will not.
            let error = ActorKVError.refused(path: path, code: code, message: message)
            return code == WireErrorCode.maxClients.rawValue
                ? .broken(error, connected: false, progressed: false) : .failed(error)
        }
        answered = true
        let wasStreaming = state.isStreaming
        switch state.handle(reply) {
        case .deliver(let events):
            if !wasStreaming && state.isStreaming { setTimeout(fd, SO_RCVTIMEO, nil) }
            for event in events {
                guard push(event) else { return .stopped }
            }
            return nil
        case .resend:
            if let failure = send(state.request, on: fd) { return ended(failure, progressed: false) }
            return nil
        case .reconnect(let error):
            return ended(error, progressed: true)
        case .fail(let error):
            return .failed(error)
        }
    }

    /// `.stopped` if the follow was stopped (which is why the connection ended), else `.broken`.
    private func ended(_ error: ActorKVError, progressed: Bool) -> Outcome {
        isStopped ? .stopped : .broken(error, connected: true, progressed: progressed)
    }

    /// Sends an encoded request; the error if the write failed.
    private func send(_ arguments: [[UInt8]], on fd: Int32) -> ActorKVError? {
        var request: [UInt8] = []
        RequestEncoder.encode(arguments, into: &request)
        let code = FollowSocket.sendAll(fd, request)
        return code == 0 ? nil : .connectionLost("write failed: \(errnoText(code))")
    }

    private func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}

/// The blocking socket calls of a follow, on its own thread.
enum FollowSocket {
    /// A blocking stream socket connected to the Unix socket at `path`. With a `timeout`, a
    /// server whose queue of connections to accept stays full fails with
    /// ``ActorKVError/timedOut(_:)`` after that long.
    static func connect(path: String, timeout: Duration?) throws(ActorKVError) -> Int32 {
        // Waiting: never nil.
        try Connection.connectedSocket(path: path, timeout: timeout, waiting: true)!
    }

    /// Writes all of `bytes`; returns 0, or the errno of the send that failed.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { offset += n; continue }
            if n < 0 && errno == EINTR { continue }
            return n < 0 ? errno : EPIPE
        }
        return 0
    }
}
