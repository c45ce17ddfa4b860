/// One operation of a ``ActorKVClient/batch(_:_:)``.
public enum BatchOperation: Sendable, Equatable, Hashable {
    /// Store `value` under `key`.
    case put(key: [UInt8], value: [UInt8])
    /// Remove `key` (whether or not it exists).
    case delete(key: [UInt8])

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
}

/// The result of one ``BatchOperation``, in the order of the operations.
public enum BatchResult: Sendable, Equatable, Hashable {
    /// A ``BatchOperation/put(key:value:)`` was applied.
    case stored
    /// A ``BatchOperation/delete(key:)`` was applied; the flag tells whether the key existed.
    case deleted(Bool)
}
