import Synchronization

/// A namespace's recent changes, held in memory while anyone follows it, and how far they may
/// be delivered. Shared between the namespace actor, which publishes each record it writes, and
/// the server's followers, which read what is deliverable at their own pace.
///
/// The window holds the changes from ``State/windowStart`` on, in order. While nobody follows,
/// it holds nothing and publishing costs one atomic load. It is trimmed from the front once it
/// holds more than `lagBytes` of deliverable changes: a follower whose place falls off the front
/// is behind by more than that bound, and is dropped (`-LAGGING`) rather than slowing anyone.
/// The server also lets go of what every follower has taken (``release(through:)``).
/// A follower that catches up on older history reads it from the log files, then from here.
///
/// A change is deliverable once it is as durable as the fsync policy promises (``deliverable``):
/// the namespace advances that mark when a write returns (`everysec`, `no`) or when its fsync
/// completes (`always`), so a follower never sees a change that a crash could undo.
public final class ChangeFeed: ChangeSource {
    /// The namespace's name.
    public let namespace: String
    private let lagBytes: Int
    private let listener: ChangeListener
    private let followerCount = Atomic<Int>(0)
    /// Messages sent to followers (the server counts them here for INFO).
    public let messagesSent = Atomic<Int>(0)
    /// Followers dropped for lagging (for INFO).
    public let followersDropped = Atomic<Int>(0)

    private struct State {
        /// The changes held, oldest first; `changes[head...]` are live, the rest freed space.
        var changes: [Change] = []
        var head = 0
        /// The sequence number of the first change the window holds or would hold.
        var windowStart: UInt64 = 1
        /// The window's start when the first follower came, or after the last ``release(through:)``:
        /// the changes from here to ``windowStart`` were trimmed; those before it were never held
        /// (written before anyone followed, or not yet durable then and so delivered from the log
        /// files) or were let go once every follower had them.
        var firstHeld: UInt64 = 1
        /// Bytes of the changes held.
        var bytes = 0
        /// The last change deliverable to followers.
        var deliverable: UInt64 = 0
        /// Why the feed ended; nil while it goes on.
        var endReason: FeedEnd?
    }

    private let state = Mutex(State())
    /// ``State/deliverable``, readable without the lock: a follower that has every change
    /// through it need not take the lock to learn that it is caught up.
    private let deliverableMark = Atomic<UInt64>(0)
    /// ``State/windowStart`` once changes have been trimmed from the window (0 before): a
    /// follower before it has lost changes it had not taken. Readable without the lock.
    private let trimmedBefore = Atomic<UInt64>(0)
    /// The sequence after which the feed ends (its namespace was removed), plus one; 0 while
    /// it goes on. Readable without the lock.
    private let endMark = Atomic<UInt64>(0)

    /// A feed of `namespace`'s changes, holding at most about `lagBytes` of deliverable ones,
    /// which tells `listener` when more become deliverable.
    init(namespace: String, lagBytes: Int, listener: ChangeListener) {
        self.namespace = namespace
        self.lagBytes = lagBytes
        self.listener = listener
    }

    /// Whether anyone follows: only then does the namespace publish its records.
    public var isFollowed: Bool { followerCount.load(ordering: .acquiring) > 0 }

    /// How many follow.
    public var followers: Int { followerCount.load(ordering: .relaxed) }

    /// The last deliverable change's number (read without the lock: a change made deliverable
    /// after this read is announced to the listener afterwards).
    public var deliverable: UInt64 { deliverableMark.load(ordering: .acquiring) }

    /// Adds a follower. On the namespace's actor (or, for a namespace that does not exist yet,
    /// the store's), so that no record is written between `lastSequence` and the window's start:
    /// when nobody followed, the window starts after `lastSequence`, with everything through
    /// `deliverable` deliverable.
    func addFollower(lastSequence: UInt64, deliverable: UInt64) {
        state.withLock { s in
            if followerCount.load(ordering: .relaxed) == 0 {
                s = State()
                s.windowStart = lastSequence + 1
                s.firstHeld = lastSequence + 1
                s.deliverable = deliverable
                publishMarks(s)
            }
            followerCount.add(1, ordering: .releasing)
        }
    }

