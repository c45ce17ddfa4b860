import ActorKVProtocol

/// Copying ``OrderedMap``'s keys and values into one ``BulkStrings`` (HGETALL's reply).

extension OrderedMap {
    /// Appends `parts` of every entry, in key order, to `strings`: a key's bytes read in place
    /// from its leaf, a value's copied from its array. A marked entry for which `skipsMarked`
    /// returns true (given its key) is left out.
    ///
    /// Each leaf's arrays are read once and walked through pointers: looking each entry up in
    /// its node retained and released the node's arrays every time, half of an HGETALL's time
    /// on a namespace of 1,000 keys. (Each value is still retained and released around its copy,
    /// a call into another module: a quarter of that time now.)
    func pack(_ parts: EntryParts, into strings: inout BulkStrings, skippingMarked skipsMarked: (UnsafeRawBufferPointer) -> Bool) {
        guard let root else { return }
        Self.packLeaves(below: root, parts, into: &strings, skipsMarked)
    }

    /// ``pack(_:into:skippingMarked:)`` below `node`.
    private static func packLeaves(below node: Node, _ parts: EntryParts, into strings: inout BulkStrings,
                                   _ skipsMarked: (UnsafeRawBufferPointer) -> Bool) {
        guard node.isLeaf else {
            for child in node.children { packLeaves(below: child, parts, into: &strings, skipsMarked) }
            return
        }
        let (keys, entries) = (node.keys, node.entries)
        keys.bytes.withUnsafeBytes { keyBytes in
            keys.offsets.withUnsafeBufferPointer { offsets in
                entries.withUnsafeBufferPointer { entries in
                    for index in entries.indices {
                        let key = UnsafeRawBufferPointer(rebasing: keyBytes[Int(offsets[index])..<Int(offsets[index + 1])])
                        if entries[index].isMarked && skipsMarked(key) { continue }
                        if parts != .values { strings.append(key.assumingMemoryBound(to: UInt8.self)) }
                        if parts != .keys { strings.append(entries[index].value) }
                    }
                }
            }
        }
    }
}
