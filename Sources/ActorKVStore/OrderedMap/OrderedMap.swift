/// A sorted map from byte-string keys to byte-string values: the live data of one namespace.
///
/// A B+tree whose nodes are shared copy-on-write. Copying a map is O(1); the first write to
/// either copy copies only the O(log n) nodes on the path it changes, so the other copy keeps
/// its contents. That is how the engine takes a snapshot of millions of keys inside an actor in
/// constant time and encodes it on another thread while writes go on.
///
/// Keys are ordered by ``compareBytes(_:_:)``: lexicographically by unsigned byte, a proper
/// prefix first. Leaves hold up to 64 entries, branches up to 64 children; reads and writes
/// are O(log n), and no node other than the root is ever less than half full. A leaf packs its
/// keys into one byte array and keeps the value arrays it was given, so an entry costs its key
/// bytes, its value array and about 30 bytes of tree (1M entries of 16-byte keys and 100-byte
/// values: about 200 MB resident).
///
/// A map is a value: mutating methods need exclusive access (an actor's state, a `var`), and a
/// copy can be read from any thread while the original is written.
public struct OrderedMap: Sendable {
    /// The root node; nil when the map is empty (a non-empty map never has an empty node).
    var root: Node?
    /// The number of entries.
    var entryCount: Int
    /// The fan-out this map's nodes follow.
    let layout: Layout

    /// Creates an empty map.
    public init() {
        self.init(layout: .standard)
    }

    /// Creates an empty map whose nodes follow `layout` (tests use small fan-outs).
    init(layout: Layout) {
        self.root = nil
        self.entryCount = 0
        self.layout = layout
    }

    /// Creates an empty map with the given fan-out (tests use small fan-outs).
    init(leafCapacity: Int, branchCapacity: Int) {
        self.init(layout: Layout(leafCapacity: leafCapacity, branchCapacity: branchCapacity))
    }

    /// The number of entries. O(1).
    public var count: Int { entryCount }

    /// Whether the map has no entries. O(1).
    public var isEmpty: Bool { entryCount == 0 }

    /// The value stored for `key`, or nil if there is none. O(log n).
    public subscript(key: [UInt8]) -> [UInt8]? { value(forKey: key) }

    /// The value stored for `key`, a slice of a larger buffer (a request's), or nil. O(log n).
    public subscript(key: ArraySlice<UInt8>) -> [UInt8]? { value(forKey: key) }

    private func value<Key: BorrowedBytes>(forKey key: Key) -> [UInt8]? {
        withLeaf(for: key) { leaf in
            let (index, found) = leaf.keys.find(key)
            return found ? leaf.entries[index].value : nil
        } ?? nil
    }

    /// The value stored for `key` and its version, or nil if there is none. O(log n).
    public func versioned(_ key: [UInt8]) -> (value: [UInt8], version: UInt64)? { versioned(key[...]) }

    /// ``versioned(_:)-(Array)`` for a key that is a slice of a larger buffer.
    func versioned<Key: BorrowedBytes>(_ key: Key) -> (value: [UInt8], version: UInt64)? {
        entry(key).map { ($0.value, $0.version) }
    }

    /// The entry of `key` (its value, version and mark), or nil if there is none. O(log n).
    func entry<Key: BorrowedBytes>(_ key: Key) -> Entry? {
        withLeaf(for: key) { leaf in
            let (index, found) = leaf.keys.find(key)
            return found ? leaf.entries[index] : nil
        } ?? nil
    }

    /// Whether the map holds `key`. O(log n).
    func contains<Key: BorrowedBytes>(_ key: Key) -> Bool {
        withLeaf(for: key) { $0.keys.find(key).found } ?? false
    }

    /// Calls `body` with the leaf whose key range holds `key` (nil when the map is empty).
    ///
    /// A read-only walk that neither retains nor releases the nodes it passes: the root, held
    /// for the whole walk, keeps every node under it alive, and the map cannot change during a
    /// non-mutating call. (Retaining each node was a tenth of a `GET`'s CPU in profiles: an
    /// atomic write to every node header on the way.)
    @inline(__always)
    private func withLeaf<Key: BorrowedBytes, R>(for key: Key, _ body: (Node) -> R) -> R? {
        guard let root else { return nil }
        return withExtendedLifetime(root) {
            var node = Unmanaged.passUnretained(root)
            while let child = node._withUnsafeGuaranteedRef({ Self.child(of: $0, toward: key) }) {
                node = child
            }
            return node._withUnsafeGuaranteedRef(body)
        }
    }

    /// Hints `node`'s arrays into the cache; returns, unretained, its child whose range holds
    /// `key`, or nil for a leaf.
    @inline(__always)
    private static func child<Key: BorrowedBytes>(of node: Node, toward key: Key) -> Unmanaged<Node>? {
        node.prefetch()
        guard !node.isLeaf else { return nil }
        let index = node.childIndex(for: key)
        return node.children.withUnsafeBufferPointer { Unmanaged.passUnretained($0[index]) }
    }

