/// Looking up several keys at once, with their cache misses overlapped.
extension OrderedMap {
    /// How many walks ``values(forKeys:_:)`` advances together. Enough to cover a cache miss with
    /// the other walks' searches; few enough that their prefetch hints stay within what the CPU
    /// can keep in flight.
    static let lookupGroupSize = 8

    /// Calls `body(i, self[keys[i]])` for every key, in order.
    ///
    /// A lone lookup at a large map waits for one cache miss after another: a node, then its
    /// arrays, then a child, then the value. Here the walks of up to ``lookupGroupSize`` keys go
    /// down the tree together, one level at a time (a B+tree's leaves are all at the same depth):
    /// each walk searches the node it is at and hints its next node into the cache, then every
    /// next node hints its arrays, and only then does the first walk search again. So the misses
    /// of different keys overlap, as a server's pipelined `GET`s can afford. The result is exactly
    /// that of the subscript.
    public func values(forKeys keys: [[UInt8]], _ body: (Int, [UInt8]?) -> Void) {
        lookUp(keys, deliver: true) { i, value, _ in body(i, value) }
    }

    /// ``values(forKeys:_:)`` for keys that are slices of larger buffers (a server's requests).
    public func values(forKeys keys: [ArraySlice<UInt8>], _ body: (Int, [UInt8]?) -> Void) {
        lookUp(keys, deliver: true) { i, value, _ in body(i, value) }
    }

    /// ``values(forKeys:_:)`` for slices, also handing over whether each found entry is marked.
    func markedValues(forKeys keys: [ArraySlice<UInt8>], _ body: (_ index: Int, _ value: [UInt8]?, _ marked: Bool) -> Void) {
        lookUp(keys, deliver: true, body)
    }

    /// Starts loading into the cache what writing `keys` will read — each key's walk as in
    /// ``values(forKeys:_:)``, hinting its leaf's arrays and the old value's storage — without
    /// reading any value. Only a hint: nothing changes, and the writes that follow find those
    /// nodes warm (unless an earlier one of them split the node). For a server's pipelined `PUT`s.
    public func prefetch(forKeys keys: [ArraySlice<UInt8>]) {
        lookUp(keys, deliver: false) { _, _, _ in }
    }

    /// Walks `keys` in groups; with `deliver`, hands each key's value and mark to `body`, in order.
    private func lookUp<Key: BorrowedBytes>(_ keys: [Key], deliver: Bool, _ body: (Int, [UInt8]?, Bool) -> Void) {
        guard let root else {
            if deliver { for i in keys.indices { body(i, nil, false) } }
            return
        }
        withExtendedLifetime(root) {
            withUnsafeTemporaryAllocation(of: Unmanaged<Node>.self, capacity: Self.lookupGroupSize) { nodes in
                withUnsafeTemporaryAllocation(of: Int.self, capacity: Self.lookupGroupSize) { slots in
                    var start = 0
                    while start < keys.count {
                        let group = Swift.min(Self.lookupGroupSize, keys.count - start)
                        let walks = Walks(nodes: nodes, slots: slots, keys: keys, start: start, count: group)
                        walks.descend(from: root)
                        walks.findInLeaves()
                        if deliver { walks.deliver(body) }
                        start += group
                    }
                }
            }
        }
    }

    /// The walks of one group of keys: `keys[start + i]` is at node `nodes[i]`; in a leaf,
    /// `slots[i]` is the index of its entry, or -1 when the key is absent.
    ///
    /// Nodes are held unretained: the root, kept alive by the caller, keeps every node under it
    /// alive, and the map does not change during a non-mutating call (as in `withLeaf`).
    private struct Walks<Key: BorrowedBytes> {
        let nodes: UnsafeMutableBufferPointer<Unmanaged<Node>>
        let slots: UnsafeMutableBufferPointer<Int>
        let keys: [Key]
        let start: Int
        let count: Int

        /// Moves every walk from `root` down to the leaf whose key range holds its key.
        func descend(from root: Node) {
            root.prefetch()
            for i in 0..<count { nodes[i] = .passUnretained(root) }
            // Every leaf is at the same depth, so all walks reach their leaves together.
            while !nodes[0]._withUnsafeGuaranteedRef({ $0.isLeaf }) { stepDown() }
        }

        /// Moves every walk one level down: searches each current node (whose arrays were hinted
        /// on arrival) and hints the child's object; then lets each child hint its arrays.
        private func stepDown() {
            for i in 0..<count {
                let child = nodes[i]._withUnsafeGuaranteedRef { node in
                    let index = node.childIndex(for: keys[start &+ i])
                    return node.children.withUnsafeBufferPointer { Unmanaged.passUnretained($0[index]) }
                }
                Prefetch.bytes(at: UnsafeRawPointer(child.toOpaque()), count: 64)
                nodes[i] = child
            }
            for i in 0..<count { nodes[i]._withUnsafeGuaranteedRef { $0.prefetch() } }
        }

        /// Searches each walk's leaf for its key, hinting the found value's storage.
        func findInLeaves() {
            for i in 0..<count {
                slots[i] = nodes[i]._withUnsafeGuaranteedRef { leaf in
                    let (index, found) = leaf.keys.find(keys[start &+ i])
                    guard found else { return -1 }
                    leaf.entries.withUnsafeBufferPointer { Prefetch.valueStorage(of: $0, at: index, bytes: 128) }
                    return index
                }
            }
        }

        /// Hands each key's value (retained only now, when its storage has had time to arrive)
        /// and whether its entry is marked.
        func deliver(_ body: (Int, [UInt8]?, Bool) -> Void) {
            for i in 0..<count {
                let slot = slots[i]
                guard slot >= 0 else {
                    body(start &+ i, nil, false)
                    continue
                }
                let entry = nodes[i]._withUnsafeGuaranteedRef { $0.entries[slot] }
                body(start &+ i, entry.value, entry.isMarked)
            }
        }
    }
}
