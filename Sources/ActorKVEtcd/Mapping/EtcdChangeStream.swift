import ActorKVStore
import Dispatch
import Foundation
import Synchronization

/// One CHANGES follower's changes in cluster mode: an etcd watch of its namespace from the
/// revision after its cursor, read into a bounded buffer that the server's follower drains
/// (``ActorKVStore/ChangeSource``). The watch is read on the client's reactor, the server's
/// event loop (``ReactorWatch``), or, with none, on a thread of its own.
///
/// - **Back-pressure, not loss.** When the buffer holds `limitBytes`, the watch is no longer
///   read: TCP holds etcd back, and etcd keeps the events (a slow watcher is only delayed).
///   A follower is dropped (`-LAGGING`, resume from its cursor) only when etcd compacts the
///   revisions it still needs.
/// - **Catching up.** A follower starting `FROM` an older revision must learn when it has had
///   all history up to now (its `synced` message). etcd's watch has no such mark, so the thread
///   writes the namespace's sync marker once the watch is created: when the marker's event (or
///   any later one) arrives, every earlier event has.
/// - **Fail-over.** When the member streaming the watch fails, the watch is opened again on
///   another from the revision after the last one received, so nothing is skipped or repeated.
///   The watch asks etcd to end it when its member loses the leader (`hasleader`), so a member
///   cut off from the quorum does not leave the follower silently behind. When no member answers
///   for ``failureSeconds``, the follower is dropped with `-UNAVAILABLE`.
public final class EtcdChangeStream: ChangeSource {
    /// The namespace followed.
    public let namespace: String
    private let client: EtcdClient
    private let keyPrefix: [UInt8]
    private let marker: [UInt8]
    private let limitBytes: Int
    private let listener: ChangeListener
    private let room = DispatchSemaphore(value: 0)
    /// The agent's count of followers: one more from the start until the follower is removed.
    private let followers: FollowerCount
    /// Seconds without any member answering before the follower is dropped.
    static let failureSeconds = 15.0
    /// How long the thread waits on a quiet watch before checking whether it should stop.
    static let pollSeconds = 0.5

    private struct State {
        var changes: [Change] = []
        var head = 0
        var bytes = 0
        /// Every event through this revision has been received (the watch resumes after it).
        var received: UInt64
        /// History through this revision must arrive before the follower is caught up (nil: it is).
        var catchUpThrough: UInt64?
        var compactedAt: UInt64?
        var failure: StoreError?
        var stopped = false
        var sent = 0
    }
    private let state: Mutex<State>
    /// The watch read on a reactor (nil: on a thread of its own).
    private let onReactor = Mutex<ReactorWatch?>(nil)

    /// A watch of `namespace` (keys starting with `keyPrefix`, marker `marker`) from the revision
    /// after `after`, buffering at most about `limitBytes`, telling `listener` when it has more.
    /// With `catchingUp`, the follower is not caught up until the history up to now has come.
    init(namespace: String, client: EtcdClient, keyPrefix: [UInt8], marker: [UInt8], after: UInt64, catchingUp: Bool,
         limitBytes: Int, listener: ChangeListener, followers: FollowerCount) {
        self.namespace = namespace
        self.client = client
        self.keyPrefix = keyPrefix
        self.marker = marker
        self.limitBytes = limitBytes
        self.listener = listener
        self.followers = followers
        state = Mutex(State(received: after, catchUpThrough: catchingUp ? UInt64.max : nil))
    }

    /// Starts reading the watch: on the client's reactor if it has one, else on a thread.
    func start() {
        followers.add(1)
        if let reactor = client.reactor {
            let watch = ReactorWatch(stream: self, client: client, reactor: reactor)
            onReactor.withLock { $0 = watch }
            reactor.submit { watch.open() }
            return
        }
        let thread = Thread { [self] in run() }
        thread.stackSize = 512 * 1024
        thread.name = "actorkv-watch"
        thread.start()
    }

    // MARK: - ChangeSource

