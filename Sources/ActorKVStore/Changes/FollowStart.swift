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

    /// Up to `limit` (at least 1) keys and values under `prefix` after `after` (nil: from the
    /// first), in key order, passing over those that have expired: fewer than `limit` only when
    /// no key is left after them, however many expired keys lie between (they wait for the
    /// sweeper's deletes, which follow as changes). The second element is the last key looked
    /// at, where the next page goes on; nil when every key was looked at. A page may still come
    /// back empty with `next` nil: nothing was left (the last page was exactly full, or what
    /// was left expired meanwhile).
    public func page(after: [UInt8]?, prefix: [UInt8], limit: Int) -> (entries: [KeyValue], next: [UInt8]?) {
        guard lifetimes.hasDeadlines else {
            let entries = map.entries(after: after, prefix: prefix, limit: limit)
            return (entries, entries.count < limit ? nil : entries.last?.key)
        }
        let now = WallClock.milliseconds()
        var entries: [KeyValue] = []
        var cursor = after
        while true {
            // Read on in steps at least this big, so that a long run of expired keys costs a
            // few lookups in the map, not one per key.
            let want = Swift.max(limit - entries.count, Self.expiredScanStep)
            let chunk = map.entries(after: cursor, prefix: prefix, limit: want)
            for (index, entry) in chunk.enumerated() where !lifetimes.hasExpired(entry.key, at: now) {
                entries.append(entry)
                if entries.count == limit {
                    let atEnd = index == chunk.count - 1 && chunk.count < want
                    return (entries, atEnd ? nil : entry.key)
                }
            }
            guard chunk.count == want, let last = chunk.last?.key else { return (entries, nil) }
            cursor = last
        }
    }

    /// How many keys a page reads from the map at a time at least, while keys expire.
    static let expiredScanStep = 256
}
