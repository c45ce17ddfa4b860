import ActorKVProtocol
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// The registry of a data directory's namespaces: opens each lazily, keeps one actor per
/// namespace, and closes them all on shutdown.
///
/// Opening takes an exclusive lock on the directory, so a second process gets a `locked` error.
/// A namespace whose files are corrupt stays unavailable (every call for it throws the `corrupt`
/// error naming file and offset) while the others keep working.
public actor Store {
    /// The data directory.
    public nonisolated let directory: String
    /// The options every namespace uses.
    public nonisolated let options: StoreOptions
    /// The syscalls this store's files are touched through (with its ``StoreOptions/faults``).
    nonisolated let system: SystemCalls
    /// The directory lock and the background work, shared with every namespace opened here.
    nonisolated let keeper: Housekeeper
    /// The namespaces in the data directory (open or not).
    var onDisk: Set<String>
    private var opening: [String: Task<Namespace, any Error>] = [:]
    /// Namespaces whose files are corrupt: unavailable until the server restarts.
    var failed: [String: StoreError] = [:]
    /// Namespaces that exist but could not be opened for another reason (a file's permissions,
    /// no space, no file descriptor left): the next access tries again; until it succeeds they
    /// are reported unavailable with this error.
    var openFailures: [String: StoreError] = [:]
    /// The failures to open namespaces that were logged last, by name, so that one repeated on
    /// every request (a full disk) is logged once a while rather than thousands of times.
    private var loggedFailures = RepeatedLines()
    /// The open namespaces. One is never replaced, and is removed only on the serial executor's
    /// thread when there is one (``unregister(_:)``: ``RecentNamespaces`` relies on it).
    private nonisolated let openNamespaces = Mutex<[String: Namespace]>([:])
    /// What ``executeNow(_:inNamespace:)`` found last, on the serial executor's thread.
    private nonisolated let recentlyRun = RecentNamespaces()
    var isClosed = false
    /// The sequence a namespace created from now on numbers its first write after
    /// (``SequenceFloor``): the highest a removed namespace reached; 0 if none was ever removed.
    var sequenceFloor: UInt64
    /// The namespaces being removed, and who waits for that to finish before opening the name.
    var removals: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// Every namespace's change feed, made when the namespace opens or someone follows it first.
    nonisolated let feeds = Mutex<[String: ChangeFeed]>([:])
    /// Told the name of each namespace whose followers have new changes to read.
    public nonisolated let changeListener = ChangeListener()

    /// Opens (creating if needed, mode 0700) the data directory and locks it.
    ///
    /// Throws `locked` if another process holds it, `unsafeDirectory` if other users may write to
    /// it or another user owns it (unless ``StoreOptions/allowSharedDirectory``), `io` if it cannot
    /// be created or read.
    public init(directory: String, options: StoreOptions = StoreOptions()) throws(StoreError) {
        let system = SystemCalls(faults: options.faults)
        try Self.prepare(directory: directory, options: options, system: system)
        self.directory = directory
        self.options = options
        self.system = system
        keeper = Housekeeper(lock: try DirectoryLock(directory: directory, writingPID: true, system: system),
                             everysec: options.durability == .everysec, compactionInterval: options.compaction.interval,
                             automatic: options.housekeepingTicks)
        try RenameJournal.finish(in: directory, system: system, log: options.log)
        onDisk = Set(try Self.namespaceDirectories(in: directory, system: system))
        sequenceFloor = try SequenceFloor.read(directory: directory, system: system)
        Self.deleteRemovedLeftovers(in: directory, system: system, log: options.log)
    }

    /// The namespaces in a data directory: its subdirectories whose names are valid namespace names.
    static func namespaceDirectories(in directory: String, system: SystemCalls) throws(StoreError) -> [String] {
        do {
            return try system.listDirectory(directory).filter { name in
                NamespaceName.problem(with: Array(name.utf8)) == nil
                    && (try? SystemCalls.status(directory + "/" + name)).flatMap { $0 }.map { ($0.st_mode & S_IFMT) == S_IFDIR } == true
            }
        } catch {
            throw StoreError.io("listing", directory, error)
        }
    }

    private static func prepare(directory: String, options: StoreOptions, system: SystemCalls) throws(StoreError) {
        var path = directory.hasPrefix("/") ? "" : "."
        for part in directory.split(separator: "/") {
            let parent = path.isEmpty ? "/" : path
            path += "/" + part
            // A directory created here is durable only once its parent is fsync'd: without that,
            // a power loss could take the new data directory, and every write in it, away.
            do { if try system.mkdir(path) { try system.fsyncDirectory(parent) } } catch {
                throw StoreError.io("creating directory", path, error)
            }
        }
        guard let st = try? SystemCalls.status(directory) else {
            throw StoreError(.io, "data directory \(directory) cannot be read")
        }
        if st.st_mode & 0o022 != 0 && !options.allowSharedDirectory {
            throw StoreError(.unsafeDirectory, "data directory \(directory) is writable by other users (mode \(String(st.st_mode & 0o777, radix: 8))); run chmod go-w on it, or allow it explicitly")
        }
        if st.st_uid != geteuid() && !options.allowSharedDirectory {
            throw StoreError(.unsafeDirectory, "data directory \(directory) is owned by uid \(st.st_uid), not by this process's uid \(geteuid()): its owner could replace the files in it; run as that user or chown the directory, or allow it explicitly")
        }
    }

    /// Refuses a namespace directory that is a symbolic link or not a directory (its files would
    /// be written elsewhere) and, unless shared directories are allowed, one that another user
    /// owns or that others may write to.
    static func checkNamespaceDirectory(_ path: String, allowShared: Bool) throws(StoreError) {
        let st: stat?
        do { st = try SystemCalls.linkStatus(path) } catch { throw StoreError.io("reading", path, error) }
        guard let st else { throw StoreError(.io, "namespace directory \(path) does not exist") }
        guard st.st_mode & S_IFMT == S_IFDIR else {
            let what = st.st_mode & S_IFMT == S_IFLNK ? "a symbolic link" : "not a directory"
            throw StoreError(.unsafeDirectory, "namespace directory \(path) is \(what); refusing to use it")
        }
        if !allowShared && (st.st_uid != geteuid() || st.st_mode & 0o022 != 0) {
            throw StoreError(.unsafeDirectory, "namespace directory \(path) is owned by uid \(st.st_uid) with mode \(String(st.st_mode & 0o777, radix: 8)): others could replace its files; refusing to use it")
        }
    }

    /// The namespace if it is open already, without waiting on the registry (the server's fast path).
    public nonisolated func openNamespace(_ name: String) -> Namespace? {
        openNamespaces.withLock { $0[name] }
    }

    /// Runs `operations` in order on the namespace `name` (see ``Namespace/execute(_:)``).
    ///
    /// A namespace that does not exist is created only by an operation that may write something
    /// valid: a PUT, a batch that puts or updates, an update. Otherwise the operations see it
    /// empty (reads find nothing, deletes remove nothing) and it is not created. If the namespace
    /// cannot be opened (its files are corrupt, the store is closed), every operation fails with
    /// that error.
    /// A namespace removed meanwhile is not written: the operations run on what the name holds
    /// after the removal.
    public nonisolated func execute(_ operations: [Operation], inNamespace name: String) async -> Execution {
        while true {
            let namespace: Namespace?
            var floor: UInt64 = 0
            do {
                if let open = openNamespace(name) {
                    namespace = open
                } else {
                    (namespace, floor) = try await openForExecution(name, operations)
                }
            } catch {
                return Execution(outcomes: operations.map { _ in .failure(error) }, durability: .immediate)
            }
            guard let namespace else {
                return Execution(outcomes: operations.map { outcomeInMissingNamespace($0, floor: floor) }, durability: .immediate)
            }
            if let execution = await namespace.executeUnlessRemoved(operations) { return execution }
        }
    }

    /// Runs `operations` on namespace `name` at once, as ``execute(_:inNamespace:)`` would, when
    /// the namespace is open and runs on ``StoreOptions/serialExecutor``; nil otherwise (then use
    /// ``execute(_:inNamespace:)``). Call it only where that executor's code may run (the server's
    /// event-loop thread, between the executor's jobs): the executor's `checkIsolated()` traps
    /// anywhere else.
    public nonisolated func executeNow(_ operations: [Operation], inNamespace name: String) -> Execution? {
        guard let executor = options.serialExecutor else { return nil }
        // What `assumeIsolated` does, without its closure's context (two allocations per turn):
        // check that this runs where the namespace's executor runs code, then call the isolated
        // function as a plain one. The executor's own check, asked directly: the runtime's
        // (`preconditionIsolated`) first looks for a current task and executor, finds neither
        // between jobs, and only then asks it (4% of one client's turn in profiles). Checked
        // first: `recentlyRun` is this thread's alone.
        executor.checkIsolated()
        let namespace: Unmanaged<Namespace>
        if let recent = recentlyRun.namespace(named: name) {
            namespace = recent
        } else {
            guard let open = openNamespace(name) else { return nil }
            recentlyRun.remember(open, as: name)
            namespace = .passUnretained(open)
        }
        typealias Isolated = (isolated Namespace, [Operation]) -> Execution
        let execute = unsafeBitCast(executeIsolated as Isolated, to: ((Namespace, [Operation]) -> Execution).self)
        // Not retained for the call: the registry holds every open namespace for the store's life.
        return namespace._withUnsafeGuaranteedRef { execute($0, operations) }
    }

    /// The namespace `operations` run on when it is not open: opened, once a removal of it has
    /// finished, or created if one of the operations may write something valid where nothing
    /// exists yet; nil when it does not exist. With the ``sequenceFloor`` the decision was made
    /// on, which the guards of operations on a namespace that does not exist are judged by.
    private func openForExecution(_ name: String, _ operations: [Operation]) async throws(StoreError) -> (Namespace?, UInt64) {
        await waitForRemoval(of: try NamespaceName.validate(name))
        let floor = sequenceFloor
        let create = operations.contains { $0.mayCreateNamespace(floor: floor) && options.limits.problem(with: $0) == nil }
        return (try await open(name, create: create), floor)
    }

    /// Waits until no removal of namespace `name` runs.
    private func waitForRemoval(of name: String) async {
        while removals[name] != nil { await withCheckedContinuation { removals[name]!.append($0) } }
    }

    /// What an operation yields in a namespace that does not exist (and that it does not create),
    /// `floor` being the sequence such a namespace stands at.
    private nonisolated func outcomeInMissingNamespace(_ operation: Operation, floor: UInt64) -> Outcome {
        if let problem = options.limits.problem(with: operation) { return .failure(problem) }
        switch operation {
        case .get: return .value(nil)
        case .getVersioned: return .versioned(nil)
        case .getMany(let keys): return .batch(keys.map { _ in .value(nil) })
        case .exists, .count, .memoryUsage, .delete, .setTimeToLive, .setNamespaceDeadline: return .integer(0)
        case .timeToLive, .namespaceDeadline: return .integer(-2)
        case .expire(let expiry):
            return .batch(expiry.keys.map { _ in expiry.yields == .values ? .value(nil) : .integer(KeyExpiry.Result.absent.rawValue) })
        case .deadlines(let keys): return .batch(keys.map { _ in .integer(-2) })
        case .setAll: return .integer(0)  // FXX: no key exists
        case .lifetimePut: return .conditionFailed  // a version other than 0: no key has it
        case .scan, .sample: return .page(ScanPage(entries: [], next: .start))
        case .packedEntries: return .strings(BulkStrings())
        case .conditionalPut: return .conditionFailed  // a version other than 0: no key has it
        case .batch(let steps):
            // Deletes, reads and guards only, or a guard of a version other than 0, which no key has.
            if !Operation.guardsHoldWhereNothingExists(steps, floor: floor) { return .conditionFailed }
            var outcomes: [Outcome] = []
            outcomes.reserveCapacity(steps.count)
            for step in steps {
                switch step {
                case .ifVersion, .unchangedSince: outcomes.append(.stored)
                case .read(.entries), .read(.sample): outcomes.append(.page(ScanPage(entries: [], next: .start)))
                case .read(.deadline): outcomes.append(.integer(-2))
                case .update(_, let update):
                    // One that cannot store (a read of the key): what it yields of an absent key.
                    let outcome = Self.outcomeOfUpdateWhereAbsent(update)
                    if case .failure = outcome { return outcome }  // a refusal refuses the whole batch
                    outcomes.append(outcome)
                default: outcomes.append(.integer(0))
                }
            }
            return .batch(outcomes)
        case .update(_, let update) where !update.mayStore: return Self.outcomeOfUpdateWhereAbsent(update)
        case .put, .set, .update, .increment: preconditionFailure("Store: a valid write creates its namespace")
        }
    }

    /// What an update that cannot store a value (``Update/mayStore``) yields of an absent key:
    /// its value, none, or its refusal.
    private static func outcomeOfUpdateWhereAbsent(_ update: Update) -> Outcome {
        switch update.compute(nil) {
        case .keep, .delete: return .value(nil)
        case .refuse(let error): return .failure(error)
        case .set: preconditionFailure("Store: an update that cannot store a value stored one")
        }
    }

    /// The names of all namespaces in the directory, sorted.
    public func namespaceNames() -> [String] { onDisk.sorted() }

    /// The change feed of namespace `name` (made on first use; a namespace opened later
    /// publishes into it).
    nonisolated func feed(for name: String) -> ChangeFeed {
        feeds.withLock { feeds in
            if let feed = feeds[name] { return feed }
            let feed = ChangeFeed(namespace: name, lagBytes: options.changesLagBytes, listener: changeListener)
            feeds[name] = feed
            return feed
        }
    }

    /// Adds a follower of namespace `name`'s changes (see ``Namespace/follow(from:)``). A
    /// namespace that does not exist yet can be followed: its first write is change 1.
    public func follow(_ name: String, from start: FollowFrom) async throws(StoreError) -> FollowStart {
        if let namespace = try await existingNamespace(name) { return try await namespace.follow(from: start) }
        // Nothing was written here yet, and no write can come before this returns: a namespace
        // is created on this actor, and takes this feed. Its first write will come after the
        // sequence floor (0 unless a namespace was removed): a follower from before it, but for
        // one that saw nothing yet, may have seen keys of the name's earlier life.
        let floor = sequenceFloor
        if case .sequence(let after) = start {
            guard after <= floor else {
                throw StoreError(.invalidArgument, "FROM sequence \(after) is after the last sequence of namespace '\(name)' (\(floor))")
            }
            guard after == 0 || after == floor else { throw StoreError(.compacted, "oldest available sequence is \(floor + 1)") }
        }
        let feed = feed(for: name)
        feed.addFollower(lastSequence: floor, deliverable: floor)
        return FollowStart(feed: feed, sequence: floor, snapshot: start == .snapshot ? ChangeSnapshot(map: OrderedMap(), lifetimes: KeyLifetimes()) : nil, namespace: nil)
    }

    /// The namespace called `name`, created if it does not exist yet.
    public func namespace(_ name: String) async throws(StoreError) -> Namespace {
        try await open(name, create: true)!
    }

    /// The namespace called `name`, or nil if it does not exist (nothing is created).
    public func existingNamespace(_ name: String) async throws(StoreError) -> Namespace? {
        try await open(name, create: false)
    }

    /// Opens every namespace in the directory (the server does this at start, like Redis loading
    /// its files before answering); returns the errors of those that could not be opened.
    public func openAll() async -> [String: StoreError] {
        for name in onDisk.sorted() { _ = try? await open(name, create: false) }
        let unavailable = failed.merging(openFailures) { corrupt, _ in corrupt }
        if onDisk.count > options.maxNamespaces {
            options.log(Self.overLimitWarning(onDisk: onDisk.count, unavailable: unavailable.count, options: options))
        }
        return unavailable
    }

    /// The warning about a data directory that holds more namespaces than `options` allow, saying
    /// how many of them opened (an unavailable one was logged as it failed).
    static func overLimitWarning(onDisk: Int, unavailable: Int, options: StoreOptions) -> String {
        let opened = unavailable == 0 ? "all were opened, but"
            : "\(onDisk - unavailable) were opened and \(unavailable) are unavailable (see above);"
        return "warning: the data directory holds \(onDisk) namespaces, more than the limit of \(options.maxNamespaces) (\(options.maxNamespacesSource)): \(opened) no new one can be created"
    }

    private func open(_ name: String, create: Bool) async throws(StoreError) -> Namespace? {
        let name = try NamespaceName.validate(name)
        await waitForRemoval(of: name)
        if isClosed { throw StoreError(.closed, "the store is closed") }
        if let ns = openNamespace(name) { return ns }
        if let error = failed[name] { throw error }
        if !create && !onDisk.contains(name) { return nil }
        // Once room was made, the store's state may have moved while it waited: look again.
        if !onDisk.contains(name), try await !roomForNewNamespace(name) { return try await open(name, create: create) }
        let task = opening[name] ?? startOpening(name)
        do {
            return try await task.value
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError(.io, "opening namespace \(name) failed: \(error)")
        }
    }

    /// Whether namespace `name`, not on disk, may be made now: true while there is room under
    /// ``StoreOptions/maxNamespaces``; false once room was made by removing namespaces that hold
    /// no key (the caller looks again: the store's state may have moved meanwhile); throws
    /// `tooManyNamespaces` when there is none to make.
    func roomForNewNamespace(_ name: String) async throws(StoreError) -> Bool {
        guard onDisk.count >= options.maxNamespaces else { return true }
        if options.removesEmptyNamespacesForRoom, await removeEmptyNamespaces(limit: Self.emptyNamespacesRemovedAtOnce) > 0 {
            return false
        }
        throw StoreError(.tooManyNamespaces, "namespace '\(name)' would be one more than the \(options.maxNamespaces) this server holds (\(options.maxNamespacesSource)); nothing was written")
    }

    private func startOpening(_ name: String) -> Task<Namespace, any Error> {
        let files = NamespaceFiles(directory: directory + "/" + name, system: system)
        let options = self.options
        let parent = directory
        let isNew = !onDisk.contains(name)
        onDisk.insert(name)
        let base = firstSequenceBase(of: name)
        let task = Task<Namespace, any Error> {
            do {
                let recovered = try await BlockingIO.run { () throws(StoreError) in
                    try Self.recover(name, files: files, parent: parent, isNew: isNew, base: base, options: options)
                }
                let ns = Namespace(name: name, files: files, options: options, recovered: recovered, keeper: self.keeper,
                                   feed: self.feed(for: name))
                let look = Housekeeper.Look(sequence: recovered.lastSequence, snapshotSequence: recovered.snapshotSequence,
                                            snapshotTime: recovered.snapshotCreatedAt, openedAt: ns.openedAt)
                let (ephemeral, expired) = await ns.endEarlierLifetimes()
                self.finishOpening(name, ns, look: look)
                // The keys it holds once those of the previous run's owners, and those expired, are deleted.
                options.log("namespace \(name): opened: \(await ns.count()) keys, snapshot through sequence \(recovered.snapshotSequence), \(recovered.recordsReplayed) log records replayed, \(recovered.tornBytesCut) torn bytes cut, \(ephemeral) ephemeral keys of the previous run and \(expired) expired keys deleted")
                return ns
            } catch {
                let storeError = error as? StoreError ?? StoreError(.io, "\(error)")
                if let line = self.failOpening(name, storeError, wasNew: isNew) { options.log(line) }
                throw storeError
            }
        }
        opening[name] = task
        return task
    }

    /// Recovers namespace `name` from its files, creating its directory first if it `isNew`. A
    /// creation that fails (no space, no descriptor left, …) removes the directory it made, and
    /// only that one, so that the next attempt starts clean instead of finding an empty
    /// namespace directory (a log segment it made is removed where it was made, in
    /// ``NamespaceFiles/createSegment(_:)``).
    private static func recover(_ name: String, files: NamespaceFiles, parent: String, isNew: Bool, base: UInt64,
                                options: StoreOptions) throws(StoreError) -> RecoveredNamespace {
        var created = false
        do throws(StoreError) {
            if isNew { try createDirectory(files.directory, parent: parent, system: files.system, created: &created) }
            try checkNamespaceDirectory(files.directory, allowShared: options.allowSharedDirectory)
            let recovered = try NamespaceRecovery.recover(name: name, files: files, log: options.log)
            guard recovered.lastSequence == 0 && base > 0 else { return recovered }
            try writeBase(base, of: name, files: files)
            return try NamespaceRecovery.recover(name: name, files: files, log: options.log)
        } catch {
            if created { removeCreatedDirectory(files.directory, parent: parent, system: files.system, log: options.log) }
            throw error
        }
    }

    /// Creates a namespace's directory and makes its entry durable; `created` tells whether the
    /// directory was made here (false: one was there already).
    private static func createDirectory(_ path: String, parent: String, system: SystemCalls, created: inout Bool) throws(StoreError) {
        do {
            created = try system.mkdir(path)
            try system.fsyncDirectory(parent)
        } catch {
            throw StoreError.io("creating namespace directory", path, error)
        }
    }

    /// Removes the directory a failed creation made. Only an empty one goes (`rmdir`): whatever
    /// someone else put in it meanwhile stays, with the directory, and is logged.
    private static func removeCreatedDirectory(_ path: String, parent: String, system: SystemCalls,
                                               log: @Sendable (String) -> Void) {
        do {
            try system.removeDirectory(path)
            try? system.fsyncDirectory(parent)
        } catch {
            log("namespace directory \(path): its creation failed, and removing it failed too (\(error)); it stays")
        }
    }

    private func finishOpening(_ name: String, _ ns: Namespace, look: Housekeeper.Look) {
        opening[name] = nil
        openFailures[name] = nil
        loggedFailures.forget(name)
        openNamespaces.withLock { $0[name] = ns }
        keeper.adopt(ns, look: look)
    }

    /// Notes that namespace `name` failed to open with `error`; returns the line to log, nil
    /// when the same failure was logged within ``RepeatedLines/quietSeconds``.
    private func failOpening(_ name: String, _ error: StoreError, wasNew: Bool) -> String? {
        opening[name] = nil
        if error.code == .corrupt { failed[name] = error }
        // A namespace that could not be created does not exist: the next open creates it again.
        else if wasNew { onDisk.remove(name) }
        else { openFailures[name] = error }
        return loggedFailures.line(for: name, "namespace \(name): UNAVAILABLE: \(error.message)")
    }

    /// The error that keeps a namespace unavailable, if any: its files are corrupt, or its last
    /// attempt to open failed (the next access tries again).
    public func unavailability(of name: String) -> StoreError? { failed[name] ?? openFailures[name] }

    /// Lets go of namespace `name`, which is being removed: on the serial executor's thread when
    /// there is one (the namespace's, where ``detachForRemoval(unregister:)`` runs), so that
    /// ``executeNow(_:inNamespace:)`` never finds it again.
    nonisolated func unregister(_ name: String) {
        _ = openNamespaces.withLock { $0.removeValue(forKey: name) }
        guard let executor = options.serialExecutor else { return }
        executor.checkIsolated()
        recentlyRun.forget(name)
    }

    /// Opens every namespace in the directory, for a backup; returns the errors of those that
    /// cannot be opened.
    func openEveryNamespace() async throws(StoreError) -> [String: StoreError] {
        if isClosed { throw StoreError(.closed, "the store is closed") }
        var unavailable: [String: StoreError] = [:]
        for name in onDisk.sorted() {
            do { _ = try await existingNamespace(name) } catch { unavailable[name] = error }
        }
        return unavailable
    }

    /// Every open namespace now, in name order (read from the registry, not waiting on the store).
    nonisolated func openNamespacesNow() -> [Namespace] {
        openNamespaces.withLock { Array($0.values) }.sorted { $0.name < $1.name }
    }

    /// Statistics of every namespace, sorted by name: those not open yet are opened first; those
    /// that cannot be (``unavailability(of:)``) are left out.
    public func statistics() async -> [NamespaceStatistics] {
        // One that RENAME or COPY made is on disk but not open yet: opened now, as at start.
        for name in onDisk.sorted() where failed[name] == nil && openFailures[name] == nil && openNamespace(name) == nil {
            _ = try? await open(name, create: false)
        }
        var all: [NamespaceStatistics] = []
        for ns in openNamespaces.withLock({ Array($0.values) }) { all.append(await ns.currentStatistics()) }
        return all.sorted { $0.name < $1.name }
    }

    /// Closes every namespace (waiting for compactions, fsyncing logs), stops background work and
    /// releases the directory lock. A store that is never closed keeps the directory locked, and
    /// its namespaces fsync'd in the background, until it and every namespace from it are freed.
    ///
    /// Returns the names of the namespaces whose logs may not be durable (a final fsync failed,
    /// or an earlier one had), in name order; empty when every log is on stable storage.
    @discardableResult
    public func close() async -> [String] {
        isClosed = true
        keeper.stop()
        for task in opening.values { _ = try? await task.value }
        var notDurable: [String] = []
        for ns in openNamespaces.withLock({ Array($0.values) }) where await ns.close() != nil {
            notDurable.append(ns.name)
        }
        keeper.releaseLock()
        return notDurable.sorted()
    }
}

/// ``Namespace/execute(_:)`` from a function isolated by its parameter, for
/// ``Store/executeNow(_:inNamespace:)``.
private func executeIsolated(_ namespace: isolated Namespace, _ operations: [Operation]) -> Execution {
    namespace.execute(operations)
}
