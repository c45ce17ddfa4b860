import ActorKVProtocol
import ActorKVStore

/// One CHANGES on a connection, served by the event loop: where it is in its namespace's changes
/// and what it sends next. Owned by the loop thread.
///
/// It sends, in order: the snapshot (with `SNAPSHOT`), a page at a time; the changes after its
/// cursor, from the feed's window in memory or, when they are older than the window, from the
/// log files (``Next/readHistory(after:through:)``, read off the loop); `synced` once, when
/// nothing deliverable is left; then live changes. A follower that has synced and misses changes
/// trimmed from the window's front is behind by more than the server holds for it:
/// ``Next/lagging``. One that synced before the window's first changes became durable (they
/// were written before it followed, their fsync still running) reads them from the log files.
///
/// Its mutable state is `@exclusivity(unchecked)`, as ``Connection``'s: only the loop thread
/// touches it, one access at a time, and the checks were a visible share of each delivery.
final class Follower {
    /// Unique among the event loop's followers for the server's life: what a read of history
    /// running off the loop names it by (a follower stopped meanwhile, by RESET say, is not
    /// found; an object's address could be a later follower's).
    let id: UInt64
    /// What it follows.
    let key: FollowKey
    /// Where it reads the namespace's changes.
    let feed: any ChangeSource
    /// Where older history is read from (nil: the namespace did not exist when it started).
    let source: Namespace?
    /// Every change through this one has been sent, or passed over as outside the prefix.
    @exclusivity(unchecked) private(set) var cursor: UInt64
    @exclusivity(unchecked) private var snapshot: ChangeSnapshot?
    @exclusivity(unchecked) private var snapshotAfter: [UInt8]?
    @exclusivity(unchecked) private(set) var synced = false
    /// Where the last read of history stopped.
    @exclusivity(unchecked) var historyPosition: HistoryPosition?
    /// A read of history is running: nothing is sent until it is back.
    @exclusivity(unchecked) var readingHistory = false
    /// The local engine's feed, when that is what it reads: its messages can come from a tape.
    let localFeed: ChangeFeed?
    /// The shared tape it copies messages from, once it has asked for one.
    @exclusivity(unchecked) var tape: ChangeTape?
    /// The loop's last round in which it was noted on its tape (``ChangeTape/noteTaken(through:in:)``).
    @exclusivity(unchecked) var tapeRound: UInt64 = 0

    /// Snapshot pairs per message.
    static let snapshotPage = 1000
    /// Changes taken from the window per step.
    static let windowBatch = 256

    init(_ follow: NewFollow, id: UInt64) {
        self.id = id
        key = follow.key
        feed = follow.start.feed
        localFeed = follow.start.feed as? ChangeFeed
        source = follow.start.namespace
        cursor = follow.start.sequence
        snapshot = follow.start.snapshot
    }

    /// What to do next.
    enum Next {
        /// Send these (perhaps none, when every change read was outside the prefix: ask again).
        case messages([Reply])
        /// Read the changes after `after` through `through` from the log files.
        case readHistory(after: UInt64, through: UInt64)
        /// Fallen too far behind: drop the connection with `-LAGGING`.
        case lagging
        /// The source cannot go on: drop the connection with this error.
        case failed(StoreError)
        /// Nothing to send until the feed moves.
        case idle
    }

    /// Whether it may copy its next messages from a tape now: it reads the local engine's feed
    /// and is past its snapshot, with no read of history running.
    var canUseTape: Bool { localFeed != nil && snapshot == nil && !readingHistory }

    /// Its next messages from ``tape`` (which first reads on in the feed when the follower is at
    /// its end and the feed has more), about `maxBytes` of them, moving the cursor past them;
    /// nil when the tape cannot serve it now (``next()`` then does).
    func nextFromTape(maxBytes: Int) -> ChangeTape.Slice? {
        guard let tape, let localFeed, canUseTape else { return nil }
        if cursor >= tape.last && localFeed.deliverable > tape.last { tape.extend(from: localFeed) }
        guard let slice = tape.slice(after: cursor, maxBytes: maxBytes) else { return nil }
        cursor = slice.through
        return slice
    }

