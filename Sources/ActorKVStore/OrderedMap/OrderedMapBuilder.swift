/// Bulk loading of ``OrderedMap`` from sorted entries.

extension OrderedMap {
    /// Builds a map in O(n) from entries appended in strictly increasing key order, as recovery
    /// does when it loads a snapshot.
    ///
    /// Leaves are filled to capacity as entries arrive; ``build()`` then stacks branches on top.
    /// A builder is a value: a copy goes on independently of the original.
    public struct Builder: Sendable {
        /// The fan-out of the map being built.
        let layout: Layout
        /// Full leaves in key order. Never written again once here (copies of the builder share them).
        var leaves: [Node] = []
        /// The keys of the leaf being filled, end to end.
        var keyBytes: [UInt8] = []
        /// Where each key of the leaf being filled starts in `keyBytes`, then where the last ends.
        var keyOffsets: [UInt32] = [0]
        /// The values and versions of the leaf being filled.
        var entries: [Entry] = []
        /// The last key appended, which the next must exceed.
        var lastKey: [UInt8]?
        /// How many entries were appended.
        var entryCount = 0

        /// Creates an empty builder.
        public init() {
            self.init(layout: .standard)
        }

        /// Creates an empty builder for a map with the given fan-out (tests use small fan-outs).
        init(leafCapacity: Int, branchCapacity: Int) {
            self.init(layout: Layout(leafCapacity: leafCapacity, branchCapacity: branchCapacity))
        }

        /// Creates an empty builder for a map whose nodes follow `layout`.
        init(layout: Layout) {
            self.layout = layout
            startLeaf(expectedBytes: 0)
        }

        /// Appends one entry (`marked`: see ``OrderedMap/setMarked(_:forKey:)``). Returns false,
        /// and appends nothing, if `key` is not strictly greater than the key appended before it.
        public mutating func append(key: [UInt8], value: [UInt8], version: UInt64 = 0) -> Bool {
            append(key: key, value: value, version: version, marked: false)
        }

        /// ``append(key:value:version:)`` of an entry that may be marked.
        mutating func append(key: [UInt8], value: [UInt8], version: UInt64, marked: Bool) -> Bool {
            if let lastKey, compareBytes(key, lastKey) <= 0 { return false }
            if entries.count == layout.leafCapacity { closeLeaf() }
            precondition(keyBytes.count + key.count <= Int(UInt32.max), "keys of one node exceed 4 GiB")
            keyBytes.append(contentsOf: key)
            keyOffsets.append(UInt32(truncatingIfNeeded: keyBytes.count))
            var entry = Entry(value: value, version: version)
            if marked { entry.stamp |= OrderedMap.markBit }
            entries.append(entry)
            lastKey = key
            entryCount += 1
            return true
        }

        /// Finishes the tree and returns the map. O(number of nodes).
        public consuming func build() -> OrderedMap {
            var map = OrderedMap(layout: layout)
            guard entryCount > 0 else { return map }
            var level = leaves
            if !entries.isEmpty {
                if level.isEmpty || entries.count >= layout.minLeaf {
                    level.append(pendingLeaf())
                } else {
                    // Too few entries for a leaf of their own: share them with the last full leaf,
                    // in two fresh nodes (the full leaf may be shared with a copy of this builder).
                    let previous = level.removeLast()
                    let combined = previous.clone()
                    combined.keys.append(contentsOf: PackedKeys(bytes: keyBytes, offsets: keyOffsets))
                    combined.entries.append(contentsOf: entries)
                    let (_, right) = combined.split(headroom: layout.leafCapacity / 4, fullCount: layout.leafCapacity + 1)
                    level.append(combined)
                    level.append(right)
                }
            }
            // separators[i] goes between level[i - 1] and level[i]; separators[0] is unused.
            var separators: [[UInt8]] = [[]]
            separators.reserveCapacity(level.count)
            for i in level.indices.dropFirst() {
                separators.append(Node.separator(between: level[i - 1], level[i - 1].keys.count - 1, and: level[i], 0))
            }
            while level.count > 1 {
                // As few branches as the fan-out allows, with the children spread evenly, so
                // every branch holds at least half the maximum.
                let groups = (level.count + layout.branchCapacity - 1) / layout.branchCapacity
                var nextLevel: [Node] = []
                var nextSeparators: [[UInt8]] = []
                nextLevel.reserveCapacity(groups)
                nextSeparators.reserveCapacity(groups)
                var start = 0
                for group in 0..<groups {
                    let end = start + level.count / groups + (group < level.count % groups ? 1 : 0)
                    var bytes: [UInt8] = []
                    var offsets: [UInt32] = [0]
                    offsets.reserveCapacity(end - start)
                    for separator in separators[(start + 1)..<end] {
                        bytes.append(contentsOf: separator)
                        offsets.append(UInt32(truncatingIfNeeded: bytes.count))
                    }
                    let keys = PackedKeys(bytes: ArrayEdit.trimmed(bytes), offsets: offsets)
                    nextLevel.append(Node(separators: keys, children: Array(level[start..<end])))
                    nextSeparators.append(separators[start])
                    start = end
                }
                level = nextLevel
                separators = nextSeparators
            }
            map.root = level[0]
            map.entryCount = entryCount
            return map
        }

        /// The leaf being filled, as a node.
        private func pendingLeaf() -> Node {
            Node(keys: PackedKeys(bytes: ArrayEdit.trimmed(keyBytes), offsets: keyOffsets), entries: entries)
        }

        /// Moves the full pending leaf to `leaves` and starts the next.
        private mutating func closeLeaf() {
            leaves.append(pendingLeaf())
            startLeaf(expectedBytes: keyBytes.count)
        }

        /// Empties the pending leaf, sized for a full leaf of keys like the last ones.
        private mutating func startLeaf(expectedBytes: Int) {
            keyBytes = []
            keyBytes.reserveCapacity(expectedBytes)
            keyOffsets = []
            keyOffsets.reserveCapacity(layout.leafCapacity + 1)
            keyOffsets.append(0)
            entries = []
            entries.reserveCapacity(layout.leafCapacity)
        }
    }
}
