/// The structural invariants of ``OrderedMap``, checked by the tests.

extension OrderedMap {
    /// A broken invariant, with where and what.
    struct InvariantViolation: Error, CustomStringConvertible {
        /// What was wrong.
        let description: String
    }

    /// Checks every invariant of the tree, in O(n); throws the first one broken:
    /// - an empty map has no root; a non-empty map's nodes are never empty;
    /// - each node's packed keys are well formed and strictly increasing, a leaf has one value
    ///   per key and no children, a branch one more child than separators and no values;
    /// - every key under child `i` of a branch lies between separators `i - 1` (inclusive) and
    ///   `i` (exclusive), and within the bounds of the branch itself;
    /// - nodes other than the root hold between half the maximum and the maximum, a root
    ///   branch at least two children;
    /// - all leaves are at the same depth;
    /// - the leaves hold `count` entries in all.
    func checkInvariants() throws(InvariantViolation) {
        guard let root else {
            guard entryCount == 0 else { throw InvariantViolation(description: "no root but count \(entryCount)") }
            return
        }
        var leafDepth: Int?
        let entries = try check(root, depth: 0, isRoot: true, lower: nil, upper: nil, leafDepth: &leafDepth)
        guard entries == entryCount else {
            throw InvariantViolation(description: "leaves hold \(entries) entries but count is \(entryCount)")
        }
    }

    /// Checks the subtree of `node`, whose keys must be `>= lower` and `< upper`; returns its entry count.
    private func check(_ node: Node, depth: Int, isRoot: Bool, lower: [UInt8]?, upper: [UInt8]?,
                       leafDepth: inout Int?) throws(InvariantViolation) -> Int {
        func fail(_ what: String) -> InvariantViolation {
            InvariantViolation(description: "\(node.isLeaf ? "leaf" : "branch") at depth \(depth): \(what)")
        }
        if let problem = node.keys.inconsistency() { throw fail(problem) }
        let keys = (0..<node.keys.count).map { node.keys[$0] }
        for i in keys.indices.dropFirst() where compareBytes(keys[i - 1], keys[i]) >= 0 {
            throw fail("keys out of order at \(i)")
        }
        if let lower, let first = keys.first, compareBytes(first, lower) < 0 { throw fail("key below its lower bound") }
        if let upper, let last = keys.last, compareBytes(last, upper) >= 0 { throw fail("key not below its upper bound") }

        if node.isLeaf {
            guard node.children.isEmpty else { throw fail("leaf with children") }
            guard node.entries.count == node.keys.count else { throw fail("\(node.keys.count) keys but \(node.entries.count) entries") }
            guard node.keys.count >= (isRoot ? 1 : layout.minLeaf), node.keys.count <= layout.leafCapacity else {
                throw fail("\(node.keys.count) entries, outside \(isRoot ? 1 : layout.minLeaf)...\(layout.leafCapacity)")
            }
            if let leafDepth, leafDepth != depth { throw fail("leaves at depths \(leafDepth) and \(depth)") }
            leafDepth = depth
            return node.keys.count
        }

        guard node.entries.isEmpty else { throw fail("branch with entries") }
        guard node.children.count == node.keys.count + 1 else {
            throw fail("\(node.keys.count) separators but \(node.children.count) children")
        }
        guard node.children.count >= (isRoot ? 2 : layout.minBranch), node.children.count <= layout.branchCapacity else {
            throw fail("\(node.children.count) children, outside \(isRoot ? 2 : layout.minBranch)...\(layout.branchCapacity)")
        }
        var total = 0
        for (i, child) in node.children.enumerated() {
            total += try check(child, depth: depth + 1, isRoot: false,
                               lower: i == 0 ? lower : keys[i - 1], upper: i == keys.count ? upper : keys[i],
                               leafDepth: &leafDepth)
        }
        return total
    }
}