    public func read(after cursor: UInt64, limit: Int) -> ChangeFeed.Read {
        let (read, freed) = state.withLock { s -> (ChangeFeed.Read, Bool) in
            let before = s.bytes
            while s.head < s.changes.count && s.changes[s.head].sequence <= cursor {
                s.bytes -= s.changes[s.head].byteSize
                s.head += 1
            }
            if s.head > 64 && s.head * 2 > s.changes.count {
                s.changes.removeFirst(s.head)
                s.head = 0
            }
            let freed = s.bytes < before
            if s.head < s.changes.count {
                return (.changes(Array(s.changes[s.head..<min(s.changes.count, s.head + limit)])), freed)
            }
            if let failure = s.failure { return (.failed(failure), freed) }
            if let compacted = s.compactedAt { return (.beforeWindow(windowStart: compacted + 1, deliverable: s.received), freed) }
            return (s.catchUpThrough == nil ? .caughtUp : .waiting, freed)
        }
        if freed {
            room.signal()
            onReactor.withLock { $0 }?.roomFreed()
        }
        return read
    }

    public func hasTrimmed(after cursor: UInt64) -> Bool {
        state.withLock { $0.compactedAt != nil && $0.head == $0.changes.count }
    }

    public func removeFollower() {
        let first = state.withLock { s in
            defer { s.stopped = true }
            return !s.stopped
        }
        if first { followers.add(-1) }
        room.signal()
        // Taken out: the watch holds the stream, and its last jobs may still run.
        let watch = onReactor.withLock { current -> ReactorWatch? in
            defer { current = nil }
            return current
        }
        if let watch { watch.reactor.submit { watch.stop() } }
    }

    public func countSent(_ count: Int) { state.withLock { $0.sent += count } }

    public func countDropped() {}

    // MARK: - What either way of reading shares

    /// Whether the follower has gone.
    var stopped: Bool { state.withLock { $0.stopped } }

    /// Whether the buffer is full (reading waits until the follower has taken some).
    var isFull: Bool { state.withLock { $0.bytes >= limitBytes } }

    /// Whether the watch is over (etcd compacted what it still needed, or it failed).
    var isOver: Bool { state.withLock { $0.compactedAt != nil || $0.failure != nil } }

    /// The body of the watch request that resumes after the last revision received.
    func resumeRequest() -> [UInt8] {
        Self.createRequest(keyPrefix, marker: marker, from: state.withLock { $0.received + 1 })
    }

    /// The put of the namespace's marker (see ``markIfCatchingUp(createdAt:)``).
    var markerPut: EtcdRequest { .put(key: marker, value: []) }

    /// Drops the follower with `-UNAVAILABLE`: no member answered for ``failureSeconds``.
    func lostEtcd(_ error: EtcdError) {
        finish { $0.failure = StoreError(.unavailable, "the change feed lost etcd: \(error.message); resume with CHANGES \(self.namespace) FROM the last sequence received") }
    }

    /// What a message of the watch asks of the reader.
    enum Taken {
        /// Read on.
        case more
        /// The watch is over (compacted).
        case over
        /// Read on, after writing ``markerPut`` (the follower is catching up).
        case putMarker
    }

    // MARK: - The thread

    /// Watches until the follower goes, etcd compacts what it needs, or no member answers.
    private func run() {
        var failingSince: Double?
        while !stopped {
            let from = state.withLock { $0.received + 1 }
            do {
                try watch(from: from)
                failingSince = nil
            } catch {
                let now = MonotonicClock.seconds()
                let since = failingSince ?? now
                failingSince = since
                if now - since >= Self.failureSeconds {
                    lostEtcd(error)
                    return
                }
                Thread.sleep(forTimeInterval: 0.2)
            }
            if state.withLock({ $0.compactedAt != nil }) { return }
        }
    }

