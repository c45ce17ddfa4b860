/// A key used in a hash table, hashed as one run of bytes: `[UInt8]`'s own hashing feeds the
/// hasher one byte at a time, several times slower for keys of a few dozen bytes.
struct HashedKey: Hashable, Sendable {
    /// The key's bytes.
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }
}
