/// One request to a namespace, as the server hands them over in pipeline order.
public enum Operation: Sendable {
    /// The value of a key. (The key is a slice so that a server can pass a request's key where
    /// the request holds it; ``get(_:)-swift.type.method`` takes an array.)
    case get(ArraySlice<UInt8>)
    /// How many of the keys exist.
    case exists([[UInt8]])
    /// Set a key. (A slice key as for ``get(_:)-swift.enum.case``.)
    case put(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>)
    /// Remove keys; the outcome counts those that existed.
    case delete([[UInt8]])
    /// Apply puts and deletes all-or-nothing as one log record.
    case batch([Mutation])
    /// The number of keys.
    case count
    /// One page of keys and values in key order.
    case scan(ScanCursor, prefix: [UInt8], limit: Int)

    /// The value of `key`.
    public static func get(_ key: [UInt8]) -> Operation { .get(key[...]) }

    /// Set `key` to `value`.
    public static func put(key: [UInt8], value: [UInt8]) -> Operation { .put(key: key[...], value: value[...]) }

    /// Whether the operation changes data (and so is logged and waits for durability).
    public var isWrite: Bool {
        switch self {
        case .put, .delete, .batch: return true
        case .get, .exists, .count, .scan: return false
        }
    }
}

/// The result of one ``Operation``.
public enum Outcome: Sendable, Equatable {
    /// A value, or nil for a missing key.
    case value([UInt8]?)
    /// A put succeeded.
    case stored
    /// A count (deleted, existing or total keys).
    case integer(Int)
    /// A batch succeeded: per mutation, nil for a put, else whether the delete removed a key.
    case batch([Bool?])
    /// A scan page.
    case page(ScanPage)
    /// The operation failed and changed nothing.
    case failure(StoreError)
}

/// The outcomes of a run of operations, and what to wait for before acknowledging their writes.
public struct Execution: Sendable {
    /// One outcome per operation, in order.
    public var outcomes: [Outcome]
    /// Wait on this before replying to any write in the run.
    public var durability: Durability
}

/// Counters and facts about one namespace, for INFO.
public struct NamespaceStatistics: Sendable, Equatable {
    /// The namespace.
    public var name: String
    /// Live keys.
    public var keys: Int
    /// Bytes of live keys and values.
    public var liveBytes: Int
    /// Bytes in the log segments.
    public var logBytes: Int
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
}
