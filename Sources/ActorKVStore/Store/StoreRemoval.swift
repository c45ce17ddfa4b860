#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension Store {
    /// The prefix of the hidden name a removed namespace's directory takes (`.removed-NAME-XXXXXXXX`)
    /// until its files are deleted: a server stopped in between deletes them at its next start.
    static let removedPrefix = ".removed-"

    /// Removes namespace `name`: its keys, its files, and its place among the namespaces (listed
    /// no more, and no longer counted by ``StoreOptions/maxNamespaces``). Returns whether there
    /// was one; false, and nothing done, when there was none.
    ///
    /// In order: the writes made before are acknowledged as they would have been (the log is
    /// fsync'd); the namespace takes no request from then on; the data directory's
    /// ``SequenceFloor`` is raised to the removal's sequence; the namespace's directory is
    /// renamed away (hidden) and the data directory fsync'd — the removal has then happened, and
    /// a crash cannot undo it; its followers are sent a change deleting every key it held,
    /// after which their stream ends (`LAGGING`, naming that change); the hidden directory is
    /// deleted. A request for the name meanwhile waits, then finds it absent, and a write
    /// creates it anew, numbering its first write after the floor: no version or change number
    /// of the earlier life comes back. A ``Namespace`` obtained before refuses writes from then
    /// on ("was removed") and holds no key.
    ///
    /// Throws the namespace's error if it cannot be opened (its files corrupt: it is not
    /// removed), and `io` if the floor or the rename cannot be made durable; then nothing was
    /// removed, and the name's next use opens its files again.
    @discardableResult
    public func removeNamespace(_ name: String) async throws(StoreError) -> Bool {
        while true {
            guard let namespace = try await existingNamespace(name) else { return false }
            // Another removal of it may have begun while this one waited: wait for it, then look again.
            guard removals[namespace.name] == nil else { continue }
            removals[namespace.name] = []
            defer { finishRemoval(of: namespace.name) }
            _ = try await remove(namespace)
            return true
        }
    }

    /// Removes, as ``removeNamespace(_:)`` does, open namespaces that hold no key and that
    /// nobody follows (CHANGES), at most `limit` of them: a write that would create a namespace
    /// past ``StoreOptions/maxNamespaces`` makes room so (Redis clients see a hash without
    /// fields as gone already). Each is checked empty in the step that detaches it, so a write
    /// to it just before is never lost: it keeps the namespace. Returns how many it removed;
    /// stops at the first that fails (logged).
    func removeEmptyNamespaces(limit: Int) async -> Int {
        var removed = 0
        for namespace in openNamespacesNow() where removed < limit {
            let name = namespace.name
            guard removals[name] == nil, openNamespace(name) === namespace,
                  !(feeds.withLock { $0[name]?.isFollowed } ?? false) else { continue }
            removals[name] = []
            defer { finishRemoval(of: name) }
            do {
                guard try await remove(namespace, ifEmpty: true) else { continue }
                removed += 1
            } catch {
                options.log("namespace \(name): removing it, empty, to make room failed: \(error.message)")
                break
            }
        }
        return removed
    }

    /// How many empty namespaces a write at ``StoreOptions/maxNamespaces`` removes at most: room
    /// for that many more, each removal a few fsyncs.
    static let emptyNamespacesRemovedAtOnce = 64

    /// Removes `namespace` (``removeNamespace(_:)``); with `ifEmpty`, only if it holds no key
    /// when it is detached. Whether it was removed.
    private func remove(_ namespace: Namespace, ifEmpty: Bool = false) async throws(StoreError) -> Bool {
        let name = namespace.name
        guard let detached = await namespace.detachForRemoval(ifEmpty: ifEmpty, unregister: { [self] in unregister(name) }) else {
            return false
        }
        let (system, directory, log) = (self.system, self.directory, options.log)
        let floor = max(sequenceFloor, detached.sequence)
        if floor > sequenceFloor {
            try await BlockingIO.run { () throws(StoreError) in try SequenceFloor.write(floor, directory: directory, system: system) }
            sequenceFloor = floor
        }
        let hidden = directory + "/" + Self.removedPrefix + name + "-" + String(UInt32.random(in: .min ... .max), radix: 16)
        try await BlockingIO.run { () throws(StoreError) in
            try Self.takeAway(directory + "/" + name, to: hidden, parent: directory, system: system)
        }
        onDisk.remove(name)
        openFailures[name] = nil
        await endFeed(of: name, detached: detached)
        let reason = ifEmpty ? ", to make room for a new one: it held no key" : ""
        log("namespace \(name): removed (\(detached.data.map.count) keys, last sequence \(detached.sequence)\(reason))")
        BlockingIO.release(consume detached)
        _ = try? await BlockingIO.run { () throws(StoreError) in Self.deleteDirectory(hidden, parent: directory, system: system, log: log) }
        return true
    }

    /// Ends the change feed of `name`, detached for removal (or renamed away, or replaced:
    /// `reason`): its followers get the change deleting every key it held, then the end of
    /// their stream.
    func endFeed(of name: String, detached: DetachedNamespace, because reason: FeedEnd = .removed) async {
        guard let feed = feeds.withLock({ $0.removeValue(forKey: name) }) else { return }
        // Listed off the loop: a store's code runs on its caller's executor, the event loop's.
        let keys = detached.followed ? ((try? await BlockingIO.run { [detached] in detached.keys() }) ?? []) : []
        feed.end(deleting: keys, at: detached.sequence, because: reason)
    }

    /// Ends the removal of `name`: whoever waited to open it goes on.
    func finishRemoval(of name: String) {
        for waiter in removals.removeValue(forKey: name) ?? [] { waiter.resume() }
    }

    /// Renames a namespace's directory `path` to `hidden` and fsyncs `parent`: the moment its
    /// removal happens. If the fsync fails the rename is undone, as far as it can be.
    private static func takeAway(_ path: String, to hidden: String, parent: String, system: SystemCalls) throws(StoreError) {
        do { try system.rename(path, hidden) } catch { throw StoreError.io("renaming", path, error) }
        do { try system.fsyncDirectory(parent) } catch {
            try? system.rename(hidden, path)
            throw StoreError.io("syncing", parent, error)
        }
    }

    /// Deletes the directory of a removed namespace and every file in it, then fsyncs `parent`;
    /// logs what it could not delete (the next start tries again).
    static func deleteDirectory(_ path: String, parent: String, system: SystemCalls, log: @Sendable (String) -> Void) {
        do {
            for file in try system.listDirectory(path) { try system.unlink(path + "/" + file) }
            try system.removeDirectory(path)
            try system.fsyncDirectory(parent)
        } catch {
            log("deleting \(path), a removed namespace's files, failed (\(error)); the next start tries again")
        }
    }

    /// Deletes what removals left behind in the data directory `directory` (a server stopped
    /// between a removal and the deletion of its files).
    static func deleteRemovedLeftovers(in directory: String, system: SystemCalls, log: @Sendable (String) -> Void) {
        deleteHiddenDirectories(in: directory, prefix: removedPrefix, system: system, log: log,
                                what: "the files of a namespace removed before the server stopped")
    }

    /// Deletes every directory in data directory `directory` whose name starts with `prefix`,
    /// but `kept`, logging each as `what`.
    static func deleteHiddenDirectories(in directory: String, prefix: String, keeping kept: String? = nil, system: SystemCalls,
                                        log: @Sendable (String) -> Void, what: String) {
        guard let names = try? system.listDirectory(directory) else { return }
        for name in names where name.hasPrefix(prefix) && name != kept {
            let path = directory + "/" + name
            guard case .some(.some(let st)) = try? SystemCalls.linkStatus(path), st.st_mode & S_IFMT == S_IFDIR else { continue }
            deleteDirectory(path, parent: directory, system: system, log: log)
            log("deleted \(path), \(what)")
        }
    }

    /// The sequence of the last write to namespace `name` (Redis's WATCH compares it at EXEC);
    /// for a namespace that does not exist, the ``sequenceFloor``, which every removal raises:
    /// a name removed, or created and removed, since the WATCH is seen as written.
    public func lastSequence(ofNamespace name: String) async throws(StoreError) -> UInt64 {
        guard let namespace = try await existingNamespace(name) else { return sequenceFloor }
        return await namespace.sequence
    }

    /// The sequence namespace `name`, about to be created, numbers its first write after: the
    /// one its waiting followers were told (they followed it while it did not exist, and
    /// expect its changes from there), or else the ``sequenceFloor``.
    func firstSequenceBase(of name: String) -> UInt64 {
        let waiting = feeds.withLock { $0[name] }
        if let waiting, waiting.isFollowed { return waiting.windowStart - 1 }
        return sequenceFloor
    }

    /// Writes an empty snapshot through sequence `base` into a namespace that holds nothing yet,
    /// so that its first write is numbered `base + 1` and its history starts there, empty
    /// (``SnapshotCodec/Header/startedEmptyAt``).
    static func writeBase(_ base: UInt64, of name: String, files: NamespaceFiles) throws(StoreError) {
        let header = SnapshotCodec.Header(namespace: name, lastSequence: base, createdAt: UInt64(time(nil)), startedEmptyAt: base)
        _ = try SnapshotWriter.write(OrderedMap(), lifetimes: KeyLifetimes(), expiredAt: 0, header: header, files: files)
    }
}
