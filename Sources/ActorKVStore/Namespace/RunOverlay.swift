import ActorKVProtocol

/// What a run's writes are planned over: the namespace's map, lifetimes and own deadline
/// before the run, and the run's wall-clock time (0 until needed when no key has a deadline).
struct Base {
    var map: OrderedMap
    var lifetimes: KeyLifetimes
    var now: UInt64
    var deadline: UInt64 = 0
}

/// The values and versions that the writes planned so far in a run give their keys (nil:
/// deleted), and the lifetimes they give them, over the state they are not applied to yet.
struct RunOverlay {
    private var entries: [HashedKey: VersionedValue?] = [:]
    /// Lifetimes given by the run's writes (a put or delete after one removes it again).
    private var lifetimes: [HashedKey: Lifetime] = [:]
    /// Set once nothing will read what is noted from now on (the run's last operation is
    /// planned): notes are then dropped, sparing their tables.
    var ignoresNotes = false
    /// The room the first note makes, then 0 (``init(capacity:)``).
    private var capacity: Int

    /// An overlay that notes nothing yet, with room for about `capacity` keys once it notes one:
    /// a run's writes (INCRs of as many keys as it has operations) would otherwise grow its table
    /// a doubling at a time, rehashing each key again at every step. Made only then: a run whose
    /// conditional writes all fail (a lock's refused acquires) allocates no table.
    init(capacity: Int = 0) {
        self.capacity = capacity
    }

    /// Notes what `mutation`, in the record numbered `version`, does.
    mutating func note(_ mutation: Mutation, version: UInt64) {
        if ignoresNotes { return }
        if capacity > 0 {
            entries.reserveCapacity(capacity)
            capacity = 0
        }
        switch mutation {
        case .put(let key, let value):
            entries[HashedKey(key)] = .some(VersionedValue(value: value, version: version))
            if !lifetimes.isEmpty { lifetimes[HashedKey(key)] = nil }
        case .delete(let key):
            entries[HashedKey(key)] = .some(nil)
            if !lifetimes.isEmpty { lifetimes[HashedKey(key)] = nil }
        case .lifetime(let key, _) where key.isEmpty:
            return  // the namespace's own deadline: no key's
        case .lifetime(let key, let lifetime):
            lifetimes[HashedKey(key)] = lifetime
        }
    }

    /// The lifetime of `key` after the noted writes: one they gave it, none if they wrote it
    /// without one, else what `base` holds.
    func lifetime(of key: [UInt8], in base: Base) -> Lifetime {
        notedLifetime(key) ?? base.lifetimes.lifetime(of: key)
    }

    /// The lifetime the noted writes left `key`: one they gave it, ``Lifetime/none`` if they
    /// wrote it without one, nil if none of them touched it.
    func notedLifetime(_ key: [UInt8]) -> Lifetime? {
        if entries.isEmpty && lifetimes.isEmpty { return nil }
        let hashed = HashedKey(key)
        if let lifetime = lifetimes[hashed] { return lifetime }
        return entries[hashed] != nil ? Lifetime.none : nil
    }

    /// Whether a noted write gave some key a lifetime.
    var hasLifetimes: Bool { !lifetimes.isEmpty }

    /// Notes what each of `mutations`, all in the record numbered `version`, does, in order.
    mutating func note<C: Collection<Mutation>>(_ mutations: C, version: UInt64) {
        for mutation in mutations { note(mutation, version: version) }
    }

    /// What the noted writes left under `key`: nil if none of them touched it, `.some(nil)` if
    /// the last one deleted it.
    func noted(_ key: [UInt8]) -> VersionedValue?? { entries.isEmpty ? nil : entries[HashedKey(key)] }

    /// ``entry(of:in:)``, and whether the key may have a lifetime to look up: one read from
    /// `base` has a marked map entry (a key has a lifetime exactly when it has), or the noted
    /// writes gave some key one. False spares the lifetime tables' lookups.
    func entryAndMark(of key: [UInt8], in base: Base) -> (entry: VersionedValue?, mayHaveLifetime: Bool) {
        if !entries.isEmpty, let noted = entries[HashedKey(key)] { return (noted, !lifetimes.isEmpty) }
        if base.lifetimes.hasExpired(key, at: base.now) { return (nil, false) }
        guard let entry = base.map.entry(key) else { return (nil, false) }
        // A noted PEXPIRE or PERSIST gives a key a lifetime without noting its value.
        return (VersionedValue(value: entry.value, version: entry.version), entry.isMarked || !lifetimes.isEmpty)
    }

    /// The value and version under `key` after the noted writes, reading `base` where they did
    /// not touch it (a key whose deadline has passed is absent).
    func entry(of key: [UInt8], in base: Base) -> VersionedValue? {
        entryAndMark(of: key, in: base).entry
    }
}
