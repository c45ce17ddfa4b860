/// Counters and facts about one namespace, for INFO.
public struct NamespaceStatistics: Sendable, Equatable {
    /// The namespace.
    public var name: String
    /// Live keys.
    public var keys: Int
    /// Bytes of live keys and values.
    public var liveBytes: Int
    /// Bytes of the log that recovery replays (the records after the snapshot, and the segment
    /// headers before them): what compaction weighs against ``liveBytes``.
    public var logBytes: Int
    /// Bytes of the log kept only for change history (`CHANGES … FROM`: see `changesHistory`),
    /// on disk besides ``logBytes``: older segments the snapshot covers, and the records before
    /// the snapshot in the segment still written to.
    public var historyBytes = 0
    /// The sequence number of the last write.
    public var lastSequence: UInt64
    /// The sequence number the last snapshot covers (0: none).
    public var snapshotSequence: UInt64
    /// When the last snapshot was written, in seconds since 1970 (0: none).
    public var snapshotTime: UInt64
    /// Log records replayed when the namespace was opened.
    public var recordsReplayed: Int
    /// Bytes of torn tail cut when the namespace was opened.
    public var tornBytesCut: Int
    /// Compactions completed since opening.
    public var compactions: Int
    /// Failed reads, writes and fsyncs since opening.
    public var ioErrors: Int
    /// Set when writes are refused because durability was lost.
    public var failure: String?
    /// The oldest change held for change feeds that resume (`CHANGES … FROM`).
    public var oldestSequence: UInt64 = 0
    /// Connections following the namespace's changes.
    public var followers = 0
    /// Change feed messages sent to followers.
    public var changesSent = 0
    /// Followers dropped for falling too far behind (`-LAGGING`).
    public var followersDropped = 0
    /// Bytes of recent changes held in memory for the followers: what some follower has not
    /// taken yet, at most about `--changes-lag-bytes`.
    public var changesHeld = 0
    /// Keys with a deadline (`PX`, `EX`, `PEXPIRE`).
    public var expiringKeys = 0
    /// Keys owned by a connection (`EPHEMERAL`).
    public var ephemeralKeys = 0
    /// The namespace's own deadline (`EXPIRE ns …`), in milliseconds since 1970 (0: none).
    public var deadline: UInt64 = 0
}
