/// A namespace's live map together with the byte count of its keys and values (the compaction
/// policy compares the log's size with it), and the lifetimes of the keys that have one.
///
/// A key has a lifetime exactly when its map entry is marked (``OrderedMap/setMarked(_:forKey:)``),
/// so that reading or writing a key without one never looks in the lifetime tables, even when
/// other keys of the namespace are due: the mark costs no memory (a bit of the version word),
/// and a put of a new value clears it with the lifetime.
struct LiveData: Sendable {
    var map = OrderedMap()
    var bytes = 0
    /// The deadlines and owners of the keys that have one.
    var lifetimes = KeyLifetimes()
    /// The namespace's own deadline, in milliseconds since the epoch (0: none): when it passes,
    /// every key goes (``Mutation/namespaceDeadline(_:)``). Only a namespace that holds a key
    /// has one: the delete of its last key clears it.
    var deadline: UInt64 = 0

    /// Applies one mutation, written by the log record numbered `version`; returns whether it
    /// removed a key that existed (and, with a `now`, had not expired by then).
    @discardableResult
    mutating func apply(_ mutation: Mutation, version: UInt64, now: UInt64 = 0) -> Bool {
        switch mutation {
        case .put(let key, let value):
            put(key: key[...], value: value[...], version: version)  // a whole array's slice: a new key keeps the array itself
            return false
        case .delete(let key):
            return delete(key, now: now)
        case .lifetime(let key, let lifetime) where key.isEmpty:
            deadline = map.count == 0 ? 0 : lifetime.deadline
            return false
        case .lifetime(let key, let lifetime):
            if map.setMarked(!lifetime.isNone, forKey: key) { lifetimes.set(key, lifetime) }
            return false
        }
    }

    /// Removes `key`; returns whether it existed and had not expired at `now` (0: ignore deadlines).
    /// The last key's removal clears the namespace's ``deadline``.
    mutating func delete(_ key: [UInt8], now: UInt64) -> Bool {
        guard let removed = map.removeEntry(forKey: key) else { return false }
        if deadline != 0 && map.count == 0 { deadline = 0 }
        bytes -= key.count + removed.old.count
        guard removed.wasMarked else { return true }
        let lifetime = lifetimes.remove(key)
        return !(now != 0 && lifetime.hasExpired(at: now))
    }

    /// Stores `value` with `version` for `key` (see `OrderedMap.updateValue(copying:forKey:version:)`):
    /// the one way a put reaches the map, from a request's bytes in place or from a mutation's arrays.
    /// Returns whether the key was added: absent before, or (with a `now`) expired by then.
    @discardableResult
    mutating func put(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>, version: UInt64, now: UInt64 = 0) -> Bool {
        guard !lifetimes.isEmpty else {
            // No key has a lifetime: no mark to read (a plain PUT's path, as before marks).
            guard let old = map.updateValue(copying: value, forKey: key, version: version) else {
                bytes += key.count + value.count
                return true
            }
            bytes += value.count - old
            return false
        }
        guard let replaced = map.replace(copying: value, forKey: key, version: version) else {
            bytes += key.count + value.count
            return true
        }
        bytes += value.count - replaced.old
        // Only a key that had a lifetime (a marked entry) has one to forget.
        guard replaced.wasMarked else { return false }
        let lifetime = lifetimes.remove(Array(key))
        return now != 0 && lifetime.hasExpired(at: now)
    }

    /// The figures an estimate of this data's memory is made of (every key in the map, expired
    /// ones too: they hold memory until they are deleted).
    var memoryEstimate: MemoryEstimate {
        MemoryEstimate(keys: map.count, keyAndValueBytes: bytes, keysWithLifetimes: lifetimes.count)
    }

    /// Whether exactly the keys with a lifetime have marked entries (for tests).
    func marksMatchLifetimes() -> Bool {
        var marked = 0
        var matches = true
        map.forEach { key, _, _ in
            let isMarked = map.isMarked(key)
            if isMarked { marked += 1 }
            matches = isMarked == !lifetimes.lifetime(of: key).isNone
            return matches
        }
        return matches && marked == lifetimes.count
    }

    /// Sums the key and value bytes of a map (after loading a snapshot).
    static func byteCount(of map: OrderedMap) -> Int {
        var total = 0
        map.forEach { key, value, _ in
            total += key.count + value.count
            return true
        }
        return total
    }
}
