/// Where a new follower of a namespace's changes starts.
public enum FollowFrom: Sendable, Equatable {
    /// After the namespace's last change.
    case now
    /// After the change numbered so (`CHANGES … FROM seq`).
    case sequence(UInt64)
    /// With the namespace's state at its last change, then the changes after it.
    case snapshot
}

/// What a new follower gets: the feed to read, where it starts, and what comes before.
public struct FollowStart: Sendable {
    /// Where the follower reads its changes; it is counted there until it calls
    /// ``ChangeSource/removeFollower()``.
    public let feed: any ChangeSource
    /// The changes that follow are those after this one.
    public let sequence: UInt64
    /// With ``FollowFrom/snapshot``: the state as of ``sequence``.
    public let snapshot: ChangeSnapshot?
    /// Where history older than the feed's window is read (nil: the namespace does not exist,
    /// and has no history; or the source holds all of it itself).
    public let namespace: Namespace?

    /// A start reading `feed` after change `sequence`, with `snapshot` (SNAPSHOT) before it and
    /// older history in `namespace`'s files.
    public init(feed: any ChangeSource, sequence: UInt64, snapshot: ChangeSnapshot?, namespace: Namespace?) {
        self.feed = feed
        self.sequence = sequence
        self.snapshot = snapshot
        self.namespace = namespace
    }
}

/// A namespace's keys and values as of one change, read a page at a time (a copy-on-write copy
/// of its map and its keys' lifetimes: later writes do not show). Keys whose deadline has
/// passed when a page is read are left out: they are gone for every read, and their deletes
/// follow as changes.
public struct ChangeSnapshot: Sendable {
    let map: OrderedMap
    let lifetimes: KeyLifetimes

    init(map: OrderedMap, lifetimes: KeyLifetimes) {
        self.map = map
        self.lifetimes = lifetimes
    }

    /// A snapshot of `entries` (cluster mode: a namespace's keys read from etcd at one revision),
    /// none of which expires.
    public init(entries: some Sequence<(key: [UInt8], value: [UInt8])>) {
        var map = OrderedMap()
        for entry in entries { _ = map.updateValue(entry.value, forKey: entry.key) }
        self.init(map: map, lifetimes: KeyLifetimes())
    }

    /// Up to `limit` keys and values under `prefix` after `after` (nil: from the first), in key
    /// order, less any that have expired. The second element is the last key looked at, where
    /// the next page goes on (nil: this was the last page).
    public func page(after: [UInt8]?, prefix: [UInt8], limit: Int) -> (entries: [(key: [UInt8], value: [UInt8])], next: [UInt8]?) {
        var entries = map.entries(after: after, prefix: prefix, limit: limit)
        let next = entries.count < limit ? nil : entries.last?.key
        if lifetimes.hasDeadlines {
            let now = WallClock.milliseconds()
            entries.removeAll { lifetimes.hasExpired($0.key, at: now) }
        }
        return (entries, next)
    }
}
