import ActorKVProtocol
import Dispatch
import Foundation
import Synchronization
import Glibc  // Linux only, like the rest of the client.

// Following a namespace's changes (protocol.md, "CHANGES"): the typed events, the stream that
// reconnects and resumes, and the state machine that reads the server's messages.

// MARK: Events

/// Where a change stream starts: the option of its first `CHANGES ns [FROM seq | SNAPSHOT]`.
public enum ChangeStart: Sendable, Equatable, Hashable {
    /// The changes written after the stream starts (no option).
    case now
    /// Every change after this sequence that the server still holds, then live ones
    /// (`FROM sequence`): how a consumer resumes where it stopped, also across a server restart.
    /// `.after(0)` is every change the server holds. A stream that asks for changes the server
    /// no longer holds ends with ``ActorKVError/compacted(namespace:requested:oldestAvailable:)``.
    case after(UInt64)
    /// The keys as they are at one sequence, as ``SnapshotPage``s, then the changes after it
    /// (`SNAPSHOT`).
    case snapshot
}

/// One key that a change wrote: its new value, or nil for a key the change deleted.
public struct ChangedKey: Sendable, Equatable, Hashable {
    /// The key bytes.
    public var key: [UInt8]
    /// The value the change stored, or nil if it deleted the key.
    public var value: [UInt8]?

    /// A key and its new value (nil: deleted).
    public init(key: [UInt8], value: [UInt8]?) {
        self.key = key
        self.value = value
    }

    /// True when the change deleted the key.
    public var isDeleted: Bool { value == nil }
    /// The key decoded as UTF-8 (invalid sequences become U+FFFD).
    public var keyString: String { String(decoding: key, as: UTF8.self) }
    /// The value decoded as UTF-8 (invalid sequences become U+FFFD), or nil for a deleted key.
    public var valueString: String? { value.map { String(decoding: $0, as: UTF8.self) } }
}

/// One change of a namespace: one write (a PUT, an INCR, a DEL of existing keys, a whole BATCH),
/// which is one record of the server's log.
public struct ChangeRecord: Sendable, Equatable, Hashable {
    /// The change's number: the version it gave the keys it wrote. Within a namespace, each
    /// change's is greater than the one before (consecutive, unless a prefix leaves some out).
    public var sequence: UInt64
    /// The namespace written.
    public var namespace: String
    /// The keys it wrote (only those under the stream's prefix), in the order the write gave them.
    public var keys: [ChangedKey]

    /// A change with the given contents.
    public init(sequence: UInt64, namespace: String, keys: [ChangedKey]) {
        self.sequence = sequence
        self.namespace = namespace
        self.keys = keys
    }
}

/// One page of a snapshot: keys (under the stream's prefix) and their values as of `sequence`,
/// in key order, at most 1,000 of them.
public struct SnapshotPage: Sendable, Equatable, Hashable {
    /// The sequence the snapshot shows the keys at; the changes after it follow the snapshot.
    public var sequence: UInt64
    /// The keys and values of this page, in key order (none, for an empty namespace).
    public var entries: [ScanEntry]
    /// True for the first page of a snapshot. When the connection breaks before a snapshot is
    /// complete, the stream takes a new one, at a new sequence: its first page is again marked
    /// first, and the pages of the unfinished snapshot before it are to be discarded.
    public var isFirst: Bool

    /// A page with the given contents.
    public init(sequence: UInt64, entries: [ScanEntry], isFirst: Bool) {
        self.sequence = sequence
        self.entries = entries
        self.isFirst = isFirst
    }
}

/// What a ``ChangeStream`` delivers.
///
/// A stream started from ``ChangeStart/snapshot`` delivers the snapshot's pages first, then the
/// changes after it; any stream delivers ``synced(_:)`` once it has caught up with the live log,
/// then live changes. A snapshot is complete when the first event that is not a page arrives.
public enum ChangeEvent: Sendable, Equatable, Hashable {
    /// One page of the snapshot a stream starts with (``ChangeStart/snapshot``).
    case snapshot(SnapshotPage)
    /// One change, after the previous one delivered: none is missed, none is delivered twice,
    /// also across reconnections.
    case change(ChangeRecord)
    /// Caught up: every change through this sequence has been delivered (or was outside the
    /// prefix). Delivered once per connection: once at the start, and again after each
    /// reconnection has caught up.
    case synced(UInt64)
}

