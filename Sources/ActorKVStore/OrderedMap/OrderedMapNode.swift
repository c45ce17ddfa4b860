/// The nodes of ``OrderedMap``'s B+tree and the node-local operations on them.

extension OrderedMap {
    /// The fan-out of a tree: how many entries a leaf and how many children a branch may hold.
    ///
    /// A node other than the root never holds fewer than half of its maximum (rounded down).
    /// Tests use tiny capacities to get deep trees from few keys.
    struct Layout: Sendable, Equatable {
        /// Most entries in a leaf.
        let leafCapacity: Int
        /// Most children of a branch.
        let branchCapacity: Int

        init(leafCapacity: Int, branchCapacity: Int) {
            precondition(leafCapacity >= 3, "a leaf must be able to hold at least 3 entries")
            precondition(branchCapacity >= 4, "a branch must be able to hold at least 4 children")
            precondition(leafCapacity <= 1 << 16 && branchCapacity <= 1 << 16, "fan-out too large")
            self.leafCapacity = leafCapacity
            self.branchCapacity = branchCapacity
        }

        /// Fewest entries in a leaf other than the root.
        var minLeaf: Int { leafCapacity / 2 }
        /// Fewest children of a branch other than the root.
        var minBranch: Int { branchCapacity / 2 }

        /// The production fan-out.
        static let standard = Layout(leafCapacity: 64, branchCapacity: 64)

        /// Fewest entries (leaf) or children (branch) of `node` when it is not the root.
        func minimum(of node: Node) -> Int { node.isLeaf ? minLeaf : minBranch }
    }

    /// A leaf's entry: a value and its version, side by side so that a write touches one cache
    /// line for both, and the entry's mark in the version's top bit (``OrderedMap/markBit``).
    struct Entry: Sendable {
        /// The value.
        var value: [UInt8]
        /// The version, with ``OrderedMap/markBit`` set when the entry is marked.
        var stamp: UInt64

        /// An unmarked entry.
        init(value: [UInt8], version: UInt64) {
            self.value = value
            self.stamp = version
        }

        /// The version the owner gave it (the namespace: the sequence number of the log record
        /// that wrote it).
        var version: UInt64 { stamp & ~OrderedMap.markBit }

        /// Whether the owner marked the entry (the namespace: the key has a lifetime).
        var isMarked: Bool { stamp & OrderedMap.markBit != 0 }
    }

    /// One node of the B+tree: a leaf holding entries, or a branch holding children and the
    /// separator keys between them.
    ///
    /// In a leaf, `entries[i]` (a value and its version) belongs to key `i`. In a branch with
    /// `k` separator keys there are `k + 1` children, and every key under `children[i]` is `>=`
    /// separator `i - 1` and `<` separator `i`. Keys are packed (see ``PackedKeys``), so a node costs a handful of
    /// allocations however many keys it holds; a leaf's values are the caller's arrays, kept as is.
    ///
    /// Sendability: `@unchecked Sendable` is sound because a node is only ever mutated by the one
    /// `OrderedMap` value that owns it exclusively. Every mutation goes through a `mutating`
    /// method of `OrderedMap` (exclusive access to that value) and, before touching a node,
    /// proves with `isKnownUniquelyReferenced` that no other map, snapshot or reader holds it —
    /// along the whole path from the root, since a node reachable from a shared node has a
    /// second reference through that node's (copy-on-write) child array. A node that is shared
    /// is never written again: the writer replaces it with a copy (path copying). So a node that
    /// has crossed to another thread is only read there, and reads of immutable memory do not
    /// race. `Builder` writes only arrays it owns as values; its nodes are never written.
    ///
    /// The mutable properties opt out of dynamic exclusivity checking with
    /// `@exclusivity(unchecked)`: the tree code never begins a write to a node's property while
    /// another access to the same property is open (it works on local references and finishes
    /// each access before the next), and the runtime checks, a call per property access, were a
    /// large share of a lookup in profiles.
    final class Node: @unchecked Sendable {
        /// The keys (leaf) or separators (branch). First, with `isLeaf`, so that a search
        /// reads one cache line of the node.
        @exclusivity(unchecked) var keys: PackedKeys
        /// Whether this is a leaf (entries) rather than a branch (children).
        let isLeaf: Bool
        /// The value and version of each key (leaf only; empty in a branch).
        @exclusivity(unchecked) var entries: [Entry]
        /// The subtrees (branch only; empty in a leaf).
        @exclusivity(unchecked) var children: [Node]