    /// The next step.
    func next() -> Next {
        // No page once a page was sent and nothing is left: `[]` asks again, for the changes.
        if snapshot != nil { return .messages(nextSnapshotPage().map { [$0] } ?? []) }
        if readingHistory { return .idle }
        // Caught up with the local feed, as a follower is after each change: no lock to learn it.
        if synced, let localFeed, cursor >= localFeed.deliverable { return localFeed.endSequence == nil ? .idle : ended() }
        switch feed.read(after: cursor, limit: Self.windowBatch) {
        case .changes(let changes):
            return .messages(take(changes))
        case .caughtUp:
            if localFeed?.endSequence != nil { return ended() }
            guard !synced else { return .idle }
            synced = true
            return .messages([ChangeMessages.synced(namespace: key.namespace, sequence: cursor)])
        case .beforeWindow(let windowStart, let deliverable):
            if source == nil || (synced && feed.hasTrimmed(after: cursor)) { return .lagging }
            return .readHistory(after: cursor, through: min(windowStart - 1, deliverable))
        case .waiting:
            return .idle
        case .failed(let error):
            return .failed(error)
        }
    }

    /// The messages of changes read (from the window or the log files), in order; the cursor
    /// moves past each.
    func take(_ changes: [Change]) -> [Reply] {
        var out: [Reply] = []
        for change in changes where change.sequence > cursor {
            if let message = ChangeMessages.message(for: change, namespace: key.namespace, prefix: key.prefix) { out.append(message) }
            cursor = change.sequence
        }
        return out
    }

    /// The end of a feed whose namespace was removed, once every change was sent: the stream
    /// ends as a lagging one does, to resume after the feed's last change (the removal's) on
    /// whatever the name holds next.
    private func ended() -> Next {
        cursor = max(cursor, localFeed?.endSequence ?? cursor)
        return .lagging
    }

    /// Whether it has synced and changes it had not taken were trimmed from the window
    /// (checked for a follower that is not reading, whose turn would not come).
    var isLagging: Bool { synced && feed.hasTrimmed(after: cursor) }

    /// The `-LAGGING` error that ends its connection, whose `rights` (nil: every right) decide
    /// whether it names the other namespace of a rename or copy that ended the feed.
    func laggingReply(for rights: ConnectionRights?) -> Reply {
        var ended = ""
        if localFeed?.endSequence != nil {
            let reason = localFeed?.endReason ?? .removed
            let mayRead = reason.otherNamespace.map { rights?.rights(on: $0).contains(.read) ?? true } ?? true
            ended = " (\(reason.text(namingOther: mayRead)))"
        }
        return .error(.lagging, "resume from sequence \(cursor) of namespace '\(key.namespace)'\(ended)")
    }

    /// The snapshot's next page, of 1 to ``snapshotPage`` pairs, or `*0` when the whole snapshot
    /// is empty (protocol.md: "at least one, `*0` for none"); nil when a page was sent and no
    /// key is left (the last page was exactly full, or its keys expired since). The pages skip
    /// expired keys without ending early (``ChangeSnapshot/page(after:prefix:limit:)``), so a
    /// run of keys whose deadline has passed makes no empty page.
    private func nextSnapshotPage() -> Reply? {
        let first = snapshotAfter == nil
        let page = snapshot!.page(after: snapshotAfter, prefix: key.prefix, limit: Self.snapshotPage)
        if let next = page.next { snapshotAfter = next } else { snapshot = nil }
        guard first || !page.entries.isEmpty else { return nil }
        return ChangeMessages.snapshot(namespace: key.namespace, sequence: cursor, entries: page.entries)
    }
}