/// How a change stream reconnects after its connection breaks (the server restarted or was
/// killed, dropped the stream with `-LAGGING`, a read failed).
///
/// The first reconnection is tried after `initialDelay`; each failed attempt doubles the delay,
/// up to `maximumDelay`. A connection that got as far as the server's answer to `CHANGES`
/// resets the delay. After `giveUpAfter` of failed attempts in a row, the stream ends with the
/// last attempt's error; nil tries for ever.
public struct ReconnectPolicy: Sendable, Equatable, Hashable {
    /// The wait before the first attempt to reconnect.
    public var initialDelay: Duration
    /// The longest wait between two attempts.
    public var maximumDelay: Duration
    /// How long to go on trying; nil: for ever.
    public var giveUpAfter: Duration?

    /// A policy with the given delays (see the type's description).
    public init(initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .seconds(2),
                giveUpAfter: Duration? = nil) {
        self.initialDelay = max(initialDelay, .zero)
        self.maximumDelay = max(maximumDelay, self.initialDelay)
        self.giveUpAfter = giveUpAfter
    }

    /// 50 ms doubling up to 2 s, for ever.
    public static let `default` = ReconnectPolicy()
}

// MARK: The client's entry points

extension ActorKVClient {
    /// The changes of `namespace` (only the keys that start with `prefix`) as they are written:
    /// `CHANGES namespace [PREFIX prefix] [FROM seq | SNAPSHOT]` on a connection of the stream's own.
    ///
    ///     for try await event in kv.changes("config", from: .snapshot) {
    ///         switch event {
    ///         case .snapshot(let page): load(page.entries)
    ///         case .change(let change): apply(change.keys)
    ///         case .synced: break
    ///         }
    ///     }
    ///
    /// Each iteration opens its own connection, to the client's socket, when the loop first asks
    /// for an event. A change is delivered once it is as durable as the server's `--fsync`
    /// promises, in order: none is missed and none delivered twice. If the connection breaks,
    /// the stream reconnects as `reconnect` says and resumes after the last change it delivered
    /// (`FROM seq`), so the loop does not notice, except for a second ``ChangeEvent/synced(_:)``.
    /// A broken connection during the snapshot is followed by a new snapshot (see
    /// ``SnapshotPage/isFirst``).
    ///
    /// The loop ends (returns nil) when its task is cancelled, which closes the connection; so
    /// does leaving the loop. It throws:
    /// - ``ActorKVError/compacted(namespace:requested:oldestAvailable:)`` when the changes after
    ///   the sequence to resume from are no longer all held (follow from ``ChangeStart/snapshot``);
    /// - a connection error when the first connection cannot be made, or reconnecting fails for
    ///   `reconnect.giveUpAfter`;
    /// - ``ActorKVError/server(code:message:)`` for a refusal (`BADNS`, `ERR` for a `FROM`
    ///   sequence after the namespace's last one, …), ``ActorKVError/protocolViolation(_:)`` for
    ///   a message that breaks the protocol;
    /// - ``ActorKVError/server(code:message:)`` with `NOPERM` (``ActorKVError/isPermissionDenied``)
    ///   when the client may not read `namespace` (under `actorkvd --acl`): at once, or after the
    ///   changes already sent when a reload of the server's rules withdraws the right (the
    ///   server then closes the stream). It does not reconnect: the right would still be missing.
    ///
    /// The client's ``timeout`` bounds connecting and the wait for the server's answer to
    /// `CHANGES`; an idle stream waits for changes without a time limit. Events wait in a
    /// small buffer (32 events, or about 1 MiB of keys and values): a consumer that stops reading
    /// makes the server drop the stream (`-LAGGING`), and the stream then resumes from the
    /// server's log as soon as it reads again.
    public func changes(_ namespace: String, prefix: [UInt8] = [], from start: ChangeStart = .now,
                        reconnect: ReconnectPolicy = .default) -> ChangeStream {
        ChangeStream(namespace: namespace, prefix: prefix, start: start, reconnect: reconnect,
                     socketPath: socketPath, timeout: timeout, resnapshots: false)
    }

    /// The changes of the keys that start with the UTF-8 bytes of `prefix`; see
    /// ``changes(_:prefix:from:reconnect:)``.
    public func changes(_ namespace: String, prefix: String, from start: ChangeStart = .now,
                        reconnect: ReconnectPolicy = .default) -> ChangeStream {
        changes(namespace, prefix: Array(prefix.utf8), from: start, reconnect: reconnect)
    }