    // MARK: Writing

    /// The bit of an entry's version word that holds its mark. Versions stay below it: they are
    /// log sequence numbers, counted from 1 one record at a time, and a snapshot whose last
    /// sequence is 2^62 or more is refused as impossible (`SnapshotCodec`).
    static let markBit: UInt64 = 1 << 63

    /// What a write replaced: the old value (or its length) and whether its entry was marked.
    struct Replaced<Old> {
        var old: Old
        var wasMarked: Bool
    }

    /// Stores `value` with `version` for `key`, replacing any value it had (and its mark). O(log n).
    ///
    /// Returns the value replaced, or nil if `key` was new.
    @discardableResult
    public mutating func updateValue(_ value: [UInt8], forKey key: [UInt8], version: UInt64 = 0) -> [UInt8]? {
        update(key, from: value, version: version)
    }

    /// Stores a copy of `value` with `version` for `key`, replacing any value it had. O(log n).
    /// Where the old value's storage fits and nothing else holds it, the bytes are copied into
    /// it and nothing is allocated (see ``MapValueSource``).
    ///
    /// Returns the length of the value replaced, or nil if `key` was new.
    @discardableResult
    public mutating func updateValue(copying value: ArraySlice<UInt8>, forKey key: ArraySlice<UInt8>, version: UInt64 = 0) -> Int? {
        update(key, from: value, version: version)
    }

    /// ``updateValue(copying:forKey:version:)``, also saying whether the replaced entry was
    /// marked (the new one is not).
    mutating func replace(copying value: ArraySlice<UInt8>, forKey key: ArraySlice<UInt8>, version: UInt64) -> Replaced<Int>? {
        update(key, from: MarkReportingBytes(bytes: value), version: version)
    }

    /// Marks or unmarks the entry of `key`; returns false, touching nothing, when there is none.
    /// A write of a new value (``updateValue(_:forKey:version:)``) unmarks it again. O(log n).
    @discardableResult
    mutating func setMarked(_ marked: Bool, forKey key: [UInt8]) -> Bool {
        guard contains(key) else { return false }
        if !isKnownUniquelyReferenced(&root) { root = root!.clone() }
        var node = root!
        while !node.isLeaf { node = node.uniqueChild(node.childIndex(for: key)) }
        let index = node.keys.find(key).index
        if marked { node.entries[index].stamp |= Self.markBit } else { node.entries[index].stamp &= ~Self.markBit }
        return true
    }

    /// Whether `key`'s entry is marked (false when there is none). O(log n).
    func isMarked<Key: BorrowedBytes>(_ key: Key) -> Bool {
        entry(key)?.isMarked ?? false
    }

    private mutating func update<Key: BorrowedBytes, Value: MapValueSource>(_ key: Key, from value: Value, version: UInt64) -> Value.Replaced? {
        guard root != nil else {
            root = Node(keys: PackedKeys(key), entries: [Entry(value: value.newValue(), version: version)])
            entryCount = 1
            return nil
        }
        if !isKnownUniquelyReferenced(&root) { root = root!.clone() }
        let top = root!
        let (old, split) = Self.insert(key, value, version, into: top, layout)
        if let split {
            var children: [Node] = []
            children.reserveCapacity(layout.branchCapacity + 1)
            children.append(top)
            children.append(split.right)
            root = Node(separators: PackedKeys(split.separator), children: children)
        }
        if old == nil { entryCount += 1 }
        return old
    }

    /// Inserts or replaces under `node`, which must be uniquely owned. Returns the replaced
    /// value and, when `node` overfilled and split, the separator and the new right sibling.
    private static func insert<Key: BorrowedBytes, Value: MapValueSource>(_ key: Key, _ value: Value, _ version: UInt64, into node: Node, _ layout: Layout)
        -> (old: Value.Replaced?, split: (separator: [UInt8], right: Node)?) {
        node.prefetch()
        if node.isLeaf {
            let (index, found) = node.keys.find(key)
            if found { return (value.replace(&node.entries[index], version: version), nil) }
            let appending = index == node.keys.count
            node.reserveForInsert(keyLength: key.count, fullCount: layout.leafCapacity + 1)
            node.insertEntry(key: key, Entry(value: value.newValue(), version: version), at: index)
            guard node.keys.count > layout.leafCapacity else { return (nil, nil) }
            return (nil, node.split(headroom: layout.leafCapacity / 4, fullCount: layout.leafCapacity + 1, appending: appending))
        }
        let index = node.childIndex(for: key)
        let (old, childSplit) = insert(key, value, version, into: node.uniqueChild(index), layout)
        guard let childSplit else { return (old, nil) }
        let appending = index == node.children.count - 1
        node.reserveForInsert(keyLength: childSplit.separator.count, fullCount: layout.branchCapacity + 1)
        node.keys.insert(childSplit.separator, at: index)
        ArrayEdit.insert(childSplit.right, at: index + 1, into: &node.children)
        guard node.children.count > layout.branchCapacity else { return (old, nil) }
        return (old, node.split(headroom: layout.branchCapacity / 4, fullCount: layout.branchCapacity + 1, appending: appending))
    }

