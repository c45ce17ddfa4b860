import ActorKVProtocol

// The events a change stream yields (protocol.md, "CHANGES"): where it starts, a change, a
// snapshot page, and the stream's own events.

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
