/// An estimate of the memory a namespace's data takes, in bytes: what Redis's `MEMORY USAGE`
/// of a hash answers here. Pure arithmetic over figures the namespace keeps anyway (its key
/// count, its keys' and values' bytes, how many keys have a lifetime), so asking costs O(1)
/// whatever the namespace holds.
///
/// The constants are measured, not derived: the resident set size a release server grows by
/// when loading 300,000 keys of 16-byte names and 3-, 100- and 1,000-byte values, with and
/// without deadlines, and by 1,000 namespaces of one key (Benchmarks/BENCHMARKS.md, "MEMORY
/// USAGE against the resident set"; `python3 Benchmarks/memusage.py BIN`).
public struct MemoryEstimate: Sendable, Equatable {
    /// The namespace's keys.
    public var keys: Int
    /// Its keys' and values' bytes.
    public var keyAndValueBytes: Int
    /// Its keys that have a deadline or an owner.
    public var keysWithLifetimes: Int

    /// What one key costs beyond its bytes: its share of the ordered map's nodes (the packed
    /// key array's slack, the value's reference and the version) and its value's own
    /// allocation (an array's header and the allocator's rounding).
    public static let bytesPerKey = 88
    /// What a key's lifetime adds: its entry in the lifetime tables (the deadline and owner,
    /// the hashed key) and those tables' slack.
    public static let bytesPerLifetime = 118
    /// What an open namespace costs with no key: its actor, its log's buffers and descriptors,
    /// its change feed.
    public static let namespaceBytes = 8_192

    /// The figures of a namespace holding `keys` keys of `keyAndValueBytes` bytes in all,
    /// `keysWithLifetimes` of them with a lifetime.
    public init(keys: Int, keyAndValueBytes: Int, keysWithLifetimes: Int) {
        self.keys = keys
        self.keyAndValueBytes = keyAndValueBytes
        self.keysWithLifetimes = keysWithLifetimes
    }

    /// The estimate, in bytes.
    public var bytes: Int {
        Self.namespaceBytes + keyAndValueBytes + keys * Self.bytesPerKey + keysWithLifetimes * Self.bytesPerLifetime
    }
}
