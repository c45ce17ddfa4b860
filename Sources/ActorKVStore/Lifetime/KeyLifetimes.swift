/// The lifetimes of a namespace's keys that have one: deadlines and owners, beside the map, so
/// that a key without a lifetime costs nothing for it. Pure bookkeeping: the namespace decides
/// when to delete.
///
/// Deadlines are also kept in a min-heap, so that the keys due for deletion are found without
/// looking at the others. A key's heap entry is not removed when its deadline changes or the key
/// goes: it is skipped when it reaches the top (its deadline no longer matches), and the heap is
/// rebuilt when such stale entries outnumber the live ones.
public struct KeyLifetimes: Sendable {
    private var lifetimes: [HashedKey: Lifetime] = [:]
    /// The keys each owner holds.
    private var owned: [UInt64: Set<HashedKey>] = [:]
    private var heap = DeadlineHeap()
    /// No lifetimes.
    public init() {}

    /// Keys with a deadline.
    private(set) var expiringCount = 0
    /// Keys owned by a connection (ephemeral).
    private(set) var ephemeralCount = 0

    /// Whether no key has a lifetime (the common case: then reads need no checks).
    var isEmpty: Bool { lifetimes.isEmpty }

    /// Keys with a lifetime.
    var count: Int { lifetimes.count }

    /// Whether any key has a deadline.
    var hasDeadlines: Bool { expiringCount > 0 }

    /// The lifetime of `key` (``Lifetime/none`` when it has none).
    func lifetime(of key: [UInt8]) -> Lifetime {
        lifetimes.isEmpty ? .none : lifetimes[HashedKey(key)] ?? .none
    }

    /// Whether `key` has a deadline that has passed at `now`.
    @inline(__always)
    func hasExpired(_ key: [UInt8], at now: UInt64) -> Bool {
        guard hasDue(at: now) else { return false }
        return lifetimes[HashedKey(key)]?.hasExpired(at: now) ?? false
    }

    /// Whether any key's deadline may have passed at `now`: false before the earliest deadline
    /// held, so that reads then look nothing up.
    @inline(__always)
    func hasDue(at now: UInt64) -> Bool {
        expiringCount > 0 && heap.earliestDeadline <= now
    }

    /// Gives `key` this lifetime (``Lifetime/none``: forgets it).
    mutating func set(_ key: [UInt8], _ lifetime: Lifetime) {
        _ = replace(key, with: lifetime)
    }

    /// Forgets `key`'s lifetime and returns it (``Lifetime/none`` when it had none).
    mutating func remove(_ key: [UInt8]) -> Lifetime {
        lifetimes.isEmpty ? .none : replace(key, with: .none)
    }

    /// Gives `key` this lifetime; returns the one it had.
    private mutating func replace(_ key: [UInt8], with lifetime: Lifetime) -> Lifetime {
        let hashed = HashedKey(key)
        // One lookup of the table, which writes as it reads (a sweep clears a lifetime per key).
        let old: Lifetime
        if lifetime.isNone {
            guard let removed = lifetimes.removeValue(forKey: hashed) else { return .none }
            old = removed
        } else {
            old = lifetimes.updateValue(lifetime, forKey: hashed) ?? .none
            guard old != lifetime else { return old }
        }
        if old.deadline != 0 { expiringCount -= 1 }
        if old.owner != 0 {
            ephemeralCount -= 1
            disown(hashed, by: old.owner)
        }
        if lifetime.owner != 0 {
            ephemeralCount += 1
            // Moved out and back rather than changed through the subscript's accessor, whose
            // coroutine frame is allocated on every call.
            var keys = owned.removeValue(forKey: lifetime.owner) ?? []
            keys.insert(hashed)
            owned[lifetime.owner] = keys
        }
        if lifetime.deadline != 0 {
            expiringCount += 1
            heap.push(deadline: lifetime.deadline, key: key)
            if heap.count > 64 && heap.count > 2 * expiringCount { rebuildHeap() }
        }
        return old
    }

    /// Up to `limit` keys whose deadline has passed at `now`, earliest first, taken off the
    /// heap (put them back with ``set(_:_:)`` if they are not deleted after all).
    mutating func takeDue(at now: UInt64, limit: Int) -> [[UInt8]] {
        var due: [[UInt8]] = []
        while due.count < limit, let top = heap.top, top.deadline <= now {
            heap.pop()
            // A stale entry: the key's deadline changed, or it has none now.
            guard lifetimes[HashedKey(top.key)]?.deadline == top.deadline else { continue }
            due.append(top.key)
        }
        return due
    }

    /// Puts keys taken by ``takeDue(at:limit:)`` back on the heap (their deletion failed).
    mutating func requeue(_ keys: [[UInt8]]) {
        for key in keys {
            if let deadline = lifetimes[HashedKey(key)]?.deadline, deadline != 0 { heap.push(deadline: deadline, key: key) }
        }
    }

    /// How many keys have a deadline that has passed at `now` (they are gone for reads, not yet
    /// deleted). Visits only the heap entries due by then.
    func expiredCount(at now: UInt64) -> Int {
        guard expiringCount > 0 else { return 0 }
        var count = 0
        heap.forEachDue(at: now) { deadline, key in
            if lifetimes[HashedKey(key)]?.deadline == deadline { count += 1 }
        }
        return count
    }