    /// A local copy of `namespace` (its keys that start with `prefix`) that a connection of its
    /// own keeps current: see ``ChangeMirror``. Returns once the copy holds the namespace's
    /// state as of the moment it caught up (`synced`).
    ///
    /// Throws what ``changes(_:prefix:from:reconnect:)`` throws before that, except
    /// `COMPACTED`, after which the mirror takes a new snapshot; ``ActorKVError/closed`` if the
    /// calling task is cancelled first.
    public func mirror(_ namespace: String, prefix: [UInt8] = [],
                       reconnect: ReconnectPolicy = .default) async throws(ActorKVError) -> ChangeMirror {
        let stream = ChangeStream(namespace: namespace, prefix: prefix, start: .snapshot, reconnect: reconnect,
                                  socketPath: socketPath, timeout: timeout, resnapshots: true)
        let mirror = ChangeMirror(namespace: namespace, prefix: prefix, stream: stream)
        try await mirror.waitUntilSynced()
        return mirror
    }

    /// A mirror of the keys that start with the UTF-8 bytes of `prefix`; see
    /// ``mirror(_:prefix:reconnect:)``.
    public func mirror(_ namespace: String, prefix: String,
                       reconnect: ReconnectPolicy = .default) async throws(ActorKVError) -> ChangeMirror {
        try await mirror(namespace, prefix: Array(prefix.utf8), reconnect: reconnect)
    }
}

// MARK: The stream

/// A namespace's changes, made by ``ActorKVClient/changes(_:prefix:from:reconnect:)``: each
/// iteration follows them on a connection of its own, reconnecting and resuming as needed.
public struct ChangeStream: AsyncSequence, Sendable {
    /// A snapshot page, a change, or the caught-up marker.
    public typealias Element = ChangeEvent
    /// The error that ends an iteration.
    public typealias Failure = ActorKVError

    /// The namespace followed.
    public let namespace: String
    /// Only keys that start with these bytes (all keys when empty).
    public let prefix: [UInt8]
    /// Where an iteration starts.
    public let start: ChangeStart
    /// How an iteration reconnects.
    public let reconnect: ReconnectPolicy
    let socketPath: String
    let timeout: Duration?
    /// Whether `COMPACTED` starts a new snapshot rather than ending the iteration (for a mirror).
    let resnapshots: Bool

    /// An iterator with a follow of its own; its connection opens at the first ``Iterator/next()``.
    public func makeAsyncIterator() -> Iterator {
        let state = FollowState(namespace: namespace, prefix: prefix, start: start, resnapshots: resnapshots)
        return Iterator(handle: FollowHandle(ChangeFollower(path: socketPath, timeout: timeout, policy: reconnect, state: state)))
    }

    /// Hands out the events of one follow. Cancelling the task that waits in ``next()``, or
    /// dropping the iterator, closes its connection.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A snapshot page, a change, or the caught-up marker.
        public typealias Element = ChangeEvent
        /// The error that ends the iteration.
        public typealias Failure = ActorKVError

        private let handle: FollowHandle

        init(handle: FollowHandle) {
            self.handle = handle
        }

        /// The next event, waiting for it; nil once the task is cancelled (the connection is
        /// closed then). Throws the error that ends the follow (see
        /// ``ActorKVClient/changes(_:prefix:from:reconnect:)``); after it, returns nil.
        public mutating func next() async throws(ActorKVError) -> ChangeEvent? {
            try await handle.follower.next().get()
        }

        /// The next event; see ``next()``.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ActorKVError) -> ChangeEvent? {
            try await next()
        }
    }
}

/// Owned by one iterator: stops its follower (closing the connection) when the iterator goes.
final class FollowHandle: Sendable {
    let follower: ChangeFollower

    init(_ follower: ChangeFollower) {
        self.follower = follower
    }

    deinit {
        follower.stop()
    }
}

// MARK: The protocol's state machine

/// What a follow has seen and what it asks for next: reads the messages of `CHANGES` (protocol.md)
/// and turns them into events, keeping the position to resume from. No I/O: the
/// ``ChangeFollower`` feeds it one reply at a time and acts on each ``Step``.
struct FollowState: Sendable {
    /// Where the current connection is in its stream.
    enum Phase: Sendable, Equatable {
        /// `CHANGES` was sent; its answer, the `changes` message, has not come yet.
        case awaitingHeader
        /// Receiving the pages of a snapshot at `sequence`; `pages` have come so far.
        case snapshot(sequence: UInt64, pages: Int)
        /// Receiving changes (and `synced`).
        case following
    }

    /// What to do after a reply.
    enum Step: Sendable, Equatable {
        /// Hand these events to the consumer (perhaps none).
        case deliver([ChangeEvent])
        /// Send ``request`` again on this connection (after `COMPACTED`, now asking for a snapshot).
        case resend
        /// End this connection and resume on a new one, after the reconnection delay.
        case reconnect(ActorKVError)
        /// End the follow with this error.
        case fail(ActorKVError)
    }

