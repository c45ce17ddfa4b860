/// A value and its version: the sequence number of the log record that last wrote the key.
public struct VersionedValue: Sendable, Equatable {
    /// The value.
    public var value: [UInt8]
    /// The version, greater than 0.
    public var version: UInt64

    /// A value with its version.
    public init(value: [UInt8], version: UInt64) {
        self.value = value
        self.version = version
    }
}

extension OrderedMap {
    /// The value stored for `key` with its version, or nil.
    func versionedValue<Key: BorrowedBytes>(_ key: Key) -> VersionedValue? {
        versioned(key).map { VersionedValue(value: $0.value, version: $0.version) }
    }
}