    /// One watch stream from revision `from` on one member, until it ends or fails.
    private func watch(from: UInt64) throws(EtcdError) {
        let connection = try client.streamingConnection()
        var splitter = WatchMessageSplitter()
        var trouble: EtcdError?
        connection.setReadTimeout(Self.pollSeconds)
        do {
            try connection.stream("/v3/watch", body: Self.createRequest(keyPrefix, marker: marker, from: from),
                                  headers: ["Grpc-Metadata-hasleader: true"],
                                  handle: { chunk in
                                      for message in splitter.messages(chunk) {
                                          do throws(EtcdError) {
                                              switch try take(message) {
                                              case .more: break
                                              case .over: return false
                                              case .putMarker: _ = try client.blockingCall(markerPut.path, body: markerPut.body, write: true)
                                              }
                                          } catch {
                                              trouble = error
                                              return false
                                          }
                                      }
                                      return !stopped && waitForRoom()
                                  },
                                  idle: { !stopped })
        } catch {
            throw EtcdError(.unavailable, error.description)
        }
        if let trouble { throw trouble }
    }

    /// Handles one message of the stream.
    func take(_ message: [UInt8]) throws(EtcdError) -> Taken {
        let decoded = try EtcdResponses.decode(EtcdResponses.WatchMessage.self, from: message)
        let update = WatchUpdate(decoded, keyPrefix: keyPrefix, marker: marker)
        if let reason = update.canceledReason { throw EtcdError(.unavailable, "etcd ended the watch: \(reason)") }
        if let compacted = update.compactRevision {
            finish { $0.compactedAt = UInt64(compacted) }
            return .over
        }
        if update.created { return markIfCatchingUp(createdAt: UInt64(update.headerRevision)) ? .putMarker : .more }
        let more = state.withLock { s -> Bool in
            for change in update.changes where change.sequence > s.received {
                s.changes.append(change)
                s.bytes += change.byteSize
            }
            if update.lastRevision > 0 { s.received = max(s.received, UInt64(update.lastRevision)) }
            if let through = s.catchUpThrough, s.received > through { s.catchUpThrough = nil }
            return !update.changes.isEmpty || update.lastRevision > 0
        }
        if more { listener.notify(namespace) }
        return .more
    }

    /// On a follower still catching up: history runs through `createdAt`, and the marker's
    /// write (a later revision), which the caller makes when this returns true, will show when
    /// the watch has delivered all of it.
    private func markIfCatchingUp(createdAt: UInt64) -> Bool {
        let catching = state.withLock { s -> Bool in
            guard s.catchUpThrough != nil else { return false }
            if s.received >= createdAt {
                s.catchUpThrough = nil
                return false
            }
            s.catchUpThrough = createdAt
            return true
        }
        if !catching { listener.notify(namespace) }
        return catching
    }

    /// Waits while the buffer is full; false if the follower went meanwhile.
    private func waitForRoom() -> Bool {
        while true {
            let (full, gone) = state.withLock { ($0.bytes >= limitBytes, $0.stopped) }
            if gone { return false }
            if !full { return true }
            _ = room.wait(timeout: .now() + Self.pollSeconds)
        }
    }

    private func finish(_ change: @Sendable (inout State) -> Void) {
        state.withLock { change(&$0) }
        listener.notify(namespace)
    }

    /// The body of a watch of the keys starting with `keyPrefix` and the marker after them,
    /// from revision `from`.
    static func createRequest(_ keyPrefix: [UInt8], marker: [UInt8], from: UInt64) -> [UInt8] {
        var out = JSONWriter()
        out.open()
        out.key("create_request")
        out.open()
        out.field("key", base64: keyPrefix)
        out.field("range_end", base64: EtcdKeys.after(marker))
        out.field("start_revision", Int64(from))
        out.close()
        out.close()
        return out.bytes
    }
}

/// How many followers an agent's change streams serve (INFO's `changes_followers`).
final class FollowerCount: Sendable {
    private let value = Atomic<Int>(0)

    /// Adds `delta` (1 when a stream starts, -1 when its follower is removed).
    func add(_ delta: Int) { value.add(delta, ordering: .relaxed) }

    /// The count now.
    var current: Int { value.load(ordering: .relaxed) }
}