    let namespace: String
    let prefix: [UInt8]
    /// Whether `COMPACTED` (or a `FROM` after the namespace's last sequence) starts a new
    /// snapshot instead of failing.
    let resnapshots: Bool
    /// Every change through this sequence has been delivered, or passed over as outside the
    /// prefix: a new connection resumes with `FROM position`. Nil until the server has said
    /// where a stream that starts now begins.
    private(set) var position: UInt64?
    /// Whether the next `CHANGES` asks for a snapshot: one was asked for and is not complete.
    private(set) var needsSnapshot: Bool
    private(set) var phase = Phase.awaitingHeader
    private let namespaceBytes: [UInt8]

    init(namespace: String, prefix: [UInt8], start: ChangeStart, resnapshots: Bool) {
        self.namespace = namespace
        self.prefix = prefix
        self.resnapshots = resnapshots
        namespaceBytes = Array(namespace.utf8)
        switch start {
        case .now: needsSnapshot = false
        case .after(let sequence): needsSnapshot = false; position = sequence
        case .snapshot: needsSnapshot = true
        }
    }

    /// Whether the current connection has had the server's answer to its `CHANGES`.
    var isStreaming: Bool { phase != .awaitingHeader }

    /// The `CHANGES` to send on a new connection: from the snapshot if one is still needed, else
    /// after ``position``, else from now.
    var request: [[UInt8]] {
        var arguments = [Array("CHANGES".utf8), namespaceBytes]
        if !prefix.isEmpty { arguments += [Array("PREFIX".utf8), prefix] }
        if needsSnapshot {
            arguments.append(Array("SNAPSHOT".utf8))
        } else if let position {
            arguments += [Array("FROM".utf8), Array(String(position).utf8)]
        }
        return arguments
    }

    /// A new connection is about to send ``request``.
    mutating func connectionStarted() {
        phase = .awaitingHeader
    }

    /// Reads one reply of the server.
    mutating func handle(_ reply: Reply) -> Step {
        switch reply {
        case .error(let text):
            return handleError(text)
        case .array(let parts) where parts.count == 3 || parts.count == 4:
            guard case .bulk(let kind) = parts[0], case .bulk(let name) = parts[1],
                  case .integer(let number) = parts[2], number >= 0 else { break }
            guard name == namespaceBytes else {
                return violation("a message about namespace '\(String(decoding: name, as: UTF8.self))' on a stream of '\(namespace)'")
            }
            let sequence = UInt64(number)
            switch (String(decoding: kind, as: UTF8.self), parts.count) {
            case ("changes", 3): return header(sequence)
            case ("snapshot", 4): return snapshotPage(sequence, parts[3])
            case ("change", 4): return change(sequence, parts[3])
            case ("synced", 3): return synced(sequence)
            default: break
            }
        default:
            break
        }
        return violation("unexpected message on a change stream: \(ActorKVClient.unexpected(reply, for: "CHANGES"))")
    }

    private mutating func header(_ sequence: UInt64) -> Step {
        guard phase == .awaitingHeader else { return violation("a second 'changes' message on one connection") }
        if needsSnapshot {
            phase = .snapshot(sequence: sequence, pages: 0)
            return .deliver([])
        }
        if let position, position != sequence {
            return violation("asked for the changes after \(position), the server starts after \(sequence)")
        }
        position = sequence
        phase = .following
        return .deliver([])
    }

    private mutating func snapshotPage(_ sequence: UInt64, _ payload: Reply) -> Step {
        guard case .snapshot(let at, let pages) = phase, at == sequence else {
            return violation("a 'snapshot' message at sequence \(sequence) outside the snapshot asked for")
        }
        guard case .array(let flat) = payload, flat.count % 2 == 0 else { return violation("a malformed 'snapshot' message") }
        var entries: [ScanEntry] = []
        entries.reserveCapacity(flat.count / 2)
        var i = 0
        while i < flat.count {
            guard case .bulk(let key) = flat[i], case .bulk(let value) = flat[i + 1] else {
                return violation("a 'snapshot' message whose pairs are not two bulk strings")
            }
            entries.append(ScanEntry(key: key, value: value))
            i += 2
        }
        phase = .snapshot(sequence: at, pages: pages + 1)
        return .deliver([.snapshot(SnapshotPage(sequence: at, entries: entries, isFirst: pages == 0))])
    }