    /// ``expiredCount(at:)`` found by looking at every lifetime held rather than the heap, so
    /// that it also works on a ``frozen()`` copy (which keeps no heap).
    func expiredCountByScanning(at now: UInt64) -> Int {
        guard expiringCount > 0 else { return 0 }
        var count = 0
        for lifetime in lifetimes.values where lifetime.hasExpired(at: now) { count += 1 }
        return count
    }

    /// The earliest deadline held (perhaps of a stale entry), or nil.
    var earliestDeadline: UInt64? { heap.count == 0 ? nil : heap.earliestDeadline }

    /// A copy for a reader that only looks keys up (a snapshot being written, a `CHANGES …
    /// SNAPSHOT`): it shares the table of lifetimes but not the heap of deadlines (only its
    /// earliest, for ``hasDue(at:)``) nor the owners' sets, so that the sweeper's next pop and
    /// the next owner's key do not copy those whole while the reader holds it. It answers
    /// ``lifetime(of:)``, ``hasExpired(_:at:)``, ``hasDue(at:)`` and the counts as the original
    /// did when it was made; it has nothing to take due and no owners' keys.
    func frozen() -> KeyLifetimes {
        var copy = self
        copy.owned = [:]
        copy.heap = DeadlineHeap()
        if let earliest = earliestDeadline { copy.heap.push(deadline: earliest, key: []) }
        return copy
    }

    /// The keys `owner` holds.
    func keys(ownedBy owner: UInt64) -> [[UInt8]] {
        owned[owner].map { $0.map(\.bytes) } ?? []
    }

    private mutating func disown(_ key: HashedKey, by owner: UInt64) {
        guard var keys = owned.removeValue(forKey: owner) else { return }
        keys.remove(key)
        if !keys.isEmpty { owned[owner] = keys }
    }

    private mutating func rebuildHeap() {
        var fresh = DeadlineHeap()
        for (key, lifetime) in lifetimes where lifetime.deadline != 0 {
            fresh.push(deadline: lifetime.deadline, key: key.bytes)
        }
        heap = fresh
    }
}

/// A binary min-heap of deadlines and their keys. The deadlines have an array of their own, so
/// that sifting compares plain integers (no key is retained to read a deadline) and 8 bytes a
/// level come into cache rather than a whole entry.
struct DeadlineHeap: Sendable {
    private var deadlines: [UInt64] = []
    /// `keys[i]` is the key of `deadlines[i]`.
    private var keys: [[UInt8]] = []

    /// Entries held.
    var count: Int { deadlines.count }

    /// The earliest entry.
    var top: (deadline: UInt64, key: [UInt8])? { deadlines.isEmpty ? nil : (deadlines[0], keys[0]) }

    /// The earliest deadline, `UInt64.max` when empty.
    var earliestDeadline: UInt64 { deadlines.first ?? .max }

    mutating func push(deadline: UInt64, key: [UInt8]) {
        deadlines.append(deadline)
        keys.append(key)
        withBuffers { deadlines, keys in
            var child = deadlines.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard deadlines[child] < deadlines[parent] else { break }
                Self.swap(child, parent, deadlines, keys)
                child = parent
            }
        }
    }

    mutating func pop() {
        guard !deadlines.isEmpty else { return }
        withBuffers { deadlines, keys in Self.swap(0, deadlines.count - 1, deadlines, keys) }
        deadlines.removeLast()
        keys.removeLast()
        withBuffers { deadlines, keys in
            let count = deadlines.count
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < count && deadlines[left] < deadlines[smallest] { smallest = left }
                if right < count && deadlines[right] < deadlines[smallest] { smallest = right }
                guard smallest != parent else { return }
                Self.swap(parent, smallest, deadlines, keys)
                parent = smallest
            }
        }
    }

    /// Runs `body` over both arrays' storage, so that sifting moves keys without retaining and
    /// releasing each one on the way (an `Array.swapAt` of keys did: most of a sweep's heap time).
    private mutating func withBuffers(_ body: (UnsafeMutableBufferPointer<UInt64>, UnsafeMutableBufferPointer<[UInt8]>) -> Void) {
        deadlines.withUnsafeMutableBufferPointer { deadlines in
            keys.withUnsafeMutableBufferPointer { keys in body(deadlines, keys) }
        }
    }

    /// Swaps entries `a` and `b`: the keys' references are moved, not copied.
    @inline(__always)
    private static func swap(_ a: Int, _ b: Int, _ deadlines: UnsafeMutableBufferPointer<UInt64>, _ keys: UnsafeMutableBufferPointer<[UInt8]>) {
        deadlines.swapAt(a, b)
        keys.swapAt(a, b)
    }

    /// Calls `body` with every entry whose deadline is at or before `now` (a subtree whose root
    /// is later holds none).
    func forEachDue(at now: UInt64, _ body: (UInt64, [UInt8]) -> Void) {
        var stack = deadlines.isEmpty ? [] : [0]
        while let index = stack.popLast() {
            guard deadlines[index] <= now else { continue }
            body(deadlines[index], keys[index])
            let left = 2 * index + 1
            if left < deadlines.count { stack.append(left) }
            if left + 1 < deadlines.count { stack.append(left + 1) }
        }
    }
}