    /// Removes a follower (its connection ended); the last one empties the window.
    public func removeFollower() {
        state.withLock { s in
            let left = followerCount.subtract(1, ordering: .releasing).newValue
            if left == 0 {
                s = State()
                publishMarks(s)
            }
        }
    }

    /// Appends the changes of records just written (in order, numbered on from the window's end).
    func publish(_ new: [Change]) {
        guard !new.isEmpty else { return }
        state.withLock { s in
            guard followerCount.load(ordering: .relaxed) > 0 else { return }
            for change in new {
                s.changes.append(change)
                s.bytes += change.byteSize
            }
            trim(&s)
            publishMarks(s)
        }
    }

    /// Makes every change through `sequence` deliverable and tells the listener.
    func advanceDeliverable(to sequence: UInt64) {
        let advanced = state.withLock { s -> Bool in
            guard sequence > s.deliverable else { return false }
            s.deliverable = sequence
            trim(&s)
            publishMarks(s)
            return true
        }
        if advanced && isFollowed { listener.notify(namespace) }
    }

    /// The last change of a feed that ended (its namespace was removed: ``end(deleting:at:)``),
    /// nil while it goes on. A follower that has every deliverable change of an ended feed
    /// has them all, through this one.
    public var endSequence: UInt64? {
        let mark = endMark.load(ordering: .acquiring)
        return mark == 0 ? nil : mark - 1
    }

    /// Why the feed ended (``end(deleting:at:because:)``); nil while it goes on.
    public var endReason: FeedEnd? { state.withLock { $0.endReason } }

    /// Ends the feed: its namespace was removed, or replaced (`reason`). The change numbered
    /// `sequence` deleting `keys` (none when the namespace held no key: then `sequence` is its
    /// last, already published) is published and made deliverable, and followers are told;
    /// nothing follows it.
    func end(deleting keys: [[UInt8]], at sequence: UInt64, because reason: FeedEnd = .removed) {
        state.withLock { $0.endReason = reason }
        if !keys.isEmpty { publish([Change(sequence: sequence, mutations: keys.map { .delete(key: $0) })]) }
        endMark.store(sequence + 1, ordering: .releasing)
        advanceDeliverable(to: sequence)
        if isFollowed { listener.notify(namespace) }
    }

    /// What a follower at `cursor` (it has every change through it) may read next.
    public enum Read: Sendable, Equatable {
        /// The next deliverable changes after the cursor, at most as many as asked for.
        case changes([Change])
        /// Nothing deliverable after the cursor yet: the follower is caught up.
        case caughtUp
        /// The changes after the cursor start before the window: they are in the log files,
        /// through the change before `windowStart` (and no further than ``deliverable``).
        case beforeWindow(windowStart: UInt64, deliverable: UInt64)
        /// Nothing deliverable yet, but the follower is not caught up either: history it asked
        /// for is still on its way (cluster mode).
        case waiting
        /// The source cannot go on (cluster mode: etcd unreachable); the follower is dropped
        /// with this error.
        case failed(StoreError)
    }

    /// Bytes of the changes the window holds (for INFO).
    public var heldBytes: Int { state.withLock { $0.bytes } }

    /// The first change the window holds (or will hold): a follower before it reads the log
    /// files, or is lagging.
    public var windowStart: UInt64 { state.withLock { $0.windowStart } }

    /// The deliverable changes after `cursor`, at most `limit` of them.
    public func read(after cursor: UInt64, limit: Int) -> Read {
        var out: [Change] = []
        if let window = visitDeliverable(after: cursor, limit: limit, { out.append($0) }) {
            return .beforeWindow(windowStart: window.start, deliverable: window.deliverable)
        }
        return out.isEmpty ? .caughtUp : .changes(out)
    }

    /// Calls `body` with each deliverable change after `cursor`, at most `limit` of them, in
    /// order, where the window holds them: under the feed's lock, so `body` must not use the
    /// feed. What ``read(after:limit:)`` returns, without an array of copies: a shared tape
    /// reading a thousand changes a turn made and freed one for each. Returns the window's
    /// start and the deliverable mark when the changes after `cursor` begin before the window
    /// (none is visited: they are in the log files), otherwise nil.
    public func visitDeliverable(after cursor: UInt64, limit: Int, _ body: (Change) -> Void) -> (start: UInt64, deliverable: UInt64)? {
        state.withLock { s in
            if cursor >= s.deliverable { return nil }
            if cursor + 1 < s.windowStart { return (s.windowStart, s.deliverable) }
            var index = s.head + Int(cursor + 1 - s.windowStart)
            let end = min(s.changes.count, index + limit)
            while index < end && s.changes[index].sequence <= s.deliverable {
                body(s.changes[index])
                index += 1
            }
            return nil
        }
    }

