/// Key order for the storage engine: lexicographic by unsigned bytes, a proper prefix first.
/// Compares two byte strings in key order: lexicographically by unsigned byte value, and when one
/// is a proper prefix of the other, the shorter sorts first (memcmp, then length).
///
/// Returns a negative number when `a` sorts before `b`, zero when they are equal, and a positive
/// number when `a` sorts after `b` (always -1, 0 or 1).
public func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in ByteComparison.compare(pa, pb) } }
}

/// The raw-memory form of ``compareBytes(_:_:)``, shared by the ordered map's node searches.
enum ByteComparison {
    /// Compares `a` and `b` in key order; -1, 0 or 1.
    ///
    /// Eight bytes at a time as big-endian words, in Swift rather than through `memcmp`: keys
    /// are short, and a call the optimizer can see into lets node searches skip retaining the
    /// node's arrays.
    @inline(__always)
    static func compare(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
        let n = Swift.min(a.count, b.count)
        var i = 0
        while i &+ 8 <= n {
            let x = a.loadUnaligned(fromByteOffset: i, as: UInt64.self).bigEndian
            let y = b.loadUnaligned(fromByteOffset: i, as: UInt64.self).bigEndian
            if x != y { return x < y ? -1 : 1 }
            i &+= 8
        }
        while i < n {
            let x = a[i], y = b[i]
            if x != y { return x < y ? -1 : 1 }
            i &+= 1
        }
        return a.count < b.count ? -1 : (a.count == b.count ? 0 : 1)
    }

    /// Whether the bytes of `key` begin with the bytes of `prefix`.
    @inline(__always)
    static func hasPrefix(_ key: UnsafeRawBufferPointer, _ prefix: UnsafeRawBufferPointer) -> Bool {
        key.count >= prefix.count && compare(UnsafeRawBufferPointer(rebasing: key[0..<prefix.count]), prefix) == 0
    }
}
