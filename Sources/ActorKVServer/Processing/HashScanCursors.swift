import Synchronization

/// The server-wide table of HSCAN cursors: each maps to the namespace it walks and the key a
/// next page starts after. Shared by every connection, so that a client may ask for the next
/// page on another connection of its pool.
///
/// A cursor is a random integer in 1...2^53-1 (0 means "start" and "finished"), so that one
/// issued before a restart is very unlikely to name an entry of the new table. It stays valid
/// for ``lifetime`` after it was issued or last resolved, and may be resolved any number of
/// times (a client that retries a page gets the same page) until the scan moves on: a cursor
/// issued for the page after another one's records it as its predecessor, and once it is
/// resolved itself, the client has gone past that page, so the predecessor is forgotten. A scan
/// in progress thus holds two cursors (the page just read and the next), not one per page, and
/// a long scan does not push other scans' cursors out of the table. The table is bounded: at most
/// ``capacity`` cursors, holding at most ``byteBudget`` bytes of keys and namespace names; past
/// either, the least recently used cursor is dropped. Expired cursors are dropped lazily: each
/// call drops those at the old end of the use order, so no call ever walks the whole table.
final class HashScanCursors: Sendable {
    /// What a cursor means for the namespace it is given with.
    enum Resolution: Equatable, Sendable {
        /// Cursor 0: the scan starts at the namespace's first key.
        case start
        /// The scan goes on with the first key after this one.
        case resume(after: [UInt8])
        /// The cursor was never issued, has expired, was dropped to make room, or belongs to
        /// another namespace.
        case unknown
    }

    /// The largest cursor: cursors fit in 53 bits, so a client that reads them as doubles
    /// (JavaScript's numbers) reads them exactly.
    static let maxCursor: UInt64 = (1 << 53) - 1

    /// Most cursors held at once.
    let capacity: Int
    /// Most bytes of keys and namespace names held at once (a single entry larger than this is
    /// still kept, alone).
    let byteBudget: Int
    /// How long a cursor stays valid after it was issued or last resolved, in milliseconds.
    let lifetime: UInt64
    private let table: Mutex<Table>
    private let random: @Sendable () -> UInt64

    /// An empty table. `random` draws cursor candidates (masked to 53 bits; 0 and cursors in
    /// use are drawn again); tests give their own.
    init(capacity: Int = 65_536, byteBudget: Int = 64 << 20, lifetime: UInt64 = 10 * 60 * 1000,
         random: @escaping @Sendable () -> UInt64 = systemRandom) {
        precondition(capacity > 0, "a cursor table must hold at least one cursor")
        self.capacity = capacity
        self.byteBudget = byteBudget
        self.lifetime = lifetime
        self.random = random
        table = Mutex(Table())
    }

    /// A new cursor for resuming the scan of `namespace` after `key`, valid from `now`
    /// (milliseconds on any clock that does not go back), dropping expired and, if the table
    /// is full, least recently used cursors. `predecessor` is the cursor whose page this one
    /// follows (0: the scan's first page): it is forgotten once the new cursor is resolved.
    func issue(namespace: String, after key: [UInt8], now: UInt64, following predecessor: UInt64 = 0) -> UInt64 {
        table.withLock { table in
            table.dropExpired(now: now, lifetime: lifetime)
            let size = key.count + namespace.utf8.count
            while table.count >= capacity || (table.count > 0 && table.bytes + size > byteBudget) {
                table.removeOldest()
            }
            let cursor = unusedCursor(in: table)
            table.insert(Entry(cursor: cursor, namespace: namespace, key: key, lastUse: now, predecessor: predecessor))
            return cursor
        }
    }

    /// What `cursor` means for a scan of `namespace` at `now`: a known cursor starts its
    /// lifetime again, and the cursor it followed is forgotten (the scan has moved past it).
    func resolve(_ cursor: UInt64, namespace: String, now: UInt64) -> Resolution {
        if cursor == 0 { return .start }
        return table.withLock { table in
            table.dropExpired(now: now, lifetime: lifetime)
            guard let slot = table.slot(of: cursor), table.entries[slot].namespace == namespace,
                  !table.entries[slot].hasExpired(now: now, lifetime: lifetime) else { return .unknown }
            table.touch(slot, now: now)
            let predecessor = table.takePredecessor(of: slot)
            if predecessor != 0 {
                // Only that scan's own cursor: a number forgotten and drawn again for another
                // namespace's scan is left alone.
                if let old = table.slot(of: predecessor), table.entries[old].namespace == namespace { table.remove(old) }
            }
            return .resume(after: table.entries[slot].key)
        }
    }

    /// How many cursors the table holds (expired ones not yet dropped included).
    var count: Int { table.withLock { $0.count } }

    /// How many bytes of keys and namespace names the table holds.
    var storedBytes: Int { table.withLock { $0.bytes } }

