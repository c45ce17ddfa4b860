/// Drawing an entry of ``OrderedMap`` at random without reading the others.

extension OrderedMap {
    /// One entry drawn uniformly at random (its key and entry), or nil when the map is empty.
    ///
    /// Expected O(log n), whatever the map's size: a walk from the root that takes a child drawn
    /// at random at each branch, then an entry of the leaf, and starts again when a draw below
    /// the root is rejected (``draw(below:using:)``). No node is copied or changed.
    func randomEntry<G: RandomNumberGenerator>(using generator: inout G) -> (key: [UInt8], entry: Entry)? {
        guard let root else { return nil }
        while true {
            if let drawn = Self.draw(below: root, layout, using: &generator) { return drawn }
        }
    }

    /// One try of ``randomEntry(using:)``: below `root`, a child (or, in the leaf, an entry)
    /// drawn uniformly, kept at each node other than the root with probability its count over
    /// the layout's capacity; nil when a node rejects the walk.
    ///
    /// Why every entry is equally likely: all leaves are at the same depth `d`, so an entry is
    /// reached and kept with probability `1 / rootCount` × `(1 / c) × (c / branchCapacity)`
    /// for each branch below the root × `(1 / e) × (e / leafCapacity)` for its leaf, which is
    /// `1 / (rootCount × branchCapacity^(d - 1) × leafCapacity)` for all. A node other than the
    /// root is at least half full, so a try is kept with probability at least `2^-(d)`, and at
    /// a million keys (`d` = 3) a draw takes about three tries of four node visits each.
    private static func draw<G: RandomNumberGenerator>(below root: Node, _ layout: Layout,
                                                       using generator: inout G) -> (key: [UInt8], entry: Entry)? {
        // Unretained, as ``withLeaf(for:_:)`` walks: the root, held for the walk, keeps the
        // nodes alive (a draw took 5-10% more CPU retaining each node it passed).
        withExtendedLifetime(root) {
            var node = Unmanaged.passUnretained(root)
            var isRoot = true
            while !node._withUnsafeGuaranteedRef({ $0.isLeaf }) {
                let count = node._withUnsafeGuaranteedRef { $0.children.count }
                if !isRoot && Int.random(in: 0..<layout.branchCapacity, using: &generator) >= count { return nil }
                let index = Int.random(in: 0..<count, using: &generator)
                node = node._withUnsafeGuaranteedRef { $0.children.withUnsafeBufferPointer { Unmanaged.passUnretained($0[index]) } }
                isRoot = false
            }
            return node._withUnsafeGuaranteedRef { leaf in
                let count = leaf.entries.count
                if !isRoot && Int.random(in: 0..<layout.leafCapacity, using: &generator) >= count { return nil }
                let index = Int.random(in: 0..<count, using: &generator)
                return (leaf.keys[index], leaf.entries[index])
            }
        }
    }
}
