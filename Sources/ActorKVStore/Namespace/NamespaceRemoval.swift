/// What a namespace hands its store as it is detached for removal (``Store/removeNamespace(_:)``).
struct DetachedNamespace: Sendable {
    /// The sequence the removal takes: that of the change deleting every key it held, the one
    /// after its last; its last itself when it held no key (then nothing changes for anyone).
    let sequence: UInt64
    /// What it held. Handed over whole, so that the namespace's executor (the event loop's, in
    /// the server) neither walks its keys nor frees them: that is done where the store drops it.
    let data: LiveData
    /// Whether anyone followed its changes when it was detached: only then are its keys listed,
    /// for the change that deletes them (``keys``).
    let followed: Bool

    /// The keys it held, in order: those the change of its removal deletes.
    func keys() -> [[UInt8]] {
        var keys: [[UInt8]] = []
        keys.reserveCapacity(data.map.count)
        data.map.forEach { key, _, _ in
            keys.append(key)
            return true
        }
        return keys
    }
}

extension Namespace {
    /// Runs `operations` (``execute(_:)``) unless this namespace was removed; nil then, and the
    /// store runs them on the namespace's next life.
    func executeUnlessRemoved(_ operations: [Operation]) -> Execution? {
        removed ? nil : execute(operations)
    }

    /// Detaches this namespace from its store, for removal. Once no compaction runs, in one step
    /// of its executor: it closes (every write from then on is refused as removed), calls
    /// `unregister` (the store's registry lets go of it, so no request reaches it from then on),
    /// and forgets its keys. Then its log is fsync'd, so that the writes made before are
    /// acknowledged as they would have been. Returns the sequence the removal takes and what
    /// it held, without walking or freeing it here; with `ifEmpty`, nil, and nothing done, if
    /// it holds a key then (checked in that same step, so that no write can come between).
    func detachForRemoval(ifEmpty: Bool = false, unregister: @Sendable () -> Void) async -> DetachedNamespace? {
        await detachForRemoval(when: { !ifEmpty || $0.map.count == 0 }, unregister: unregister)
    }

    /// ``detachForRemoval(ifEmpty:unregister:)`` if what it holds then meets `condition`
    /// (checked in the step that detaches it); nil, and nothing done, if not.
    func detachForRemoval(when condition: (LiveData) -> Bool, unregister: @Sendable () -> Void) async -> DetachedNamespace? {
        while let running = compactionTask { _ = try? await running.value }
        guard condition(data) else { return nil }
        closed = true
        markDetached()
        sweeper?.cancel()
        promptSweep?.cancel()
        unregister()
        let held = data
        data = LiveData()
        if held.map.count > 0 { lastSequence += 1 }
        let syncer = self.syncer
        _ = try? await BlockingIO.run { () throws(StoreError) in try syncer.syncNow() }
        return DetachedNamespace(sequence: lastSequence, data: held, followed: feed.isFollowed)
    }
}
