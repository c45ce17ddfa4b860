/// What a namespace hands its store as it is detached for removal (``Store/removeNamespace(_:)``).
struct DetachedNamespace: Sendable {
    /// The sequence the removal takes: that of the change deleting every key it held, the one
    /// after its last; its last itself when it held no key (then nothing changes for anyone).
    let sequence: UInt64
    /// The keys it held, which that change deletes.
    let keys: [[UInt8]]
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
    /// acknowledged as they would have been. Returns the sequence the removal takes and the
    /// keys it held; with `ifEmpty`, nil, and nothing done, if it holds a key then (checked in
    /// that same step, so that no write can come between).
    func detachForRemoval(ifEmpty: Bool = false, unregister: @Sendable () -> Void) async -> DetachedNamespace? {
        while let running = compactionTask { _ = try? await running.value }
        if ifEmpty && data.map.count > 0 { return nil }
        closed = true
        removed = true
        sweeper?.cancel()
        promptSweep?.cancel()
        unregister()
        var keys: [[UInt8]] = []
        keys.reserveCapacity(data.map.count)
        data.map.forEach { key, _, _ in
            keys.append(key)
            return true
        }
        data = LiveData()
        if !keys.isEmpty { lastSequence += 1 }
        let syncer = self.syncer
        _ = try? await BlockingIO.run { () throws(StoreError) in try syncer.syncNow() }
        return DetachedNamespace(sequence: lastSequence, keys: keys)
    }
}
