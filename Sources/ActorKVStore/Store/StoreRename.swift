extension Store {
    /// What ``renameNamespace(_:to:replacing:)`` did.
    public enum RenameOutcome: Sendable, Equatable {
        /// The source's keys are the target's now, and the source is gone.
        case renamed
        /// The source holds no key (or does not exist): nothing was done.
        case noSource
        /// Not `replacing`, and the target holds a key: nothing was done.
        case targetExists
    }

    /// Renames namespace `source` to `target` (Redis's `RENAME`, or `RENAMENX` without
    /// `replacing`): every key of `source`, with its value and lifetime, and its own deadline,
    /// becomes `target`'s, whose keys are dropped first; `source` is gone. Atomic and durable
    /// when it returns: after a crash or power loss from then on the rename has happened, and
    /// before, nothing has (``RenameJournal``).
    ///
    /// Numbers go on, as after a removal: every key of the target is versioned at one new
    /// sequence, after every version either name ever had and after the ``sequenceFloor``
    /// (which it raises), so a version read before guards nothing afterwards. Followers of
    /// either name are told as if it were removed (the change deleting its keys, then the end
    /// of their stream); a follower resuming into the target's new life gets `compacted`, its
    /// history starting with the rename. Requests for either name wait meanwhile.
    ///
    /// Refused (`invalidArgument`, nothing done) when `source` holds keys of a connection
    /// (``Lifetime/owner``): their owner releases them by namespace name. The same name twice:
    /// `renamed` if it holds a key (nothing to do), as Redis answers.
    @discardableResult
    public func renameNamespace(_ source: String, to target: String, replacing: Bool) async throws(StoreError) -> RenameOutcome {
        let source = try NamespaceName.validate(Array(source.utf8)), target = try NamespaceName.validate(Array(target.utf8))
        while true {
            guard let from = try await existingNamespace(source) else { return .noSource }
            if source == target { return await from.count() > 0 ? (replacing ? .renamed : .targetExists) : .noSource }
            let to = try await existingNamespace(target)
            guard stillHeld(from, as: source, to, as: target) else { continue }
            removals[source] = []
            removals[target] = []
            defer {
                finishRemoval(of: source)
                finishRemoval(of: target)
            }
            return try await rename(from, to: to, target: target, replacing: replacing)
        }
    }

    /// Whether names `source` and `target` still hold `from` and `to` (nil: nothing on disk),
    /// neither of them being removed, renamed or copied onto: either may have been while the
    /// caller waited to open them, and then it looks again.
    func stillHeld(_ from: Namespace, as source: String, _ to: Namespace?, as target: String) -> Bool {
        removals[source] == nil && removals[target] == nil && openNamespace(source) === from
            && (to.map { openNamespace(target) === $0 } ?? !onDisk.contains(target))
    }

    /// Detaches both namespaces (the target first: it is only dropped) and moves the source's
    /// keys to the target. When something stops it before the journal is written, nothing has
    /// happened: both names open again from their files, which their detaching fsync'd.
    private func rename(_ from: Namespace, to: Namespace?, target: String, replacing: Bool) async throws(StoreError) -> RenameOutcome {
        let source = from.name
        let now = WallClock.milliseconds()
        // The source first, as Redis judges them: RENAMENX of a missing source is an error even
        // onto a target that holds a key. (Judged again as it is detached.)
        guard await from.count() > 0 else { return .noSource }
        var dropped: DetachedNamespace?
        // However this ends, the target's old keys are freed off the loop.
        defer { if let old = dropped.take() { BlockingIO.release(consume old) } }
        if let to {
            dropped = await to.detachForRemoval(when: { replacing || Self.liveKeys($0, at: now) == 0 }, unregister: { [self] in unregister(target) })
            guard dropped != nil else { return .targetExists }
        }
        var refusal: StoreError?
        // Bound once, not as an optional and then unwrapped: a second binding would keep the
        // data alive to the end of this function, and free it here, on the event loop.
        guard let moved = await from.detachForRemoval(when: { data in
            guard Self.liveKeys(data, at: now) > 0 else { return false }
            guard data.lifetimes.ephemeralCount == 0 else {
                refusal = StoreError(.invalidArgument, "namespace '\(source)' holds \(data.lifetimes.ephemeralCount) keys of a connection (EPHEMERAL, locks): those are released by their namespace's name, so it cannot be renamed; nothing was renamed")
                return false
            }
            return true
        }, unregister: { [self] in unregister(source) }) else {
            if let refusal { throw refusal }
            return .noSource
        }
        let base = max(sequenceFloor, moved.sequence, dropped?.sequence ?? 0) + 1
        let journal = RenameJournal(source: source, target: target, staged: RenameJournal.stagedName(for: target))
        // Handed over in a box the writer's thread empties: no second reference stays here.
        let hidden = try await install(StagedContents(map: FrozenMap(moved.data.map), lifetimes: moved.data.lifetimes, deadline: moved.data.deadline),
                                       as: journal, base: base, now: now, replacing: dropped)
        onDisk.remove(source)
        openFailures[source] = nil
        await endFeed(of: source, detached: moved, because: .renamed(to: target))
        let replaced = dropped.map { "; the \($0.data.map.count) keys \(target) held were dropped" } ?? ""
        options.log("namespace \(source): renamed to \(target) (\(moved.data.map.count) keys, each now at version \(base)\(replaced))")
        BlockingIO.release(consume moved)
        await deleteHidden(hidden)
        return .renamed
    }

    /// What a rename or copy writes as the target's new directory.
    struct StagedContents: Sendable {
        /// Emptied on the writer's thread.
        let map: FrozenMap
        let lifetimes: KeyLifetimes
        /// The namespace's own deadline (0: none).
        let deadline: UInt64
    }

    /// Makes `contents` namespace `journal.target`, replacing what `replacing` detached of it:
    /// the new directory written under the journal's hidden name, every key versioned `base`
    /// (the ``sequenceFloor`` raised to it), then the journal written durably, then its steps
    /// taken. Once the journal is written it has happened; if a step fails after that, neither
    /// name can be used until the next start finishes it. Ends the target's followers' stream.
    /// Returns the hidden directories to delete.
    func install(_ contents: StagedContents, as journal: RenameJournal, base: UInt64, now: UInt64,
                 replacing dropped: DetachedNamespace?) async throws(StoreError) -> [String] {
        let (system, directory) = (self.system, self.directory)
        try await BlockingIO.run { () throws(StoreError) in
            try Self.stage(contents, as: journal, base: base, now: now, directory: directory, system: system)
            do throws(StoreError) {
                try SequenceFloor.write(base, directory: directory, system: system)
                try journal.write(directory: directory, system: system)
            } catch {
                Self.deleteDirectory(directory + "/" + journal.staged, parent: directory, system: system, log: { _ in })
                throw error
            }
        }
        sequenceFloor = base
        let hidden: [String]
        do {
            hidden = try await BlockingIO.run { () throws(StoreError) in try journal.takeSteps(directory: directory, system: system) }
        } catch {
            // It has happened (the journal says so): the next start finishes it. Until then
            // neither name can be used.
            if !journal.keepsSource { failed[journal.source] = error }
            failed[journal.target] = error
            throw error
        }
        onDisk.insert(journal.target)
        openFailures[journal.target] = nil
        let reason: FeedEnd = journal.keepsSource ? .replacedByCopy(of: journal.source) : .replacedByRename(of: journal.source)
        if let dropped {
            await endFeed(of: journal.target, detached: dropped, because: reason)
        } else {
            // Followers waiting for a name that did not exist: their stream ends before the
            // base, so that resuming gets COMPACTED rather than miss its keys.
            feeds.withLock { $0.removeValue(forKey: journal.target) }?.end(deleting: [], at: base - 1, because: reason)
        }
        return hidden
    }

    /// Deletes directories taken away, off the loop, logging what it could not delete.
    func deleteHidden(_ hidden: [String]) async {
        let (system, directory, log) = (self.system, self.directory, options.log)
        _ = try? await BlockingIO.run { () throws(StoreError) in
            for path in hidden { Self.deleteDirectory(path, parent: directory, system: system, log: log) }
        }
    }

    /// Writes the target's new directory under the journal's hidden name: a snapshot of
    /// `contents` through sequence `base`, every key versioned `base`, then the directory's entry fsync'd.
    private static func stage(_ contents: StagedContents, as journal: RenameJournal, base: UInt64, now: UInt64, directory: String,
                              system: SystemCalls) throws(StoreError) {
        let path = directory + "/" + journal.staged
        do {
            _ = try system.mkdir(path)
            try system.fsyncDirectory(directory)
        } catch {
            throw StoreError.io("creating directory", path, error)
        }
        let header = SnapshotCodec.Header(namespace: journal.target, lastSequence: base, createdAt: now / 1000, deadline: contents.deadline)
        do {
            _ = try SnapshotWriter.write(contents.map.take(), lifetimes: contents.lifetimes, expiredAt: now, header: header, everyVersion: base,
                                         files: NamespaceFiles(directory: path, system: system))
        } catch {
            deleteDirectory(path, parent: directory, system: system, log: { _ in })
            throw error
        }
    }

    /// How many keys `data` holds that have not expired by `now` (none once its own deadline passed).
    static func liveKeys(_ data: LiveData, at now: UInt64) -> Int {
        if data.deadline != 0 && data.deadline <= now { return 0 }
        return data.map.count - data.lifetimes.expiredCount(at: now)
    }
}