    private mutating func change(_ sequence: UInt64, _ payload: Reply) -> Step {
        endSnapshot()
        guard phase == .following, let position else { return violation("a 'change' message before the stream's start") }
        guard sequence > position else {
            return violation("change \(sequence) after change \(position) (changes come once, in order)")
        }
        guard case .array(let flat) = payload, flat.count % 2 == 0, !flat.isEmpty else {
            return violation("a malformed 'change' message")
        }
        var keys: [ChangedKey] = []
        keys.reserveCapacity(flat.count / 2)
        var i = 0
        while i < flat.count {
            guard case .bulk(let key) = flat[i] else { return violation("a 'change' message with a key that is not a bulk string") }
            switch flat[i + 1] {
            case .bulk(let value): keys.append(ChangedKey(key: key, value: value))
            case .null: keys.append(ChangedKey(key: key, value: nil))
            default: return violation("a 'change' message with a value that is neither a bulk string nor null")
            }
            i += 2
        }
        self.position = sequence
        return .deliver([.change(ChangeRecord(sequence: sequence, namespace: namespace, keys: keys))])
    }

    private mutating func synced(_ sequence: UInt64) -> Step {
        endSnapshot()
        guard phase == .following, let position else { return violation("a 'synced' message before the stream's start") }
        guard sequence >= position else { return violation("synced at \(sequence) after change \(position)") }
        self.position = sequence
        return .deliver([.synced(sequence)])
    }

    /// The first message after the snapshot's pages completes it: the stream is at its sequence.
    private mutating func endSnapshot() {
        guard case .snapshot(let sequence, _) = phase else { return }
        position = sequence
        needsSnapshot = false
        phase = .following
    }

    private mutating func handleError(_ text: String) -> Step {
        let error = ActorKVError.fromErrorReply(text)
        guard case .server(let code, let message) = error else { return .fail(error) }
        switch WireErrorCode(rawValue: code) {
        case .compacted?:
            if resnapshots { return startSnapshotAgain() }
            let oldest = message.split(separator: " ").last.flatMap { UInt64($0) } ?? 0
            return .fail(.compacted(namespace: namespace, requested: position ?? 0, oldestAvailable: oldest))
        case .err? where message.hasPrefix("FROM sequence ") && message.contains("is after the last sequence"):
            // The server never wrote the changes this stream has seen (its data was replaced).
            return resnapshots ? startSnapshotAgain() : .fail(error)
        case .lagging?, .shutdown?:
            // Dropped for falling behind, or the server is stopping: resume on a new connection.
            return .reconnect(.connectionLost("the server ended the change stream: \(text)"))
        case .noPerm?:
            // The read right is missing (never given, or withdrawn by a reload, after which the
            // server closes the stream): a new connection would be refused the same way.
            return .fail(error)
        default:
            return .fail(error)
        }
    }

    private mutating func startSnapshotAgain() -> Step {
        needsSnapshot = true
        phase = .awaitingHeader
        return .resend
    }

    private func violation(_ reason: String) -> Step {
        .fail(.protocolViolation(reason))
    }
}

// MARK: The connection

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
                // A first connection that cannot be made is an error to report, not to wait out.
                if !connected && !everConnected {
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
        let registered = shared.withLock { s -> Bool in
            guard !s.stopped else { return false }
            s.fd = fd
            return true
        }
        guard registered else {
            _ = Glibc.close(fd)
            return .stopped
        }
        defer {
            shared.withLock { s in
                s.fd = -1
                _ = Glibc.close(fd)
            }
        }
        state.connectionStarted()
        if let failure = send(state.request, on: fd) { return ended(failure, progressed: false) }
        // Until the server answers CHANGES, a silent server is a failure; after, silence is idle.
        setTimeout(fd, SO_RCVTIMEO, timeout)

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
                    return ended(.timedOut("no answer to CHANGES from the server at \(path) within \(secondsText(timeout))"),
                                 progressed: false)
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
                case .resend:
                    if let failure = send(state.request, on: fd) { return ended(failure, progressed: false) }
                case .reconnect(let error):
                    return ended(error, progressed: true)
                case .fail(let error):
                    return .failed(error)
                }
            }
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

// MARK: Mirror

