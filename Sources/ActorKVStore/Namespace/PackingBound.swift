/// When keys and values are packed into one buffer (``Operation/packedEntries(_:within:)``, a
/// server's replies): at most ``totalBytes`` in all, and at most ``bytesPerKey`` per key on
/// average. A packed reply is a copy, where an array of values shares them with the map, so the
/// bound keeps what replies in flight hold about proportional to the keys they carry, which a
/// server bounds per connection: four values of 60 KB are sent unpacked.
public struct PackingBound: Sendable, Equatable {
    /// The most bytes of keys and values packed into one buffer.
    public var totalBytes: Int
    /// The most bytes per key, on average.
    public var bytesPerKey: Int

    /// A bound of `totalBytes` in all and `bytesPerKey` per key.
    public init(totalBytes: Int, bytesPerKey: Int) {
        self.totalBytes = totalBytes
        self.bytesPerKey = bytesPerKey
    }

    /// No bound: everything is packed.
    public static let none = PackingBound(totalBytes: .max, bytesPerKey: .max)

    /// Whether `bytes` of keys and values of `keys` keys are packed.
    public func allows(bytes: Int, keys: Int) -> Bool {
        let (perKey, overflow) = keys.multipliedReportingOverflow(by: bytesPerKey)
        return bytes <= totalBytes && (overflow || bytes <= perKey)
    }
}