        /// A leaf.
        init(keys: PackedKeys, entries: [Entry]) {
            self.isLeaf = true
            self.keys = keys
            self.entries = entries
            self.children = []
        }

        /// A branch.
        init(separators: PackedKeys, children: [Node]) {
            self.isLeaf = false
            self.keys = separators
            self.entries = []
            self.children = children
        }

        /// A copy of `other`.
        private init(copying other: Node) {
            self.isLeaf = other.isLeaf
            self.keys = other.keys
            self.entries = other.entries
            self.children = other.children
        }

        /// A copy of this node for a writer that found it shared. O(1): the copy shares the
        /// element buffers, which copy themselves on their first write (copying the child
        /// references, which is what makes the children shared in turn).
        func clone() -> Node { Node(copying: self) }

        /// Starts loading the arrays a search of this node reads — the key prefixes, the offsets,
        /// the first key bytes (the shared-prefix check), the values or children — into the cache
        /// all at once. At millions of keys each of
        /// them is a cache miss; without the hint the walk waits for them one after another.
        ///
        /// Reads nothing but this node: the ranges are the most a full node's arrays can span
        /// (a prefetch past an allocation's end is harmless), so no array header has to arrive
        /// first.
        @inline(__always)
        func prefetch() {
            Prefetch.arrayStorage(keys.prefixes, elements: Self.maximumFanOut, stride: 8)
            Prefetch.arrayStorage(keys.offsets, elements: Self.maximumFanOut + 1, stride: 4)
            Prefetch.arrayStorage(keys.bytes, elements: 64, stride: 1)
            if isLeaf {
                Prefetch.arrayStorage(entries, elements: Self.maximumFanOut, stride: MemoryLayout<Entry>.stride)
            } else {
                Prefetch.arrayStorage(children, elements: Self.maximumFanOut, stride: MemoryLayout<Node>.stride)
            }
        }

        /// The most entries or children a production node holds (``Layout/standard``, plus the
        /// one an insert adds just before a split): the span ``prefetch()`` covers.
        static let maximumFanOut = Swift.max(Layout.standard.leafCapacity, Layout.standard.branchCapacity) + 1

        /// Entries of a leaf, children of a branch: what the fan-out bounds.
        var occupancy: Int { isLeaf ? keys.count : children.count }

        /// In a branch, the index of the child whose key range holds `key`.
        @inline(__always)
        func childIndex<Key: BorrowedBytes>(for key: Key) -> Int {
            let (index, found) = keys.find(key)
            return found ? index &+ 1 : index
        }

        // MARK: Editing (the node must be uniquely owned)

        /// Inserts an entry into a leaf so that it becomes entry `i`.
        func insertEntry<Key: BorrowedBytes>(key: Key, _ entry: Entry, at i: Int) {
            keys.insert(key, at: i)
            ArrayEdit.insert(entry, at: i, into: &entries)
        }

        /// Removes entry `i` of a leaf and returns it.
        func removeEntry(at i: Int) -> Entry {
            keys.remove(at: i)
            return ArrayEdit.remove(at: i, from: &entries)
        }

        /// Makes room for one more entry (leaf) or child (branch) whose key is `keyLength`
        /// bytes long, growing the arrays that are full to at most `fullCount` items, the most a
        /// node holds just before it splits. (`Array` would double them, overshooting that.)
        func reserveForInsert(keyLength: Int, fullCount: Int) {
            let n = occupancy
            if isLeaf {
                if entries.count == entries.capacity { entries.reserveCapacity(Self.grown(n, fullCount)) }
            } else if children.count == children.capacity {
                children.reserveCapacity(Self.grown(n, fullCount))
            }
            keys.reserveForInsert(keyLength: keyLength, fullCount: fullCount)
        }

