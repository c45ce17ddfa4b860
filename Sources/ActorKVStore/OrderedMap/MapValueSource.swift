/// What ``OrderedMap`` stores a value from: an array it keeps as it is, or bytes it copies.
///
/// Copying is what a server's `PUT` wants: its value sits in the decoded request, and when the
/// key already holds a value of about the same size whose storage nothing else shares, the new
/// bytes go into that storage: no allocation, and no free of the old value. (Allocating cost a
/// cache miss each in glibc's `malloc_usable_size`, which Swift calls for every new array: 8% of
/// a pipelined `PUT`'s CPU in a profile; `Benchmarks/HOTPATHS.md`, round 16.)
protocol MapValueSource {
    /// What replacing an existing value reports: the old value, or only its length.
    associatedtype Replaced
    /// The array a new entry keeps.
    func newValue() -> [UInt8]
    /// Puts these bytes in place of the value in `slot`; returns what was replaced.
    func replace(_ slot: inout [UInt8]) -> Replaced
    /// Puts these bytes and `version` in place of `entry`'s (one access to the leaf's entry
    /// array, not one per field), unmarked; returns what was replaced.
    func replace(_ entry: inout OrderedMap.Entry, version: UInt64) -> Replaced
}

extension MapValueSource {
    /// Replaces the value and the version word (so the mark is cleared); reports the value's.
    @inline(__always)
    func replace(_ entry: inout OrderedMap.Entry, version: UInt64) -> Replaced {
        entry.stamp = version
        return replace(&entry.value)
    }
}

/// Bytes copied as an `ArraySlice` copies them, whose replacement also reports whether the
/// replaced entry was marked (`OrderedMap.replace(copying:forKey:version:)`): the put of a key
/// that may have a lifetime. Plain puts go without it, their path as it was before marks.
struct MarkReportingBytes: MapValueSource {
    let bytes: ArraySlice<UInt8>

    func newValue() -> [UInt8] { bytes.newValue() }

    func replace(_ slot: inout [UInt8]) -> OrderedMap.Replaced<Int> {
        OrderedMap.Replaced(old: bytes.replace(&slot), wasMarked: false)
    }

    @inline(__always)
    func replace(_ entry: inout OrderedMap.Entry, version: UInt64) -> OrderedMap.Replaced<Int> {
        let wasMarked = entry.isMarked
        entry.stamp = version
        return OrderedMap.Replaced(old: bytes.replace(&entry.value), wasMarked: wasMarked)
    }
}

extension Array: MapValueSource where Element == UInt8 {
    /// The array itself.
    func newValue() -> [UInt8] { self }

    /// Stores the array itself; returns the old value.
    func replace(_ slot: inout [UInt8]) -> [UInt8] {
        let old = slot
        slot = self
        return old
    }
}

extension ArraySlice: MapValueSource where Element == UInt8 {
    /// A copy (or the whole array the slice spans, shared: `Array(_:)` does not copy that).
    func newValue() -> [UInt8] { Array(self) }

    /// Stores a slice that starts its array as that array, shared: in practice a whole array —
    /// a value the embedded API or a log record passed, or a large payload received in place —
    /// kept without a copy whatever its size, as ``Array``'s `replace` does. A slice inside a
    /// larger buffer (a decoded request's) is copied: over the old value when it has the same
    /// length, or into its storage when that has room and not much more (see
    /// ``reuses(capacity:for:)``) — in place if nothing else holds that storage, else into a
    /// copy of it, as any write to a shared array — and otherwise into a new array. Returns
    /// the old length.
    func replace(_ slot: inout [UInt8]) -> Int {
        let old = slot.count
        if startIndex == 0 {
            slot = Array(self)
        } else if old == count {
            // The common overwrite: same length, so only the bytes change.
            slot.withUnsafeMutableBytes { target in
                withUnsafeBytes { target.copyMemory(from: $0) }
            }
        } else if Self.reuses(capacity: slot.capacity, for: count) {
            slot.removeAll(keepingCapacity: true)
            slot.append(contentsOf: self)
        } else {
            slot = Array(self)
        }
        return old
    }

    /// Whether storage of `capacity` bytes is kept for a value of `count` bytes: it must fit,
    /// with at most a quarter and 64 bytes to spare, so that a value that shrinks a lot (or
    /// a huge one replaced by a small one) does not keep its old size in memory.
    static func reuses(capacity: Int, for count: Int) -> Bool {
        capacity >= count && capacity <= count + count / 4 + 64
    }
}