    /// Drops the changes through `sequence`, which every follower has taken: only the server's
    /// loop, which serves them all, knows that and calls this. The window then holds what some
    /// follower still needs, not `lagBytes` of changes whatever happened to them: its memory
    /// is reused while it is still in the cache, where a window kept full wrote each run's
    /// records to memory freed megabytes ago. Nobody is behind the changes released, so none is
    /// marked lost (``hasTrimmed(after:)``); a follower added later from before the window reads
    /// the log files, as one from before the window was ever held does. Nothing is done when
    /// the window already starts after `sequence` (a follower there may have lagged).
    public func release(through sequence: UInt64) {
        state.withLock { s in
            let through = min(sequence, s.deliverable)
            guard through >= s.windowStart, s.head < s.changes.count else { return }
            while s.head < s.changes.count && s.changes[s.head].sequence <= through {
                s.bytes -= s.changes[s.head].byteSize
                s.head += 1
                s.windowStart += 1
            }
            s.firstHeld = s.windowStart
            compact(&s)
            publishMarks(s)
        }
    }

    public func countSent(_ count: Int) { messagesSent.add(count, ordering: .relaxed) }

    public func countDropped() { followersDropped.add(1, ordering: .relaxed) }

    /// Whether changes after `cursor` that the window held were trimmed before a follower at
    /// `cursor` took them: it is behind by more than `lagBytes`. (A follower behind a window
    /// that was never trimmed is not: it reads what it lacks from the log files.)
    public func hasTrimmed(after cursor: UInt64) -> Bool {
        cursor + 1 < trimmedBefore.load(ordering: .acquiring)
    }

    /// Copies what followers check on every turn out of the state (under its lock) into the
    /// atomics they read without it.
    private func publishMarks(_ s: borrowing State) {
        deliverableMark.store(s.deliverable, ordering: .releasing)
        trimmedBefore.store(s.windowStart > s.firstHeld ? s.windowStart : 0, ordering: .releasing)
    }

    /// Drops deliverable changes from the front while more than `lagBytes` are held.
    private func trim(_ s: inout State) {
        while s.bytes > lagBytes && s.head < s.changes.count && s.changes[s.head].sequence <= s.deliverable {
            s.bytes -= s.changes[s.head].byteSize
            s.head += 1
            s.windowStart += 1
        }
        compact(&s)
    }

    /// Frees the space of dropped changes once it is most of the array.
    private func compact(_ s: inout State) {
        if s.head > 64 && s.head * 2 > s.changes.count {
            s.changes.removeFirst(s.head)
            s.head = 0
        } else if s.head == s.changes.count {
            s.changes.removeAll(keepingCapacity: true)
            s.head = 0
        }
    }
}

/// Told the name of a namespace whose feed has new deliverable changes (the server wakes its
/// followers). Set once by whoever serves the followers; until then nobody is told.
public final class ChangeListener: Sendable {
    /// The handler, boxed: a closure kept in a `Mutex` directly is re-abstracted each time
    /// `withLock` hands it out and writes it back, growing a chain of thunks on every call.
    private final class Handler: Sendable {
        let call: @Sendable (String) -> Void
        init(_ call: @escaping @Sendable (String) -> Void) { self.call = call }
    }

    private let handler = Mutex<Handler?>(nil)

    /// A listener that tells nobody yet.
    public init() {}

    /// Sets what is told (replacing any earlier handler).
    public func set(_ handler: @escaping @Sendable (String) -> Void) {
        let boxed = Handler(handler)
        self.handler.withLock { $0 = boxed }
    }

    /// Tells the handler that `namespace` has new changes for its followers.
    public func notify(_ namespace: String) {
        let handler = self.handler.withLock { $0 }
        handler?.call(namespace)
    }
}
