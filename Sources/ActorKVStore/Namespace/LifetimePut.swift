/// A PUT with a lifetime (``Operation/lifetimePut(_:)``).
public struct LifetimePut: Sendable {
    /// The key.
    public var key: [UInt8]
    /// The value. (A slice, as a PUT's, so that a server passes the value where its request
    /// holds it: a conditional put whose condition fails, such as a lock's refused acquire,
    /// copies nothing.)
    public var value: ArraySlice<UInt8>
    /// Milliseconds from the write until the key expires; 0: no deadline.
    public var milliseconds: UInt64
    /// The connection that owns the key (ephemeral); 0: nobody.
    public var owner: UInt64
    /// Write only if the key's version is this (0: only if absent); nil: unconditionally.
    public var ifVersion: UInt64?

    /// A put of `value` under `key` with this lifetime and condition.
    public init(key: [UInt8], value: ArraySlice<UInt8>, milliseconds: UInt64 = 0, owner: UInt64 = 0, ifVersion: UInt64? = nil) {
        self.key = key
        self.value = value
        self.milliseconds = milliseconds
        self.owner = owner
        self.ifVersion = ifVersion
    }

    /// A put of `value` under `key` with this lifetime and condition.
    public init(key: [UInt8], value: [UInt8], milliseconds: UInt64 = 0, owner: UInt64 = 0, ifVersion: UInt64? = nil) {
        self.init(key: key, value: value[...], milliseconds: milliseconds, owner: owner, ifVersion: ifVersion)
    }
}
