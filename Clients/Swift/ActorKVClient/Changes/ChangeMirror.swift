import Synchronization

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
    ///
    /// The stream's error type is `any Error` (the standard library makes an
    /// `AsyncThrowingStream` only with that type), but what it throws is always an
    /// ``ActorKVError``: the mirror's ``failure``. Cast it with `as? ActorKVError`.
    public func updates() -> AsyncThrowingStream<ChangeRecord, any Error> {
        core.subscribe()
    }

    /// Returns once the mirror has applied every change through `sequence` (a version the
    /// server returned for a write to a key under the prefix: a change outside the prefix is
    /// not seen until a later one inside it, or a reconnection). Throws the mirror's
    /// ``failure``, ``ActorKVError/closed`` if it is closed first, or ``ActorKVError/cancelled``
    /// if the task is cancelled first (the mirror goes on).
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
                    if s.cancelled.remove(id) != nil { return .failure(.cancelled) }
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
            waiter?.resume(returning: .failure(.cancelled))
        }
        try result.get()
    }
}