/// A local copy of a namespace's keys (those under a prefix) that follows its changes: made by
/// ``ActorKVClient/mirror(_:prefix:reconnect:)``.
///
/// It starts from a snapshot, then applies each change as it is written; after a broken
/// connection it resumes where it was, and if the server no longer holds the changes it missed
/// (`COMPACTED`), it takes a new snapshot. Its state is never a partial snapshot: a snapshot
/// replaces the state only once it is complete.
///
///     let config = try await kv.mirror("config")
///     let theme = config["theme"]                  // read locally, no round trip
///     for try await update in config.updates() {   // each change, as applied
///         print(update.sequence, update.keys.map(\.keyString))
///     }
///
/// Reading the state takes a lock, not a round trip. Call ``close()`` when done (or let the mirror
/// go): its connection stays open until then. It is `Sendable`: share it across tasks.
public final class ChangeMirror: Sendable {
    /// The namespace mirrored.
    public let namespace: String
    /// Only keys that start with these bytes are mirrored (all keys when empty).
    public let prefix: [UInt8]
    private let core: MirrorCore
    private let driver: Task<Void, Never>

    init(namespace: String, prefix: [UInt8], stream: ChangeStream) {
        self.namespace = namespace
        self.prefix = prefix
        let core = MirrorCore(namespace: namespace)
        self.core = core
        driver = Task.detached { await core.consume(stream) }
    }

    deinit {
        close()
    }

    /// The mirrored keys and their values, and the sequence they are as of: the last change
    /// applied (or the snapshot's, or the last sequence passed over as outside the prefix).
    public var state: (sequence: UInt64, entries: [[UInt8]: [UInt8]]) { core.state }

    /// The mirrored keys and their values.
    public var entries: [[UInt8]: [UInt8]] { core.state.entries }

    /// The sequence the mirrored state is as of (see ``state``).
    public var sequence: UInt64 { core.state.sequence }

    /// The value of `key`, or nil if the mirror does not hold it.
    public subscript(key: [UInt8]) -> [UInt8]? { core.value(key) }

    /// The value of the UTF-8 bytes of `key`, or nil if the mirror does not hold it.
    public subscript(key: String) -> [UInt8]? { core.value(Array(key.utf8)) }

    /// The error that stopped the mirror (it then no longer changes), or nil while it runs and
    /// after ``close()``. Reconnections are not errors: see ``ReconnectPolicy``.
    public var failure: ActorKVError? { core.failure }

    /// The updates applied from now on, in order: each change, and after a new snapshot (one
    /// taken after `COMPACTED`) the difference it made, as one record at the snapshot's
    /// sequence (deleted keys with nil values). Ends when the mirror is closed, or throws its
    /// ``failure``. Updates not yet read are buffered (without limit). To read the state and
    /// then the updates after it, subscribe first: an update whose sequence is at most the
    /// ``sequence`` read afterwards is already in the state.
    public func updates() -> AsyncThrowingStream<ChangeRecord, any Error> {
        core.subscribe()
    }

    /// Returns once the mirror has applied every change through `sequence` (a version the
    /// server returned for a write to a key under the prefix: a change outside the prefix is
    /// not seen until a later one inside it, or a reconnection). Throws the mirror's
    /// ``failure``, or ``ActorKVError/closed`` if it is closed or the task cancelled first.
    public func waitUntil(sequence: UInt64) async throws(ActorKVError) {
        try await core.wait(until: sequence)
    }

    /// Returns once the mirror has caught up the first time.
    func waitUntilSynced() async throws(ActorKVError) {
        do throws(ActorKVError) {
            try await core.wait(until: nil)
        } catch {
            close()
            throw error
        }
    }

    /// Stops following: closes the connection and ends the ``updates()`` sequences. The state
    /// stays readable as it was. Idempotent.
    public func close() {
        driver.cancel()
        core.finish(nil)
    }
}

/// The state of a ``ChangeMirror`` and the work of applying its events, behind one lock.
final class MirrorCore: Sendable {
    private let namespace: String
    private let locked = Mutex(State())

    typealias Waiter = CheckedContinuation<Result<Void, ActorKVError>, Never>
    typealias Subscriber = AsyncThrowingStream<ChangeRecord, any Error>.Continuation

    private struct State {
        var entries: [[UInt8]: [UInt8]] = [:]
        var sequence: UInt64 = 0
        /// A snapshot being received; it replaces `entries` once complete.
        var staged: [[UInt8]: [UInt8]]?
        var stagedSequence: UInt64 = 0
        var synced = false
        var ended = false
        var failure: ActorKVError?
        var nextID = 0
        var subscribers: [Int: Subscriber] = [:]
        /// Waiting for `target` (nil: the first sync).
        var waiters: [Int: (target: UInt64?, waiter: Waiter)] = [:]
        /// Waiters cancelled before they were registered.
        var cancelled: Set<Int> = []
    }

    init(namespace: String) {
        self.namespace = namespace
    }

