import CActorKVPrefetch

/// Cache prefetch hints for the B+tree walk: start loading memory that a search will read soon,
/// so that independent cache misses overlap instead of following one another.
enum Prefetch {
    /// Hints the first `elements` elements of `array` (each `stride` bytes) and its header,
    /// whatever its actual count: the array's storage object is found from the reference the
    /// array value holds, without loading its header, so the hint never waits for a miss.
    ///
    /// An `Array` is a single reference to a storage object whose elements start after a 32-byte
    /// header (64-bit platforms). Only the address is used, never dereferenced from Swift; a
    /// prefetch cannot fault, so a range past the allocation (or the shared empty-array storage)
    /// is harmless.
    @inline(__always)
    static func arrayStorage<T>(_ array: borrowing [T], elements: Int, stride: Int) {
        let storage = unsafeBitCast(copy array, to: UnsafeRawPointer.self)
        actorkv_prefetch(storage, 32 + elements * stride)
    }

    /// Hints the `count` bytes at `start`.
    @inline(__always)
    static func bytes(at start: UnsafeRawPointer, count: Int) {
        actorkv_prefetch(start, count)
    }

    /// Hints the storage of the value of entry `index` in `entries` (its header and first
    /// `bytes` bytes), reading only the reference stored in the entry: the value array is
    /// neither retained nor touched.
    @inline(__always)
    static func valueStorage(of entries: UnsafeBufferPointer<OrderedMap.Entry>, at index: Int, bytes: Int) {
        let offset = MemoryLayout<OrderedMap.Entry>.offset(of: \.value)!
        let storage = (UnsafeRawPointer(entries.baseAddress! + index) + offset).load(as: UnsafeRawPointer.self)
        actorkv_prefetch(storage, 32 + bytes)
    }
}