    /// Whether the table's index, use order and byte count agree (for tests).
    var isConsistent: Bool { table.withLock { $0.isConsistent } }

    /// 64 bits from the system's generator (the kernel's).
    @Sendable static func systemRandom() -> UInt64 {
        var system = SystemRandomNumberGenerator()
        return system.next()
    }

    /// A random nonzero cursor of at most 53 bits that `table` does not hold.
    private func unusedCursor(in table: Table) -> UInt64 {
        while true {
            let cursor = random() & Self.maxCursor
            if cursor != 0 && table.slot(of: cursor) == nil { return cursor }
        }
    }
}

extension HashScanCursors {
    /// One cursor: where its scan resumes, when it was last used, and its neighbours in the
    /// use order (slots in ``Table/entries``, -1 for none).
    struct Entry {
        var cursor: UInt64
        var namespace: String
        var key: [UInt8]
        var lastUse: UInt64
        /// The cursor whose page this one's follows, forgotten when this one is resolved (0: none).
        var predecessor: UInt64
        var older = -1
        var newer = -1

        init(cursor: UInt64, namespace: String, key: [UInt8], lastUse: UInt64, predecessor: UInt64 = 0) {
            (self.cursor, self.namespace, self.key, self.lastUse, self.predecessor) = (cursor, namespace, key, lastUse, predecessor)
        }

        /// The bytes it counts against the budget.
        var size: Int { key.count + namespace.utf8.count }

        /// Whether its lifetime has passed at `now` (never, if the clock went back).
        func hasExpired(now: UInt64, lifetime: UInt64) -> Bool {
            now >= lastUse && now - lastUse >= lifetime
        }
    }

    /// The cursors in slots of one array, indexed by cursor, linked from least to most recently
    /// used. Since every use moves a cursor to the newest end and all share one lifetime, the
    /// oldest end is also where the expired ones are.
    struct Table {
        private(set) var entries: [Entry] = []
        private var index: [UInt64: Int] = [:]
        private var freeSlots: [Int] = []
        private var oldest = -1, newest = -1
        private(set) var bytes = 0

        var count: Int { index.count }

        func slot(of cursor: UInt64) -> Int? { index[cursor] }

        /// Adds `entry` as the most recently used.
        mutating func insert(_ entry: Entry) {
            let slot: Int
            if let free = freeSlots.popLast() {
                slot = free
                entries[slot] = entry
            } else {
                slot = entries.count
                entries.append(entry)
            }
            index[entry.cursor] = slot
            bytes += entry.size
            link(slot)
        }

        /// Marks the entry in `slot` used at `now`: it becomes the most recently used.
        mutating func touch(_ slot: Int, now: UInt64) {
            entries[slot].lastUse = now
            unlink(slot)
            link(slot)
        }

        /// The predecessor of the entry in `slot` (0: none), which it no longer has.
        mutating func takePredecessor(of slot: Int) -> UInt64 {
            defer { entries[slot].predecessor = 0 }
            return entries[slot].predecessor
        }

        /// Drops the least recently used entry (there must be one).
        mutating func removeOldest() { remove(oldest) }

        /// Drops the entry in `slot`.
        mutating func remove(_ slot: Int) {
            unlink(slot)
            index[entries[slot].cursor] = nil
            bytes -= entries[slot].size
            entries[slot].key = []
            entries[slot].namespace = ""
            freeSlots.append(slot)
        }

        /// Drops the expired entries at the old end of the use order: each entry is dropped at
        /// most once, so this costs O(1) per call, amortised.
        mutating func dropExpired(now: UInt64, lifetime: UInt64) {
            while oldest >= 0 && entries[oldest].hasExpired(now: now, lifetime: lifetime) { removeOldest() }
        }

        /// Puts the unlinked `slot` at the newest end.
        private mutating func link(_ slot: Int) {
            entries[slot].older = newest
            entries[slot].newer = -1
            if newest >= 0 { entries[newest].newer = slot } else { oldest = slot }
            newest = slot
        }

        /// Takes `slot` out of the use order.
        private mutating func unlink(_ slot: Int) {
            let (older, newer) = (entries[slot].older, entries[slot].newer)
            if older >= 0 { entries[older].newer = newer } else { oldest = newer }
            if newer >= 0 { entries[newer].older = older } else { newest = older }
        }

        /// Whether walking the use order finds exactly the indexed entries, their bytes
        /// summing to ``bytes``.
        var isConsistent: Bool {
            var seen = 0, total = 0, slot = oldest, previous = -1
            while slot >= 0 && seen <= count {
                let entry = entries[slot]
                guard entry.older == previous, index[entry.cursor] == slot else { return false }
                (seen, total, previous, slot) = (seen + 1, total + entry.size, slot, entry.newer)
            }
            return seen == count && total == bytes && previous == newest
        }
    }
}