    /// Removes `key` and its value. O(log n).
    ///
    /// Returns the value removed, or nil if `key` was not in the map (which then is not touched:
    /// no node is copied for a key that is absent).
    @discardableResult
    public mutating func removeValue(forKey key: [UInt8]) -> [UInt8]? {
        removeEntry(forKey: key)?.old
    }

    /// ``removeValue(forKey:)``, also saying whether the removed entry was marked.
    mutating func removeEntry(forKey key: [UInt8]) -> Replaced<[UInt8]>? {
        guard contains(key) else { return nil }
        if !isKnownUniquelyReferenced(&root) { root = root!.clone() }
        let top = root!
        let old = Self.remove(key, from: top, layout)
        entryCount -= 1
        if top.isLeaf {
            if top.keys.count == 0 { root = nil }
        } else if top.children.count == 1 {
            root = top.children[0]
        }
        return Replaced(old: old.value, wasMarked: old.isMarked)
    }

    /// Removes `key`, which is present, from under `node`, which must be uniquely owned, and
    /// refills any child left less than half full.
    private static func remove(_ key: [UInt8], from node: Node, _ layout: Layout) -> Entry {
        if node.isLeaf {
            let (index, found) = node.keys.find(key)
            precondition(found, "OrderedMap: key vanished during removal")
            return node.removeEntry(at: index)
        }
        let index = node.childIndex(for: key)
        let child = node.uniqueChild(index)
        let old = remove(key, from: child, layout)
        if child.occupancy < layout.minimum(of: child) { rebalance(childAt: index, of: node, layout) }
        return old
    }

    /// Refills the underfull child `index` of `parent` (both uniquely owned) from a sibling:
    /// borrows one entry or child when a sibling has more than the minimum, otherwise merges
    /// with a sibling. Separators in `parent` are updated to match.
    private static func rebalance(childAt index: Int, of parent: Node, _ layout: Layout) {
        let child = parent.children[index]
        let minimum = layout.minimum(of: child)
        if index > 0 && parent.children[index - 1].occupancy > minimum {
            borrowFromLeft(into: child, at: index, of: parent)
        } else if index + 1 < parent.children.count && parent.children[index + 1].occupancy > minimum {
            borrowFromRight(into: child, at: index, of: parent)
        } else if index > 0 {
            merge(into: parent.uniqueChild(index - 1), right: child, at: index - 1, of: parent)
        } else {
            merge(into: child, right: parent.children[index + 1], at: index, of: parent)
        }
    }

    /// Moves the last entry or child of the left sibling to the front of `child`.
    private static func borrowFromLeft(into child: Node, at index: Int, of parent: Node) {
        let left = parent.uniqueChild(index - 1)
        let last = left.keys.count - 1
        if child.isLeaf {
            let key = left.keys[last]
            let entry = left.removeEntry(at: last)
            child.insertEntry(key: key, entry, at: 0)
            parent.keys.replace(at: index - 1, with: Node.separator(between: left, last - 1, and: child, 0))
        } else {
            let up = left.keys[last]
            left.keys.remove(at: last)
            let moved = left.children.removeLast()
            child.keys.insert(parent.keys[index - 1], at: 0)
            child.children.insert(moved, at: 0)
            parent.keys.replace(at: index - 1, with: up)
        }
    }

    /// Moves the first entry or child of the right sibling to the end of `child`.
    private static func borrowFromRight(into child: Node, at index: Int, of parent: Node) {
        let right = parent.uniqueChild(index + 1)
        if child.isLeaf {
            let key = right.keys[0]
            let entry = right.removeEntry(at: 0)
            child.insertEntry(key: key, entry, at: child.keys.count)
            parent.keys.replace(at: index, with: Node.separator(between: child, child.keys.count - 1, and: right, 0))
        } else {
            let up = right.keys[0]
            right.keys.remove(at: 0)
            let moved = right.children.removeFirst()
            child.keys.append(parent.keys[index])
            child.children.append(moved)
            parent.keys.replace(at: index, with: up)
        }
    }

