/// The sorted keys of one B+tree node, packed for memory and for fast search.

extension OrderedMap {
    /// A node's keys in ascending order, stored end to end in one byte array.
    ///
    /// Key `i` is `bytes[offsets[i]..<offsets[i+1]]`. All keys begin with the same
    /// `sharedLength` bytes, and `prefixes[i]` holds the eight bytes of key `i` that follow them
    /// as a big-endian number, zero-padded. Comparing two such numbers orders two keys whenever
    /// they differ there, so a binary search mostly reads this one small array and touches the
    /// key bytes only to confirm a match — also for keys like `user:000123` whose first eight
    /// bytes are all alike. A few allocations per node whatever its size, no object per key.
    struct PackedKeys: Sendable {
        /// The keys, end to end.
        private(set) var bytes: [UInt8]
        /// Where each key starts in `bytes`, then where the last one ends: `count + 1` items, first 0.
        private(set) var offsets: [UInt32]
        /// The eight bytes of each key after the shared ones, big-endian, zero-padded.
        private(set) var prefixes: [UInt64]
        /// The first eight (or fewer) shared bytes, big-endian, zero-padded: a search checks them
        /// without touching `bytes`.
        private(set) var sharedHead: UInt64
        /// How many leading bytes all keys share (those of key 0; not always the longest such run).
        var sharedLength: Int {
            get { Int(storedSharedLength) }
            set { storedSharedLength = UInt32(truncatingIfNeeded: newValue) }
        }
        /// `sharedLength`, stored small (a key is under 4 GiB) to keep nodes compact.
        private var storedSharedLength: UInt32

        /// No keys, with room for `keys` keys of `bytes` bytes in all.
        init(reservingKeys keys: Int = 0, bytes byteCount: Int = 0) {
            bytes = []
            bytes.reserveCapacity(byteCount)
            offsets = []
            offsets.reserveCapacity(keys + 1)
            offsets.append(0)
            prefixes = []
            prefixes.reserveCapacity(keys)
            storedSharedLength = 0
            sharedHead = 0
        }

        /// One key.
        init<Key: BorrowedBytes>(_ key: Key) {
            self.init(reservingKeys: 1, bytes: key.count)
            append(key)
        }

        /// Ascending keys already packed as `bytes` and `offsets` (see the type's description);
        /// computes the shared run and the prefixes, with room for `keys` keys.
        init(bytes: [UInt8], offsets: [UInt32], reservingKeys keys: Int = 0) {
            self.bytes = bytes
            self.offsets = offsets
            prefixes = []
            prefixes.reserveCapacity(Swift.max(keys, offsets.count - 1))
            prefixes.append(contentsOf: repeatElement(0, count: offsets.count - 1))
            storedSharedLength = 0
            sharedHead = 0
            reindex()
        }

        /// The number of keys.
        @inline(__always)
        var count: Int { prefixes.count }

        /// A copy of key `i`.
        subscript(i: Int) -> [UInt8] {
            let start = Int(offsets[i]), end = Int(offsets[i + 1])
            return Array(bytes[start..<end])
        }

        /// Calls `body` with the bytes of key `i`, without copying them.
        @inline(__always)
        func withKey<R>(at i: Int, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
            let start = Int(offsets[i]), end = Int(offsets[i + 1])
            return try bytes.withUnsafeBytes { all in try body(UnsafeRawBufferPointer(rebasing: all[start..<end])) }
        }

        /// The first eight bytes of `bytes`, big-endian, zero-padded.
        @inline(__always)
        static func prefix(of bytes: UnsafeRawBufferPointer) -> UInt64 {
            if bytes.count >= 8 { return bytes.loadUnaligned(as: UInt64.self).bigEndian }
            var value: UInt64 = 0
            var shift: UInt64 = 56
            for byte in bytes {
                value |= UInt64(byte) &<< shift
                shift &-= 8
            }
            return value
        }

