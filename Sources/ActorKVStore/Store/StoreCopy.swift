extension Store {
    /// What ``copyNamespace(_:to:replacing:)`` did.
    public enum CopyOutcome: Sendable, Equatable {
        /// The target holds a copy of the source's keys now.
        case copied
        /// The source holds no key (or does not exist): nothing was done.
        case noSource
        /// Not `replacing`, and the target holds a key: nothing was done.
        case targetExists
    }

    /// Copies namespace `source` to `target` (Redis's `COPY`, with `REPLACE` as `replacing`):
    /// `target` holds every key of `source` as it is now, with its value and lifetime, and its
    /// own deadline; the keys `target` held before are dropped. `source` is not changed, and its
    /// requests go on meanwhile. Atomic and durable when it returns: after a crash or power loss
    /// from then on the copy is there whole, and before, nothing has changed (``RenameJournal``).
    /// The source's log is fsync'd first, so the copy holds no write the source could lose.
    ///
    /// The target's numbers go on as after a removal: every key of it is versioned at one new
    /// sequence, after every version it ever had and after the ``sequenceFloor`` (which it
    /// raises). Its followers are told as if it were removed (the change deleting its keys,
    /// then the end of their stream); requests for it wait meanwhile.
    ///
    /// Refused (`invalidArgument`, nothing done) when `source` and `target` are one name, and
    /// when `source` holds keys of a connection (``Lifetime/owner``): those are released by their
    /// namespace's name, and a copy would outlive its owner. Refused (`tooManyNamespaces`) when
    /// `target` would be one namespace too many, as a write creating it would be.
    @discardableResult
    public func copyNamespace(_ source: String, to target: String, replacing: Bool) async throws(StoreError) -> CopyOutcome {
        let source = try NamespaceName.validate(Array(source.utf8)), target = try NamespaceName.validate(Array(target.utf8))
        guard source != target else {
            throw StoreError(.invalidArgument, "source and destination objects are the same: a namespace is not copied onto itself; nothing was copied")
        }
        while true {
            guard let from = try await existingNamespace(source) else { return .noSource }
            let to = try await existingNamespace(target)
            guard stillHeld(from, as: source, to, as: target) else { continue }
            if to == nil, try await !roomForNewNamespace(target) { continue }
            removals[target] = []
            defer { finishRemoval(of: target) }
            return try await copy(from, to: to, target: target, replacing: replacing)
        }
    }

    /// Takes the source's state, detaches the target (only if `replacing`, or it holds no live
    /// key), and writes the copy as the target's new directory. When something stops it before
    /// the journal is written, nothing has happened: the target opens again from its files,
    /// which its detaching fsync'd.
    private func copy(_ from: Namespace, to: Namespace?, target: String, replacing: Bool) async throws(StoreError) -> CopyOutcome {
        let source = from.name
        let now = WallClock.milliseconds()
        var refusal: StoreError?
        guard let copied = try await from.copyForCopying(when: { data in
            guard Self.liveKeys(data, at: now) > 0 else { return false }
            guard data.lifetimes.ephemeralCount == 0 else {
                refusal = StoreError(.invalidArgument, "namespace '\(source)' holds \(data.lifetimes.ephemeralCount) keys of a connection (EPHEMERAL, locks): a copy of them would outlive their owner, so it cannot be copied; nothing was copied")
                return false
            }
            return true
        }) else {
            if let refusal { throw refusal }
            return .noSource
        }
        var dropped: DetachedNamespace?
        // However this ends, the target's old keys are freed off the loop.
        defer { if let old = dropped.take() { BlockingIO.release(consume old) } }
        if let to {
            dropped = await to.detachForRemoval(when: { replacing || Self.liveKeys($0, at: now) == 0 }, unregister: { [self] in unregister(target) })
            guard dropped != nil else { return .targetExists }
        }
        let base = max(sequenceFloor, dropped?.sequence ?? 0) + 1
        let journal = RenameJournal(source: source, target: target, staged: RenameJournal.stagedName(for: target), keepsSource: true)
        let keys = copied.map.count
        let hidden = try await install(StagedContents(map: copied.map, lifetimes: copied.lifetimes, deadline: copied.deadline),
                                       as: journal, base: base, now: now, replacing: dropped)
        let replaced = dropped.map { "; the \($0.data.map.count) keys it held were dropped" } ?? ""
        options.log("namespace \(source): copied to \(target) (\(keys) keys, each at version \(base) there\(replaced))")
        await deleteHidden(hidden)
        return .copied
    }
}