    /// Moves everything of `right` (child `index + 1`) into `left` (child `index`, uniquely
    /// owned) and drops `right` and the separator between them from `parent`.
    private static func merge(into left: Node, right: Node, at index: Int, of parent: Node) {
        // Exactly the room needed (Array would double): a merged node may not grow again soon.
        if left.isLeaf {
            left.keys.reserve(keys: left.keys.count + right.keys.count, bytes: left.keys.bytes.count + right.keys.bytes.count)
            left.entries.reserveCapacity(left.entries.count + right.entries.count)
            left.keys.append(contentsOf: right.keys)
            left.entries.append(contentsOf: right.entries)
        } else {
            let separator = parent.keys[index]
            left.keys.reserve(keys: left.keys.count + 1 + right.keys.count,
                              bytes: left.keys.bytes.count + separator.count + right.keys.bytes.count)
            left.children.reserveCapacity(left.children.count + right.children.count)
            left.keys.append(separator)
            left.keys.append(contentsOf: right.keys)
            left.children.append(contentsOf: right.children)
        }
        parent.keys.remove(at: index)
        _ = ArrayEdit.remove(at: index + 1, from: &parent.children)
    }

    // MARK: Reading in order

    /// Up to `limit` entries in ascending key order whose key starts with `prefix` and is
    /// strictly greater than `after` (all such keys when `after` is nil).
    ///
    /// O(log n + limit): seeks to the first candidate, then walks leaves in order and stops at
    /// the first key past the prefix. Pass the last key of one page as `after` of the next: a key
    /// present for the whole walk appears exactly once, whatever is written between pages.
    public func entries(after: [UInt8]?, prefix: [UInt8], limit: Int) -> [KeyValue] {
        guard limit > 0, var node = root else { return [] }
        // Keys with `prefix` are the contiguous range starting at `prefix`; all of them are
        // greater than an `after` that sorts before `prefix`.
        let start: [UInt8], strict: Bool
        if let after, compareBytes(after, prefix) >= 0 {
            (start, strict) = (after, true)
        } else {
            (start, strict) = (prefix, false)
        }
        var path: [(node: Node, child: Int)] = []
        while !node.isLeaf {
            let index = node.childIndex(for: start)
            path.append((node, index))
            node = node.children[index]
        }
        var (index, found) = node.keys.find(start)
        if found && strict { index += 1 }

        var result: [KeyValue] = []
        result.reserveCapacity(Swift.min(limit, entryCount, 1024))
        while true {
            // The leaf's arrays read once, not once per entry.
            let (keys, entries) = (node.keys, node.entries)
            while index < keys.count {
                guard keys.hasPrefix(at: index, prefix) else { return result }
                result.append(KeyValue(key: keys[index], value: entries[index].value))
                if result.count == limit { return result }
                index += 1
            }
            guard let next = Self.nextLeaf(&path) else { return result }
            node = next
            index = 0
        }
    }

    /// Moves `path` (the branches above a leaf and the child taken in each) to the next leaf
    /// in key order and returns it; nil after the last leaf.
    private static func nextLeaf(_ path: inout [(node: Node, child: Int)]) -> Node? {
        while let (branch, child) = path.popLast() {
            guard child + 1 < branch.children.count else { continue }
            path.append((branch, child + 1))
            var node = branch.children[child + 1]
            while !node.isLeaf {
                path.append((node, 0))
                node = node.children[0]
            }
            return node
        }
        return nil
    }

    /// Calls `body` with every key, value and version in ascending key order; stops early when
    /// `body` returns false. Iterate a copy, and writes to the original go on.
    ///
    /// Rethrows whatever `body` throws, which also ends the walk.
    public func forEach(_ body: (_ key: [UInt8], _ value: [UInt8], _ version: UInt64) throws -> Bool) rethrows {
        try forEachEntry { key, value, version, _ in try body(Array(key), value, version) }
    }

    /// Calls `body` with each entry in ascending key order until it returns false, as
    /// ``forEach(_:)`` does, but with the key's bytes borrowed (valid only during the call: no
    /// array is made per key) and whether the entry is marked. For walks over every key, such
    /// as writing a snapshot.
    func forEachEntry(_ body: (_ key: UnsafeRawBufferPointer, _ value: [UInt8], _ version: UInt64, _ marked: Bool) throws -> Bool) rethrows {
        guard let root else { return }
        _ = try Self.visitEntries(root, body)
    }

    /// Walks the subtree of `node` in order for ``forEachEntry(_:)``; false when `body` asked to stop.
    private static func visitEntries(_ node: Node, _ body: (UnsafeRawBufferPointer, [UInt8], UInt64, Bool) throws -> Bool) rethrows -> Bool {
        if node.isLeaf {
            for index in 0..<node.keys.count {
                let entry = node.entries[index]
                guard try node.keys.withKey(at: index, { try body($0, entry.value, entry.version, entry.isMarked) }) else { return false }
            }
            return true
        }
        for child in node.children {
            guard try visitEntries(child, body) else { return false }
        }
        return true
    }
}
