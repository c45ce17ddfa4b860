/// One operation of a ``ActorKVClient/batch(_:_:)``.
public enum BatchOperation: Sendable, Equatable, Hashable {
    /// Store `value` under `key`.
    case put(key: [UInt8], value: [UInt8])
    /// Remove `key` (whether or not it exists).
    case delete(key: [UInt8])
    /// A guard: the batch applies only if `key`'s version is `version` (0: the key is absent)
    /// at that point of the batch. Writes nothing. A `version` past `Int64.max` makes the server
    /// refuse the whole batch with `ERR`, nothing applied.
    case ifVersion(key: [UInt8], version: UInt64)
    /// Add `delta` to the integer under `key` (absent: 0), as ``ActorKVClient/increment(_:_:by:)``.
    case increment(key: [UInt8], by: Int64)

    /// Store the UTF-8 bytes of `value` under the UTF-8 bytes of `key`.
    public static func put(_ key: String, _ value: String) -> BatchOperation {
        .put(key: Array(key.utf8), value: Array(value.utf8))
    }

    /// Store `value` under the UTF-8 bytes of `key`.
    public static func put(_ key: String, _ value: [UInt8]) -> BatchOperation {
        .put(key: Array(key.utf8), value: value)
    }

    /// Remove the UTF-8 bytes of `key`.
    public static func delete(_ key: String) -> BatchOperation {
        .delete(key: Array(key.utf8))
    }

    /// A guard on the version of the UTF-8 bytes of `key`.
    public static func ifVersion(_ key: String, _ version: UInt64) -> BatchOperation {
        .ifVersion(key: Array(key.utf8), version: version)
    }

    /// Add `delta` to the integer under the UTF-8 bytes of `key`.
    public static func increment(_ key: String, by delta: Int64 = 1) -> BatchOperation {
        .increment(key: Array(key.utf8), by: delta)
    }
}

/// The result of one ``BatchOperation``, in the order of the operations.
public enum BatchResult: Sendable, Equatable, Hashable {
    /// A ``BatchOperation/put(key:value:)`` was applied.
    case stored
    /// A ``BatchOperation/delete(key:)`` was applied; the flag tells whether the key existed.
    case deleted(Bool)
    /// A ``BatchOperation/ifVersion(key:version:)`` guard held.
    case held
    /// A ``BatchOperation/increment(key:by:)`` was applied: the new value.
    case counted(Int64)
}

/// A value and its version: the sequence number of the server's log record that last wrote the
/// key (from 1 up, increasing within a namespace). Pass the version to a conditional write
/// (`ifVersion:`) to write only if nobody has written the key since.
public struct VersionedValue: Sendable, Equatable, Hashable {
    /// The value.
    public var value: [UInt8]
    /// The version.
    public var version: UInt64

    /// A value with its version.
    public init(value: [UInt8], version: UInt64) {
        self.value = value
        self.version = version
    }
}