    var state: (sequence: UInt64, entries: [[UInt8]: [UInt8]]) {
        locked.withLock { ($0.sequence, $0.entries) }
    }

    var failure: ActorKVError? { locked.withLock { $0.failure } }

    func value(_ key: [UInt8]) -> [UInt8]? { locked.withLock { $0.entries[key] } }

    /// Applies the stream's events until it ends.
    func consume(_ stream: ChangeStream) async {
        do throws(ActorKVError) {
            for try await event in stream { apply(event) }
            finish(nil)
        } catch {
            finish(error)
        }
    }

    private func apply(_ event: ChangeEvent) {
        let (updates, subscribers, ready) = locked.withLock { s -> ([ChangeRecord], [Subscriber], [Waiter]) in
            guard !s.ended else { return ([], [], []) }
            var updates: [ChangeRecord] = []
            switch event {
            case .snapshot(let page):
                if page.isFirst || s.staged == nil {
                    s.staged = [:]
                    s.stagedSequence = page.sequence
                }
                for entry in page.entries { s.staged![entry.key] = entry.value }
            case .change(let change):
                if let difference = promoteSnapshot(&s) { updates.append(difference) }
                for key in change.keys { s.entries[key.key] = key.value }
                s.sequence = change.sequence
                updates.append(change)
            case .synced(let sequence):
                if let difference = promoteSnapshot(&s) { updates.append(difference) }
                s.sequence = max(s.sequence, sequence)
                s.synced = true
            }
            var ready: [Waiter] = []
            if s.synced {
                for (id, waiting) in s.waiters where waiting.target.map({ $0 <= s.sequence }) ?? true {
                    ready.append(waiting.waiter)
                    s.waiters[id] = nil
                }
            }
            return (updates, Array(s.subscribers.values), ready)
        }
        for update in updates {
            for subscriber in subscribers { subscriber.yield(update) }
        }
        for waiter in ready { waiter.resume(returning: .success(())) }
    }

    /// Makes a complete staged snapshot the state; returns the difference it made, for the
    /// subscribers (nil when there are none or it made none).
    private func promoteSnapshot(_ s: inout State) -> ChangeRecord? {
        guard let snapshot = s.staged else { return nil }
        s.staged = nil
        defer {
            s.entries = snapshot
            s.sequence = s.stagedSequence
        }
        guard !s.subscribers.isEmpty else { return nil }
        var keys: [ChangedKey] = []
        for (key, value) in snapshot where s.entries[key] != value { keys.append(ChangedKey(key: key, value: value)) }
        for key in s.entries.keys where snapshot[key] == nil { keys.append(ChangedKey(key: key, value: nil)) }
        guard !keys.isEmpty else { return nil }
        keys.sort { $0.key.lexicographicallyPrecedes($1.key) }
        return ChangeRecord(sequence: s.stagedSequence, namespace: namespace, keys: keys)
    }

    /// Ends the mirror (nil: closed), finishing the subscribers and the waiters. Only the
    /// first call counts.
    func finish(_ error: ActorKVError?) {
        let ended = locked.withLock { s -> ([Subscriber], [Waiter])? in
            guard !s.ended else { return nil }
            s.ended = true
            s.failure = error
            defer {
                s.subscribers = [:]
                s.waiters = [:]
            }
            return (Array(s.subscribers.values), s.waiters.values.map(\.waiter))
        }
        guard let (subscribers, waiters) = ended else { return }
        for subscriber in subscribers { subscriber.finish(throwing: error) }
        for waiter in waiters { waiter.resume(returning: .failure(error ?? .closed)) }
    }

    func subscribe() -> AsyncThrowingStream<ChangeRecord, any Error> {
        let (stream, continuation) = AsyncThrowingStream<ChangeRecord, any Error>.makeStream()
        let outcome = locked.withLock { s -> (id: Int, ended: Bool, failure: ActorKVError?) in
            guard !s.ended else { return (0, true, s.failure) }
            let id = s.nextID
            s.nextID += 1
            s.subscribers[id] = continuation
            return (id, false, nil)
        }
        if outcome.ended {
            continuation.finish(throwing: outcome.failure)
        } else {
            let id = outcome.id
            continuation.onTermination = { [self] _ in
                _ = locked.withLock { $0.subscribers.removeValue(forKey: id) }
            }
        }
        return stream
    }