        /// How many leading bytes `a` and `b` have in common.
        @inline(__always)
        static func commonLength(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Int {
            let n = Swift.min(a.count, b.count)
            var i = 0
            while i &+ 8 <= n {
                let x = a.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                let y = b.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if x != y { return i &+ ((x ^ y).littleEndian.trailingZeroBitCount &>> 3) }
                i &+= 8
            }
            while i < n && a[i] == b[i] { i &+= 1 }
            return i
        }

        // MARK: Search

        /// Binary search for `key`: the index of the first key `>= key`, and whether that key equals it.
        @inline(__always)
        func find<Key: BorrowedBytes>(_ key: Key) -> (index: Int, found: Bool) {
            key.withUnsafeBytes { target in
                prefixes.withUnsafeBufferPointer { prefixes in
                    offsets.withUnsafeBufferPointer { offsets in
                        bytes.withUnsafeBytes { bytes in
                            Self.search(target, prefixes: prefixes, offsets: offsets, bytes: bytes,
                                        shared: sharedLength, sharedHead: sharedHead)
                        }
                    }
                }
            }
        }

        /// The binary search of ``find(_:)``, on the raw arrays. Everything in here is visible to
        /// the optimizer (no opaque calls), which spares retaining the arrays around the loop.
        @inline(__always)
        private static func search(_ target: UnsafeRawBufferPointer, prefixes: UnsafeBufferPointer<UInt64>,
                                   offsets: UnsafeBufferPointer<UInt32>, bytes: UnsafeRawBufferPointer,
                                   shared: Int, sharedHead: UInt64) -> (index: Int, found: Bool) {
            guard !prefixes.isEmpty else { return (0, false) }
            if shared > 0 {
                // A key that does not start with the shared bytes sorts before or after them all.
                let headLength = Swift.min(shared, 8)
                let head = prefix(of: UnsafeRawBufferPointer(rebasing: target[0..<Swift.min(headLength, target.count)]))
                if head != sharedHead { return (head < sharedHead ? 0 : prefixes.count, false) }
                if target.count < shared {
                    // Equal as far as `target` goes (or zero padding hid a difference): compare for real.
                    let order = ByteComparison.compare(target, UnsafeRawBufferPointer(rebasing: bytes[0..<shared]))
                    return (order < 0 ? 0 : prefixes.count, false)
                }
                if shared > 8 {
                    let order = ByteComparison.compare(UnsafeRawBufferPointer(rebasing: target[8..<shared]),
                                                       UnsafeRawBufferPointer(rebasing: bytes[8..<shared]))
                    if order != 0 { return (order < 0 ? 0 : prefixes.count, false) }
                }
            }
            let rest = UnsafeRawBufferPointer(rebasing: target[shared...])
            let targetPrefix = prefix(of: rest)
            var low = 0
            var high = prefixes.count
            while low < high {
                let mid = Int(bitPattern: UInt(bitPattern: low &+ high) &>> 1)
                let prefix = prefixes[mid]
                // Zero padding keeps this exact: different prefixes order the keys.
                let order: Int
                if prefix != targetPrefix {
                    order = prefix < targetPrefix ? -1 : 1
                } else {
                    let start = Int(offsets[mid]) &+ shared, end = Int(offsets[mid &+ 1])
                    if end &- start <= 8 && rest.count <= 8 {
                        // Both rests lie wholly in their (equal, zero-padded) prefixes, so one is
                        // the other followed by zeros: the shorter sorts first, equal lengths are
                        // equal keys. Decided without reading `bytes` (a cache miss at scale).
                        order = end &- start < rest.count ? -1 : (end &- start > rest.count ? 1 : 0)
                    } else {
                        order = ByteComparison.compare(UnsafeRawBufferPointer(rebasing: bytes[start..<end]), rest)
                    }
                }
                if order < 0 {
                    low = mid &+ 1
                } else if order > 0 {
                    high = mid
                } else {
                    return (mid, true)
                }
            }
            return (low, false)
        }

        /// Whether key `i` starts with `prefix`.
        func hasPrefix(at i: Int, _ prefix: [UInt8]) -> Bool {
            withKey(at: i) { key in prefix.withUnsafeBytes { ByteComparison.hasPrefix(key, $0) } }
        }

        // MARK: Editing (the caller keeps the keys in ascending order)

        /// Inserts `key` so that it becomes key `i`.
        mutating func insert<Key: BorrowedBytes>(_ key: Key, at i: Int) {
            precondition(bytes.count + key.count <= Int(UInt32.max), "keys of one node exceed 4 GiB")
            let wasEmpty = prefixes.isEmpty
            let shared = wasEmpty ? key.count : key.withUnsafeBytes { key in
                bytes.withUnsafeBytes { Self.commonLength(key, UnsafeRawBufferPointer(rebasing: $0[0..<sharedLength])) }
            }
            let start = offsets[i]
            let length = UInt32(truncatingIfNeeded: key.count)
            ArrayEdit.insert(key, at: Int(start), into: &bytes)
            ArrayEdit.insert(start, at: i + 1, into: &offsets)
            offsets.withUnsafeMutableBufferPointer { offsets in
                for j in (i + 1)..<offsets.count { offsets[j] &+= length }
            }
            ArrayEdit.insert(0, at: i, into: &prefixes)
            if wasEmpty || shared != sharedLength {
                sharedLength = shared
                recomputeSharedHead()
                recomputePrefixes()
            } else {
                prefixes[i] = prefix(at: i)
            }
        }

        /// Makes room for one more key of `keyLength` bytes, growing full arrays to at most
        /// `fullCount` keys (and proportionally many bytes).
        mutating func reserveForInsert(keyLength: Int, fullCount: Int) {
            let n = count
            if prefixes.count == prefixes.capacity { prefixes.reserveCapacity(Node.grown(n, fullCount)) }
            if offsets.count == offsets.capacity { offsets.reserveCapacity(Node.grown(n, fullCount) + 1) }
            if bytes.count + keyLength > bytes.capacity {
                let average = (bytes.count + keyLength) / (n + 1)
                bytes.reserveCapacity(Swift.max(bytes.count + keyLength, average * Node.grown(n, fullCount)))
            }
        }

        /// Makes room for `keys` keys of `bytes` bytes in all.
        mutating func reserve(keys: Int, bytes byteCount: Int) {
            prefixes.reserveCapacity(keys)
            offsets.reserveCapacity(keys + 1)
            bytes.reserveCapacity(byteCount)
        }

        /// Removes key `i`.
        mutating func remove(at i: Int) {
            let start = Int(offsets[i]), end = Int(offsets[i + 1])
            let length = UInt32(truncatingIfNeeded: end - start)
            ArrayEdit.remove(start..<end, from: &bytes)
            _ = ArrayEdit.remove(at: i + 1, from: &offsets)
            offsets.withUnsafeMutableBufferPointer { offsets in
                for j in (i + 1)..<offsets.count { offsets[j] &-= length }
            }
            _ = ArrayEdit.remove(at: i, from: &prefixes)
            if prefixes.isEmpty {
                sharedLength = 0
                sharedHead = 0
            }
        }

        /// Replaces key `i` with `key`.
        mutating func replace(at i: Int, with key: [UInt8]) {
            remove(at: i)
            insert(key, at: i)
        }

        /// Appends `key` after the last key.
        mutating func append<Key: BorrowedBytes>(_ key: Key) {
            insert(key, at: count)
        }

        /// Appends all of `other` after the last key.
        mutating func append(contentsOf other: PackedKeys) {
            guard other.count > 0 else { return }
            precondition(bytes.count + other.bytes.count <= Int(UInt32.max), "keys of one node exceed 4 GiB")
            let base = UInt32(truncatingIfNeeded: bytes.count)
            bytes.append(contentsOf: other.bytes)
            offsets.reserveCapacity(offsets.count + other.count)
            for offset in other.offsets.dropFirst() { offsets.append(base &+ offset) }
            prefixes.append(contentsOf: other.prefixes)
            reindex()
        }

        /// A fresh copy of keys `range`, with room for `keys` keys and `bytes` bytes.
        func copy(_ range: Range<Int>, reservingKeys keys: Int, bytes byteCount: Int) -> PackedKeys {
            let start = offsets[range.lowerBound], end = offsets[range.upperBound]
            var newBytes: [UInt8] = []
            newBytes.reserveCapacity(Swift.max(byteCount, Int(end - start)))
            newBytes.append(contentsOf: bytes[Int(start)..<Int(end)])
            var newOffsets: [UInt32] = []
            newOffsets.reserveCapacity(Swift.max(keys, range.count) + 1)
            for j in range.lowerBound..<(range.upperBound + 1) { newOffsets.append(offsets[j] &- start) }
            return PackedKeys(bytes: newBytes, offsets: newOffsets, reservingKeys: keys)
        }

        // MARK: Prefixes

        /// The prefix of key `i` after the shared bytes.
        @inline(__always)
        private func prefix(at i: Int) -> UInt64 {
            let start = Int(offsets[i]) + sharedLength, end = Int(offsets[i + 1])
            return bytes.withUnsafeBytes { Self.prefix(of: UnsafeRawBufferPointer(rebasing: $0[start..<end])) }
        }

        /// Recomputes `sharedHead` for the current `sharedLength`.
        private mutating func recomputeSharedHead() {
            let length = Swift.min(sharedLength, 8)
            sharedHead = bytes.withUnsafeBytes { Self.prefix(of: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
        }

        /// Recomputes every prefix for the current `sharedLength`.
        private mutating func recomputePrefixes() {
            for i in 0..<count { prefixes[i] = prefix(at: i) }
        }

        /// Makes `sharedLength` the longest run all keys share — that of the first and the last,
        /// as they are sorted — and recomputes every prefix.
        private mutating func reindex() {
            sharedLength = count == 0 ? 0 : withKey(at: 0) { first in withKey(at: count - 1) { Self.commonLength(first, $0) } }
            recomputeSharedHead()
            recomputePrefixes()
        }

        /// Checks that offsets, shared run and prefixes describe the bytes; returns what is wrong, or nil.
        func inconsistency() -> String? {
            guard offsets.count == prefixes.count + 1 else { return "\(offsets.count) offsets for \(prefixes.count) keys" }
            guard offsets.first == 0, Int(offsets.last!) == bytes.count else { return "offsets do not span the key bytes" }
            guard count > 0 || sharedLength == 0 else { return "shared length \(sharedLength) without keys" }
            let head = bytes.withUnsafeBytes { Self.prefix(of: UnsafeRawBufferPointer(rebasing: $0[0..<Swift.min(sharedLength, 8)])) }
            guard sharedHead == head else { return "wrong shared head" }
            for i in 0..<count {
                guard offsets[i] <= offsets[i + 1] else { return "key offsets decrease at \(i)" }
                let shared = withKey(at: i) { key in withKey(at: 0) { Self.commonLength(key, $0) } }
                guard shared >= sharedLength else { return "key \(i) does not start with the \(sharedLength) shared bytes" }
                guard prefixes[i] == prefix(at: i) else { return "wrong prefix for key \(i)" }
            }
            return nil
        }
    }
}

/// Inserting into and removing from the middle of an array by moving its elements with one
/// memmove. `Array`'s own `insert(_:at:)` and `remove(at:)` go through its generic
/// `replaceSubrange`, several times slower for the few dozen elements of a node.
enum ArrayEdit {
    /// Inserts `element` at `index`.
    @inline(__always)
    static func insert<T>(_ element: T, at index: Int, into array: inout [T]) {
        array.append(element)
        array.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!, last = buffer.count - 1
            guard index < last else { return }
            let moved = (base + last).move()
            (base + index + 1).moveInitialize(from: base + index, count: last - index)
            (base + index).initialize(to: moved)
        }
    }

    /// Removes and returns the element at `index`.
    @inline(__always)
    static func remove<T>(at index: Int, from array: inout [T]) -> T {
        array.withUnsafeMutableBufferPointer { buffer in
            let base = buffer.baseAddress!, last = buffer.count - 1
            guard index < last else { return }
            let removed = (base + index).move()
            (base + index).moveInitialize(from: base + index + 1, count: last - index)
            (base + last).initialize(to: removed)
        }
        return array.removeLast()
    }

    /// Inserts `bytes` at `index`.
    @inline(__always)
    static func insert<Key: BorrowedBytes>(_ bytes: Key, at index: Int, into array: inout [UInt8]) {
        bytes.withUnsafeBytes { bytes in
            let tail = array.count - index
            array.append(contentsOf: bytes.assumingMemoryBound(to: UInt8.self))
            guard tail > 0, !bytes.isEmpty else { return }
            array.withUnsafeMutableBytes { buffer in
                let base = buffer.baseAddress!
                (base + index + bytes.count).copyMemory(from: base + index, byteCount: tail)
                (base + index).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            }
        }
    }

    /// `array`, copied to a buffer of its size if it has much more room than it uses.
    static func trimmed<T>(_ array: [T]) -> [T] {
        guard array.capacity > array.count + array.count / 8 + 4 else { return array }
        return Array(unsafeUninitializedCapacity: array.count) { buffer, initialized in
            initialized = buffer.initialize(fromContentsOf: array)
        }
    }

    /// Removes the bytes in `range`.
    @inline(__always)
    static func remove(_ range: Range<Int>, from array: inout [UInt8]) {
        let tail = array.count - range.upperBound
        if tail > 0 && !range.isEmpty {
            array.withUnsafeMutableBytes { buffer in
                let base = buffer.baseAddress!
                (base + range.lowerBound).copyMemory(from: base + range.upperBound, byteCount: tail)
            }
        }
        array.removeLast(range.count)
    }
}