        /// The capacity to grow to from `count` items: double, but never past `fullCount`.
        static func grown(_ count: Int, _ fullCount: Int) -> Int {
            Swift.max(count + 1, Swift.min(2 * count, fullCount))
        }

        /// Splits an overfull node in two halves: this node keeps the lower half, and the
        /// returned node holds the upper half. The separator is the key that goes up into the
        /// parent: every key left of it is smaller, every key right of it is `>=`.
        ///
        /// Both halves get fresh arrays with room for `headroom` more items (so a node never
        /// keeps the capacity its arrays grew to on the insert that overfilled it), up to
        /// `fullCount` items; beyond that they grow by ``reserveForInsert(keyLength:fullCount:)``.
        /// When the overfilling insert was `appending` (past this node's last key, as ascending
        /// keys arrive), the lower half gets no headroom: the next keys go to the upper half,
        /// and a bulk load of ascending keys leaves no unused capacity in every other node.
        func split(headroom: Int, fullCount: Int, appending: Bool = false) -> (separator: [UInt8], right: Node) {
            let byteCount = keys.bytes.count, keyCount = keys.count
            /// Room for `items` items and proportionally many key bytes.
            func room(_ items: Int, headroom: Int = headroom) -> (items: Int, bytes: Int) {
                let capacity = Swift.min(items + headroom, fullCount)
                return (capacity, keyCount == 0 ? 0 : byteCount / keyCount * capacity)
            }
            let lowerHeadroom = appending ? 0 : headroom
            func copy<T>(_ items: ArraySlice<T>, headroom: Int = headroom) -> [T] {
                var copy: [T] = []
                copy.reserveCapacity(room(items.count, headroom: headroom).items)
                copy.append(contentsOf: items)
                return copy
            }
            if isLeaf {
                let n = keyCount, mid = n / 2
                let separator = Node.separator(between: self, mid - 1, and: self, mid)
                let upper = room(n - mid), lower = room(mid, headroom: lowerHeadroom)
                let right = Node(keys: keys.copy(mid..<n, reservingKeys: upper.items, bytes: upper.bytes), entries: copy(entries[mid..<n]))
                keys = keys.copy(0..<mid, reservingKeys: lower.items, bytes: lower.bytes)
                entries = copy(entries[0..<mid], headroom: lowerHeadroom)
                return (separator, right)
            }
            // Children 0..<mid stay with separators 0..<mid-1; separator mid-1 goes up.
            let n = children.count, mid = n / 2
            let separator = keys[mid - 1]
            let upper = room(n - mid), lower = appending ? room(mid - 1, headroom: 0) : room(mid)
            let right = Node(separators: keys.copy(mid..<keyCount, reservingKeys: upper.items, bytes: upper.bytes),
                             children: copy(children[mid..<n]))
            keys = keys.copy(0..<(mid - 1), reservingKeys: lower.items, bytes: lower.bytes)
            children = copy(children[0..<mid], headroom: lowerHeadroom)
            return (separator, right)
        }

        /// The shortest separator between two leaf entries: the shortest prefix of key `j` of
        /// `right` that is greater than key `i` of `left`. Key `j` must be greater than key `i`.
        /// Short separators keep branches small and their searches fast.
        static func separator(between left: Node, _ i: Int, and right: Node, _ j: Int) -> [UInt8] {
            left.keys.withKey(at: i) { low in
                right.keys.withKey(at: j) { high in
                    var common = 0
                    let limit = Swift.min(low.count, high.count)
                    while common < limit && low[common] == high[common] { common += 1 }
                    return Array(high[0...common])
                }
            }
        }

        /// Child `i`, first replaced by a private copy if anything else references it.
        /// This node must itself be uniquely owned.
        @inline(__always)
        func uniqueChild(_ i: Int) -> Node {
            if !isKnownUniquelyReferenced(&children[i]) {
                children[i] = children[i].clone()
            }
            return children[i]
        }
    }
}