    /// Waits until the state is as of `target` or later (nil: until the first sync).
    func wait(until target: UInt64?) async throws(ActorKVError) {
        let id = locked.withLock { s -> Int in
            defer { s.nextID += 1 }
            return s.nextID
        }
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (waiter: Waiter) in
                let now: Result<Void, ActorKVError>? = locked.withLock { s in
                    if s.cancelled.remove(id) != nil { return .failure(.closed) }
                    if s.ended { return .failure(s.failure ?? .closed) }
                    if s.synced, target.map({ $0 <= s.sequence }) ?? true { return .success(()) }
                    s.waiters[id] = (target, waiter)
                    return nil
                }
                if let now { waiter.resume(returning: now) }
            }
        } onCancel: {
            let waiter = locked.withLock { s -> Waiter? in
                guard let waiting = s.waiters.removeValue(forKey: id) else {
                    s.cancelled.insert(id)
                    return nil
                }
                return waiting.waiter
            }
            waiter?.resume(returning: .failure(.closed))
        }
        try result.get()
    }
}

// MARK: RemoteRepository

/// One item that a change wrote, as a ``RemoteRepository`` sees it: the item saved under `id`,
/// or nil if the change deleted it.
public struct RepositoryItemChange<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// The item's id, decoded from its key.
    public var id: T.ID
    /// The item as saved, or nil if it was deleted.
    public var item: T?

    /// An item change with the given contents.
    public init(id: T.ID, item: T?) {
        self.id = id
        self.item = item
    }
}

extension RepositoryItemChange: Equatable where T: Equatable {}

/// What ``RemoteRepository/changes(prefix:from:reconnect:)`` delivers: ``ChangeEvent``s with
/// the keys decoded as ids and the values as items.
public enum RepositoryChange<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// One page of the snapshot (see ``SnapshotPage``): items in key order as of `sequence`.
    case snapshot(sequence: UInt64, items: [T], isFirst: Bool)
    /// One write: the items it saved, and the ids it deleted (with a nil item), in its order.
    case change(sequence: UInt64, items: [RepositoryItemChange<T>])
    /// Caught up through `sequence` (see ``ChangeEvent/synced(_:)``).
    case synced(sequence: UInt64)
}

extension RepositoryChange: Equatable where T: Equatable {}

/// A repository's changes, decoded: made by ``RemoteRepository/changes(prefix:from:reconnect:)``.
public struct RepositoryChangeSequence<T: Codable & Identifiable & Sendable>: AsyncSequence, Sendable where T.ID: RepositoryKey {
    /// A page of items, a write's items, or the caught-up marker.
    public typealias Element = RepositoryChange<T>
    /// The error that ends an iteration.
    public typealias Failure = ActorKVError

    let repository: RemoteRepository<T>
    let changes: ChangeStream

    /// An iterator with a follow of its own (see ``ChangeStream``).
    public func makeAsyncIterator() -> Iterator {
        Iterator(repository: repository, base: changes.makeAsyncIterator())
    }

    /// Decodes the events of one follow.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A page of items, a write's items, or the caught-up marker.
        public typealias Element = RepositoryChange<T>
        /// The error that ends the iteration.
        public typealias Failure = ActorKVError

        let repository: RemoteRepository<T>
        var base: ChangeStream.Iterator

        /// The next event, decoded; nil once the task is cancelled. Throws what
        /// ``ChangeStream/Iterator/next()`` throws, and
        /// ``ActorKVError/decodingFailed(namespace:key:reason:)`` for a key that is not an id
        /// or a value that is not an item.
        public mutating func next() async throws(ActorKVError) -> RepositoryChange<T>? {
            guard let event = try await base.next() else { return nil }
            switch event {
            case .snapshot(let page):
                var items: [T] = []
                items.reserveCapacity(page.entries.count)
                for entry in page.entries { items.append(try repository.decode(entry.value, key: entry.key)) }
                return .snapshot(sequence: page.sequence, items: items, isFirst: page.isFirst)
            case .change(let change):
                var items: [RepositoryItemChange<T>] = []
                items.reserveCapacity(change.keys.count)
                for changed in change.keys {
                    guard let id = T.ID(repositoryKey: changed.key) else {
                        throw .decodingFailed(namespace: repository.namespace, key: changed.key,
                                              reason: "the key is not a \(T.ID.self) id")
                    }
                    items.append(RepositoryItemChange(id: id, item: try changed.value.map { value throws(ActorKVError) in
                        try repository.decode(value, key: changed.key)
                    }))
                }
                return .change(sequence: change.sequence, items: items)
            case .synced(let sequence):
                return .synced(sequence: sequence)
            }
        }

        /// The next event, decoded; see ``next()``.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ActorKVError) -> RepositoryChange<T>? {
            try await next()
        }
    }
}
