import ActorKVProtocol
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One namespace: its live map in memory, made durable by an append-only log and compacted into
/// snapshots.
///
/// Reads are served from memory. A write is validated, encoded as one log record, written to the
/// log, and only then applied in memory; under `always` it returns after its record is fsync'd
/// (shared with concurrent writers). Snapshots are written from a copy-on-write copy of the map,
/// off the actor, while reads and writes go on.
///
/// The state every request touches is `@exclusivity(unchecked)`: the actor runs one job at a
/// time, and the runtime's check of each access (a thread-local lookup) showed in a lone
/// request's turn.
///
/// This file holds its state, reads, writes and change feed; key lifetimes (expiry sweeps,
/// ephemeral keys) are in NamespaceLifetimes.swift, compaction in NamespaceCompaction.swift,
/// opening from disk in NamespaceRecovery.swift.
public actor Namespace {
    /// The namespace's name.
    public nonisolated let name: String
    nonisolated let syncer: LogSyncer
    let files: NamespaceFiles
    let options: StoreOptions
    @exclusivity(unchecked) var data: LiveData
    @exclusivity(unchecked) var lastSequence: UInt64
    var active: LogSegment
    /// Where the active segment's records start: after its header (0 in a format-0 segment).
    var activeStart: Int
    var activeLength: Int
    /// The bytes of the active segment's records that the snapshot holds: a compaction that
    /// leaves the active segment in place (see ``HistoryRetention/seals(activeFirst:recordBytes:covered:history:sealBytes:)``)
    /// keeps them there as history. 0 once the segment is sealed.
    var activeCoveredBytes: Int
    /// How much of the active segment is allocated (written, or zeros reserved ahead).
    var activeReserved: Int
    /// The segments before the active one, oldest first: those holding changes after the
    /// snapshot, and those kept as history for change feeds (``HistoryRetention``).
    var olderSegments: [SegmentSpan]
    /// The bytes of the older segments that hold changes after the snapshot (what compaction
    /// would drop); the segments kept only as history are not counted.
    var olderBytes: Int
    /// The sequence number of the active segment's first record (or of the next one written).
    var activeFirstSequence: UInt64
    /// The sequence this life of the namespace began at, empty (``SnapshotCodec/Header/startedEmptyAt``).
    let startedEmptyAt: UInt64
    /// The feed of this namespace's changes, which its followers read.
    public nonisolated let feed: ChangeFeed
    var compactionTask: Task<Void, any Error>?
    /// The wall-clock time of the run of operations being performed (milliseconds since the
    /// epoch) when some key's deadline may have passed by then; 0 otherwise (no key is checked).
    @exclusivity(unchecked) private var runNow: UInt64 = 0
    /// Deletes expired keys while any key has a deadline (``sweepExpired()``).
    @exclusivity(unchecked) var sweeper: Task<Void, Never>?
    /// A sweep asked for by a read that met an expired key.
    var promptSweep: Task<Void, Never>?
    /// When sweeps may run: while keys are due, a share of the time, smaller while requests come.
    var sweepPacing = SweepPacing()
    /// Set while ``expireIfDue()`` deletes every key (its own deletes are runs too).
    var expiring = false
    /// Whether a run was performed, while keys had deadlines, since the last sweep.
    @exclusivity(unchecked) var servedSinceSweep = false
    @exclusivity(unchecked) var statistics: NamespaceStatistics
    @exclusivity(unchecked) var writeFailure: StoreError?
    /// The last attempt to reserve log space ahead failed (logged once, until one succeeds).
    var reservationFailed = false
    @exclusivity(unchecked) var closed = false
    /// Removed from its store (``detachForRemoval(unregister:)``): closed, and empty; the store
    /// runs what reaches it late on the namespace's next life instead.
    @exclusivity(unchecked) var removed = false
    /// ``removed``, readable from any thread (``isDetached``).
    private nonisolated let detachedFlag = Atomic<Bool>(false)
    /// Whether this namespace was removed from its store, renamed away or replaced by a RENAME
    /// or COPY (``Store/removeNamespace(_:)``, ``Store/renameNamespace(_:to:replacing:)``,
    /// ``Store/copyNamespace(_:to:replacing:)``): it then holds no key and refuses writes, and
    /// its name, if it names anything, names another namespace, which ``Store/namespace(_:)``
    /// gives. A ``Repository`` made from a store goes on to that one by itself.
    public nonisolated var isDetached: Bool { detachedFlag.load(ordering: .acquiring) }

    /// Marks this namespace removed (``isDetached``), in the step that detaches it.
    func markDetached() {
        removed = true
        detachedFlag.store(true, ordering: .releasing)
    }
    /// The planner's arrays, kept from one run to the next (``WritePlanner/Scratch``).
    @exclusivity(unchecked) private var plannerScratch = WritePlanner.Scratch()
    /// The random numbers of HRANDFIELD's draws, seeded at the first.
    private lazy var drawGenerator = DrawGenerator()
    /// When this namespace was opened (wall-clock seconds): the periodic compaction counts from
    /// here when its snapshot is older.
    nonisolated let openedAt = UInt64(time(nil))
    /// Kept alive with this namespace: the directory lock and the background fsync must outlive
    /// the `Store` object if the namespace does.
    private let keeper: Housekeeper
    /// Where this namespace's code runs (see ``unownedExecutor``).
    private nonisolated let executor: UnownedSerialExecutor
    /// Lends its default-actor executor when ``StoreOptions/serialExecutor`` is nil.
    private nonisolated let lender: ExecutorLender

    /// The executor this namespace's code runs on: ``StoreOptions/serialExecutor`` when it is set
    /// (the server's event loop, which then runs requests here synchronously), otherwise that of
    /// a default actor of its own, as if the namespace were a default actor itself.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor }

    init(name: String, files: NamespaceFiles, options: StoreOptions, recovered r: RecoveredNamespace, keeper: Housekeeper,
         feed: ChangeFeed) {
        let lender = ExecutorLender()
        self.lender = lender
        executor = options.serialExecutor?.asUnownedSerialExecutor() ?? lender.unownedExecutor
        self.keeper = keeper
        self.name = name
        self.files = files
        self.options = options
        data = r.data
        lastSequence = r.lastSequence
        active = r.active
        activeStart = r.activeStart
        activeLength = r.activeLength
        activeCoveredBytes = r.activeCoveredBytes
        activeReserved = r.activeFileSize
        olderSegments = r.olderSegments
        olderBytes = r.olderBytes
        activeFirstSequence = r.activeFirstSequence
        startedEmptyAt = r.startedEmptyAt
        self.feed = feed
        // Under `always` a change may be delivered once its fsync completes; under the other
        // policies when its write returns (see `execute`).
        let onDurable: (@Sendable (UInt64) -> Void)?
        if options.durability == .always {
            onDurable = { [feed] sequence in feed.advanceDeliverable(to: sequence) }
        } else {
            onDurable = nil
        }
        let log = options.log
        syncer = LogSyncer(segment: r.active, durableThrough: r.lastSequence, label: name, onDurable: onDurable,
                           onFailure: { failure in log("namespace \(name): \(failure.message)") })
        statistics = NamespaceStatistics(
            name: name, keys: r.data.map.count, liveBytes: r.data.bytes, logBytes: r.olderBytes + r.activeLength - r.activeCoveredBytes,
            lastSequence: r.lastSequence, snapshotSequence: r.snapshotSequence, snapshotTime: r.snapshotCreatedAt,
            recordsReplayed: r.recordsReplayed, tornBytesCut: r.tornBytesCut, compactions: 0, ioErrors: 0, failure: nil)
    }

    // MARK: - Reads

    /// The value stored under `key`, or nil.
    public func get(_ key: [UInt8]) -> [UInt8]? {
        startRun()
        guard case .value(let value) = perform(.get(key[...])) else { return nil }
        return value
    }

    /// The value stored under `key` and its version, or nil.
    public func versioned(_ key: [UInt8]) -> VersionedValue? {
        startRun()
        guard case .versioned(let value) = perform(.getVersioned(key[...])) else { return nil }
        return value
    }

    /// The number of the last record written in this namespace: every write makes it larger
    /// (Redis's WATCH, a namespace being the watched key, compares it at EXEC).
    public var sequence: UInt64 { lastSequence }

    /// The number of keys.
    public func count() -> Int {
        startRun()
        guard case .integer(let count) = perform(.count) else { return 0 }
        return count
    }

    /// Every key with its value, version and lifetime, expired or not, in key order, and the last
    /// sequence number: the whole state, for tests that compare it with what the log says it must be.
    /// The namespace's own deadline, when it has one, comes first as an entry of the empty key
    /// (no key is empty), with no value and version 0, as the log writes it.
    func entriesWithLifetimes() -> (sequence: UInt64, entries: [(key: [UInt8], value: [UInt8], version: UInt64, lifetime: Lifetime)]) {
        var entries: [(key: [UInt8], value: [UInt8], version: UInt64, lifetime: Lifetime)] = []
        if data.deadline != 0 { entries.append(([], [], 0, Lifetime(deadline: data.deadline))) }
        data.map.forEach { key, value, version in
            entries.append((key, value, version, data.lifetimes.lifetime(of: key)))
            return true
        }
        return (lastSequence, entries)
    }

    /// The milliseconds left before `key` expires: -1 when it has no deadline, -2 when it is absent.
    public func timeToLive(_ key: [UInt8]) -> Int {
        startRun()
        guard case .integer(let left) = perform(.timeToLive(key)) else { return -2 }
        return left
    }

    /// Up to `limit` entries after `cursor` whose keys start with `prefix`, in key order (a
    /// `limit` below 1 counts as 1: each page makes progress).
    public func scan(from cursor: ScanCursor = .start, prefix: [UInt8] = [], limit: Int = 100) -> ScanPage {
        startRun()
        return scanPage(from: cursor, prefix: prefix, limit: limit)
    }

    /// ``scan(from:prefix:limit:)`` within a run: keys that have expired by ``runNow`` are left
    /// out (a page may then hold fewer than `limit`; its cursor still goes on after the last key
    /// looked at).
    private func scanPage(from cursor: ScanCursor, prefix: [UInt8], limit: Int) -> ScanPage {
        let limit = min(max(1, limit), Int.max - 1)  // limit + 1 below must not overflow
        var found = data.map.entries(after: cursor.afterKey, prefix: prefix, limit: limit + 1)
        var next = ScanCursor.start
        if found.count > limit {
            found.removeLast()
            next = .after(found[found.count - 1].key)
        }
        guard data.lifetimes.hasDeadlines else { return ScanPage(entries: found, next: next) }
        var entries: [KeyValue] = []
        entries.reserveCapacity(found.count)
        // Loops rather than closures given to the standard library: see ``perform(_:version:)``.
        for entry in found where !hasExpired(entry.key) { entries.append(entry) }
        return ScanPage(entries: entries, next: next)
    }

    /// The live entries' `parts`, packed (``Operation/packedEntries(_:within:)``): keys read
    /// in place from the map's leaves, values copied, no array per entry.
    private func packedEntries(_ parts: EntryParts) -> BulkStrings {
        let strings = parts == .both ? data.map.count * 2 : data.map.count
        var packed = BulkStrings(reservingStrings: strings, bytes: parts == .keys ? 0 : data.bytes)
        // A key with a lifetime is marked: only those are looked up, and only once one may be due.
        data.map.pack(parts, into: &packed) { key in runNow != 0 && hasExpired(Array(key.assumingMemoryBound(to: UInt8.self))) }
        return packed
    }

    /// Live entries drawn at random as `draw` says (``Operation/sample(_:)``). One at a time
    /// from the map (``OrderedMap/randomEntry(using:)``, an expired one drawn again), unless
    /// reading them all costs about what the reply does anyway (distinct keys, a third of the
    /// namespace or more) or most entries are expired ones the sweeper has not deleted yet, which
    /// would be drawn again and again.
    private func sample(_ draw: RandomDraw) -> [KeyValue] {
        let total = data.map.count
        let live = total - data.lifetimes.expiredCount(at: runNow)
        guard live > 0 else { return [] }
        guard draw.samples(live: live), live * 4 >= total else {
            return draw.draw(from: scanPage(from: .start, prefix: [], limit: .max).entries, using: &drawGenerator)
        }
        return draw.draw {
            while true {
                guard let (key, entry) = data.map.randomEntry(using: &drawGenerator) else { preconditionFailure("a live entry exists") }
                if !(entry.isMarked && hasExpired(key)) { return KeyValue(key: key, value: entry.value) }
            }
        }
    }

    /// Reads ``runNow`` for a run of operations: the wall clock when a key's deadline may have
    /// passed; 0 (no key is checked) before the earliest deadline or when no key has one.
    /// First, a namespace whose own deadline has passed loses every key (``expireIfDue()``).
    private func startRun() {
        if data.deadline != 0 { expireIfDue() }
        guard data.lifetimes.hasDeadlines else { runNow = 0; return }
        servedSinceSweep = true
        let now = WallClock.milliseconds()
        runNow = data.lifetimes.hasDue(at: now) ? now : 0
    }

    /// Whether `key` has expired by ``runNow``; one that has is noted for prompt deletion.
    private func hasExpired(_ key: [UInt8]) -> Bool {
        guard runNow != 0, data.lifetimes.hasExpired(key, at: runNow) else { return false }
        scheduleSweep()
        return true
    }

    /// `key`'s deadline in milliseconds since the epoch, -1 when it has none, -2 when it is
    /// absent (or has expired).
    private func deadline(of key: [UInt8]) -> Int {
        guard data.map.contains(key), !hasExpired(key) else { return -2 }
        let deadline = data.lifetimes.lifetime(of: key).deadline
        return deadline == 0 ? -1 : Int(clamping: deadline)
    }

    /// ``hasExpired(_:)-(Array)`` for a key that is a slice of a larger buffer.
    private func hasExpired(_ key: ArraySlice<UInt8>) -> Bool {
        guard runNow != 0 else { return false }
        return hasExpired(Array(key))
    }

    // MARK: - Writes

    /// Stores `value` under `key`, durable per the store's policy when it returns.
    public func put(_ key: [UInt8], _ value: [UInt8]) async throws {
        try await single(.put(key: key, value: value))
    }

    /// Stores `value` under `key` only if the key's version is `ifVersion` (0: only if the key
    /// is absent), durable per the store's policy when it returns. Returns the key's new version,
    /// or nil when the condition did not hold (nothing was written).
    @discardableResult
    public func put(_ key: [UInt8], _ value: [UInt8], ifVersion: UInt64) async throws -> UInt64? {
        guard case .version(let version) = try await single(.conditionalPut(key: key, value: value[...], ifVersion: ifVersion)) else { return nil }
        return version
    }

    /// Removes `key` only if its version is `ifVersion` (0: only if absent, which removes
    /// nothing). Returns whether the condition held.
    @discardableResult
    public func delete(_ key: [UInt8], ifVersion: UInt64) async throws -> Bool {
        try await apply(steps: [.ifVersion(key: key, ifVersion), .delete(key: key)]) != nil
    }

    /// Adds `delta` to the signed 64-bit decimal integer stored under `key` (an absent key counts
    /// as 0), stores the sum in decimal and returns it; the key keeps its deadline and owner.
    /// Throws ``StoreError/Code/notAnInteger`` or ``StoreError/Code/overflow``, having written nothing.
    @discardableResult
    public func increment(_ key: [UInt8], by delta: Int64 = 1) async throws -> Int64 {
        guard case .integer(let sum) = try await single(.increment(key: key, by: delta)) else {
            preconditionFailure("Namespace: an increment yields an integer")
        }
        return Int64(sum)
    }

    /// Removes keys; returns how many existed.
    @discardableResult
    public func delete(_ keys: [[UInt8]]) async throws -> Int {
        guard case .integer(let n) = try await single(.delete(keys)) else { return 0 }
        return n
    }

    /// Applies all mutations or none, as one log record; per mutation, nil for a put, else whether
    /// the delete removed a key.
    @discardableResult
    public func apply(_ mutations: [Mutation]) async throws -> [Bool?] {
        guard case .batch(let results) = try await single(.batch(mutations.map(BatchStep.init))) else { return [] }
        return results.map { result -> Bool? in
            if case .integer(let existed) = result { return existed == 1 }
            return nil
        }
    }

    /// Applies the steps all-or-nothing as one log record, each seeing the ones before it, and
    /// returns one outcome per step (see ``Outcome/batch(_:)``), or nil when a guard
    /// (``BatchStep/ifVersion(key:_:)``) did not hold. Throws the first refusal (an update that
    /// refused, an invalid key or value, an increment of a non-integer), having applied nothing.
    @discardableResult
    public func apply(steps: [BatchStep]) async throws -> [Outcome]? {
        guard case .batch(let results) = try await single(.batch(steps)) else { return nil }
        return results
    }

    /// Reads `key`'s value, computes its new state with `transform` and writes it, with nothing
    /// in between (the namespace's actor runs it whole); returns the value afterwards. `transform`
    /// gets nil for an absent key and returns the value to store, or nil to delete the key.
    /// Durable per the store's policy when it returns. Throws what `transform` throws, having
    /// written nothing.
    @discardableResult
    public func update(_ key: [UInt8], _ transform: @escaping @Sendable (_ current: [UInt8]?) throws(StoreError) -> [UInt8]?) async throws -> [UInt8]? {
        let update = Update { current in
            do throws(StoreError) {
                guard let value = try transform(current) else { return .delete }
                return .set(value)
            } catch {
                return .refuse(error)
            }
        }
        guard case .value(let value) = try await single(.update(key: key, update)) else { return nil }
        return value
    }

    @discardableResult
    private func single(_ operation: Operation) async throws -> Outcome {
        let run = execute([operation])
        if case .failure(let error) = run.outcomes[0] { throw error }
        try await run.durability.wait()
        return run.outcomes[0]
    }

    /// Runs operations in order, with all their log records written in one write call, and returns
    /// their outcomes. The writes among them are acknowledged only after `durability` is awaited.
    ///
    /// Each write is validated, resolved against the state the writes before it in the run leave,
    /// and encoded (``WritePlanner``); the records are written; then the operations are performed
    /// in order. A write whose record could not be written fails with an `io` error and is not
    /// applied; reads see the effect of every successful write before them.
    ///
    /// A change of the namespace's own deadline (``Operation/setsNamespaceDeadline``) is planned
    /// first in a run of its own, over what the operations before it did, so that it sees
    /// whether keys are left and what deadline they gave: the operations run in parts, cut
    /// before each such change.
    public func execute(_ operations: [Operation]) -> Execution {
        guard operations.count > 1, operations.indices.dropFirst().contains(where: { operations[$0].setsNamespaceDeadline }) else {
            return execute(operations, blindDeletes: false)
        }
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(operations.count)
        var durability = Durability.immediate
        var start = 0
        while start < operations.count {
            var end = start + 1
            while end < operations.count && !operations[end].setsNamespaceDeadline { end += 1 }
            let part = execute(Array(operations[start..<end]), blindDeletes: false)
            outcomes += part.outcomes
            if !part.durability.isImmediate { durability = part.durability }  // a later record's wait covers the earlier ones
            start = end
        }
        return Execution(outcomes: outcomes, durability: durability)
    }

    /// ``execute(_:)``; with `blindDeletes`, a delete deletes and logs every key it names without
    /// looking them up (the namespace's own deletes of expired keys and of an ended owner's).
    ///
    /// Without `applying`, the writes are planned and logged but not applied: a logged write's
    /// outcome is ``Outcome/stored``, and the caller changes the data itself, at once (the
    /// deletes of every key when the namespace's deadline passes: ``expireIfDue()``).
    func execute(_ operations: [Operation], blindDeletes: Bool, applying: Bool = true) -> Execution {
        startRun()
        if !operations.contains(where: { $0.isWrite }) { return executeReads(operations) }
        var planner = WritePlanner(count: operations.count, lastSequence: lastSequence, limits: options.limits,
                                   blocker: writeBlocker(), syncer: syncer, blindDeletes: blindDeletes, scratch: &plannerScratch)
        planner.plan(operations, in: data, now: runNow)
        if planner.hasRecords {
            do {
                try appendToLog(planner.buffer)
                lastSequence = planner.sequence
                syncer.noteWritten(planner.sequence)
                if feed.isFollowed { publish(planner.buffer) }
            } catch {
                planner.failWrites(error)
            }
        }
        var outcomes = planner.takeOutcomes()
        // `versions` shares the planner's written list: scoped so that it lets go of it before
        // `takeScratch` empties the list for reuse (a shared list would be copied instead).
        if applying {
            var versions = RecordNumbers(written: planner.written, after: planner.startSequence)
            performPending(operations, planner.resolved, &versions, &outcomes)
        } else {
            for index in outcomes.indices where outcomes[index] == nil { outcomes[index] = .stored }
        }
        if planner.hasRecords && applying { compactIfDue() }
        if sweeper == nil && hasDeadlines { startSweeper() }
        let wait = !planner.hasRecords || options.durability != .always
            ? Durability.immediate : Durability(syncer: syncer, sequence: planner.sequence)
        let execution = Execution(outcomes: outcomes.map { $0! }, durability: wait)
        plannerScratch = planner.takeScratch(outcomes: consume outcomes)
        return execution
    }

    /// A run of reads only, without a planner: what planning would decide for it (a read whose
    /// key is over the limits fails with that; it writes no record and waits for nothing),
    /// then the reads performed as ``performPending(_:_:_:_:)`` performs them, GETs looked up
    /// together. A lone GET, as one client sends, then costs no planner, no map copy, no run
    /// bookkeeping.
    private func executeReads(_ operations: [Operation]) -> Execution {
        var outcomes: [Outcome?] = []
        swap(&outcomes, &plannerScratch.outcomes)  // its capacity, kept between runs
        let limits = options.limits
        for index in operations.indices {
            // A GET's key checked where it lies: handing the operation itself to the limits
            // copied it out of the array first (a retain and a release of its request's bytes).
            let problem: StoreError?
            if let key = operations[index].getKey {
                problem = limits.problem(withKey: key)
            } else {
                problem = limits.problem(with: operations[index])
            }
            outcomes.append(problem.map { .failure($0) })
        }
        var versions = RecordNumbers(written: [], after: lastSequence)
        performPending(operations, [], &versions, &outcomes)
        if sweeper == nil && hasDeadlines { startSweeper() }
        let execution = Execution(outcomes: outcomes.map { $0! }, durability: .immediate)
        plannerScratch.keep(outcomes: consume outcomes)
        return execution
    }

    /// Performs, in order, the operations that have no outcome yet: applies the writes (those
    /// `resolved` while planning with the mutations and outcome found then) and reads.
    /// Two or more GETs in a row (with nothing between them but operations already decided) look
    /// their keys up together through `OrderedMap.values(forKeys:_:)`, which overlaps their cache
    /// misses; no write comes between them, so they see what they would one at a time.
    ///
    /// Likewise, before a PUT that is followed by more, the next few PUTs' keys are walked
    /// together (`OrderedMap.prefetch(forKeys:)`) so that their cache misses overlap before the
    /// writes themselves run one at a time.
    ///
    /// Each write gives the keys it writes its record's number as their version (`versions`).
    private func performPending(_ operations: [Operation], _ resolved: [WritePlanner.Resolved?],
                                _ versions: inout RecordNumbers, _ outcomes: inout [Outcome?]) {
        var gets: [Int] = []
        var prefetchedThrough = -1
        // By index, not `enumerated()`, which copies each operation out (a retain and a release
        // of its request's bytes) whether or not it is performed here.
        for index in operations.indices where outcomes[index] == nil {
            if !resolved.isEmpty, let write = resolved[index] {
                lookUp(&gets, operations, &outcomes)
                guard write.reads.isEmpty else {
                    outcomes[index] = apply(write, reading: write.reads, version: versions.number(of: index))
                    continue
                }
                if !write.mutations.isEmpty {
                    let version = versions.number(of: index)
                    for mutation in write.mutations { data.apply(mutation, version: version, now: runNow) }
                }
                outcomes[index] = write.outcome
                continue
            }
            if operations[index].isPlainPut, index > prefetchedThrough, index + 1 < operations.count {
                prefetchedThrough = prefetchPuts(from: index, operations, outcomes)
            }
            // A GET that is last with none queued before it runs at once: a lone GET allocates nothing.
            if case .get = operations[index], index + 1 < operations.count || !gets.isEmpty {
                gets.append(index)
                continue
            }
            lookUp(&gets, operations, &outcomes)
            outcomes[index] = perform(operations[index], version: operations[index].isWrite ? versions.number(of: index) : 0)
        }
        lookUp(&gets, operations, &outcomes)
    }

    /// Applies a resolved batch's mutations (numbered `version`), making its `reads` of the whole
    /// namespace between them, each after the mutations of the steps before it; its outcome with
    /// theirs in place.
    private func apply(_ write: WritePlanner.Resolved, reading reads: [WritePlanner.DeferredRead], version: UInt64) -> Outcome {
        guard case .batch(var results) = write.outcome else { return write.outcome }
        var applied = 0
        for read in reads {
            for mutation in write.mutations[applied..<read.after] { data.apply(mutation, version: version, now: runNow) }
            applied = read.after
            results[read.result] = perform(read.read.operation)
        }
        for mutation in write.mutations[applied...] { data.apply(mutation, version: version, now: runNow) }
        return .batch(results)
    }

    /// Hints the keys of up to ``putPrefetchGroup`` PUTs from `start` on that are still to be
    /// performed; returns the index of the last operation looked at.
    private func prefetchPuts(from start: Int, _ operations: [Operation], _ outcomes: [Outcome?]) -> Int {
        var keys: [ArraySlice<UInt8>] = []
        keys.reserveCapacity(Self.putPrefetchGroup)
        var index = start
        while index < operations.count && keys.count < Self.putPrefetchGroup {
            if outcomes[index] == nil, let key = operations[index].plainPutKey { keys.append(key) }
            index += 1
        }
        if keys.count > 1 { data.map.prefetch(forKeys: keys) }
        return index - 1
    }

    /// How many PUTs' walks ``prefetchPuts(from:_:_:)`` starts together: two of the map's
    /// lookup groups, few enough that what they bring in is still in cache when the writes run.
    static let putPrefetchGroup = 16

    /// Performs the GETs at `indices` as one group lookup (or alone if only one) and empties it.
    private func lookUp(_ indices: inout [Int], _ operations: [Operation], _ outcomes: inout [Outcome?]) {
        defer { indices.removeAll(keepingCapacity: true) }
        guard indices.count > 1 else {
            if let index = indices.first { outcomes[index] = perform(operations[index]) }
            return
        }
        let keys = indices.map { index -> ArraySlice<UInt8> in
            guard case .get(let key) = operations[index] else { preconditionFailure("not a GET") }
            return key
        }
        let targets = indices
        guard runNow != 0 else {
            data.map.values(forKeys: keys) { i, value in outcomes[targets[i]] = .value(value) }
            return
        }
        // Some key is due: only those with a lifetime (marked) may have expired.
        data.map.markedValues(forKeys: keys) { i, value, marked in
            outcomes[targets[i]] = .value(marked && hasExpired(keys[i]) ? nil : value)
        }
    }

    /// The value of `key`, nil when it is absent or has expired by ``runNow``; a key's lifetime
    /// is looked up only when its entry is marked as having one.
    private func liveValue(_ key: ArraySlice<UInt8>) -> [UInt8]? {
        guard runNow != 0 else { return data.map[key] }
        guard let entry = data.map.entry(key) else { return nil }
        return entry.isMarked && hasExpired(key) ? nil : entry.value
    }

    /// Performs a read, or a plain write whose record is numbered `version`.
    ///
    /// Its loops are loops, not closures handed to the standard library's `map` or `reduce`:
    /// such a closure, formed here and touching the actor's state, is isolated to the actor,
    /// and Swift 6 checks on each entry to it, at run time, that it runs there (the standard
    /// library is not built in the strict concurrency mode that would let the compiler prove
    /// it). Off any task, as the loop's synchronous runs are, that check asks the executor
    /// itself: 3% of the server's own CPU under MULTI/EXEC, one check per step of each batch.
    private func perform(_ operation: Operation, version: UInt64 = 0) -> Outcome {
        switch operation {
        case .get(let key): return .value(liveValue(key))
        case .getVersioned(let key):
            return .versioned(hasExpired(key) ? nil : data.map.versionedValue(key))
        case .getMany(let keys):
            var values: [Outcome] = []
            values.reserveCapacity(keys.count)
            for key in keys { values.append(.value(liveValue(key))) }
            return .batch(values)
        case .exists(let keys):
            var present = 0
            for key in keys where data.map.contains(key) && !hasExpired(key) { present += 1 }
            return .integer(present)
        case .count: return .integer(data.map.count - data.lifetimes.expiredCount(at: runNow))
        case .memoryUsage:
            guard data.map.count - data.lifetimes.expiredCount(at: runNow) > 0 else { return .integer(0) }
            return .integer(data.memoryEstimate.bytes)
        case .scan(let cursor, let prefix, let limit): return .page(scanPage(from: cursor, prefix: prefix, limit: limit))
        case .sample(let draw): return .page(ScanPage(entries: sample(draw), next: .start))
        case .packedEntries(let parts, let bound):
            guard bound.allows(bytes: data.bytes, keys: data.map.count) else { return .page(scanPage(from: .start, prefix: [], limit: .max)) }
            return .strings(packedEntries(parts))
        case .timeToLive(let key):
            let deadline = deadline(of: key)
            guard deadline > 0 else { return .integer(deadline) }
            return .integer(deadline - min(deadline, Int(clamping: runNow == 0 ? WallClock.milliseconds() : runNow)))
        case .deadlines(let keys):
            var deadlines: [Outcome] = []
            deadlines.reserveCapacity(keys.count)
            for key in keys { deadlines.append(.integer(deadline(of: key))) }
            return .batch(deadlines)
        case .put(let key, let value):
            data.put(key: key, value: value, version: version)
            return .stored
        case .set(let key, let value):
            return .integer(data.put(key: key, value: value, version: version, now: runNow) ? 1 : 0)
        case .delete(let keys):
            var deleted = 0
            for key in keys where data.delete(key, now: runNow) { deleted += 1 }
            return .integer(deleted)
        case .batch(let steps):
            var outcomes: [Outcome] = []
            outcomes.reserveCapacity(steps.count)
            for step in steps { outcomes.append(perform(step, version: version)) }
            return .batch(outcomes)
        case .namespaceDeadline:
            guard data.map.count - data.lifetimes.expiredCount(at: runNow) > 0 else { return .integer(-2) }
            return .integer(data.deadline == 0 ? -1 : Int(clamping: data.deadline))
        case .update, .increment, .conditionalPut, .lifetimePut, .setTimeToLive, .expire, .setAll, .setNamespaceDeadline:
            preconditionFailure("Namespace: a write that reads is resolved while planning, never performed unresolved")
        }
    }

    /// Applies one step of a plain batch (puts, sets and deletes) in the record numbered `version`.
    private func perform(_ step: BatchStep, version: UInt64) -> Outcome {
        switch step {
        case .put(let key, let value):
            data.put(key: key[...], value: value[...], version: version)
            return .stored
        case .set(let key, let value):
            return .integer(data.put(key: key[...], value: value[...], version: version, now: runNow) ? 1 : 0)
        default:
            return .integer(data.apply(step.plainMutation!, version: version, now: runNow) ? 1 : 0)
        }
    }

    /// Hands the records just written (`buffer`, as logged) to the change feed; under a policy
    /// other than `always` they are as durable as promised now, so they may be delivered.
    private func publish(_ buffer: [UInt8]) {
        feed.publish(Change.changes(ofRecords: buffer))
        if options.durability != .always { feed.advanceDeliverable(to: lastSequence) }
    }

    func writeBlocker() -> StoreError? {
        if closed { return StoreError(.closed, "namespace '\(name)' \(removed ? "was removed" : "is closed")") }
        if let writeFailure { return writeFailure }
        if let failure = syncer.failure {
            writeFailure = failure
            statistics.failure = failure.message
            return failure
        }
        return nil
    }

    /// Writes encoded records at the end of the active segment; on failure cuts back what was
    /// partly written so the log stays a sequence of whole records.
    private func appendToLog(_ bytes: [UInt8]) throws(StoreError) {
        if activeLength < activeStart { try writeMissingHeader() }
        reserve(bytes.count)
        do {
            try bytes.withBytes { (raw) throws(Errno) in
                try active.system.pwriteAll(active.fd, raw, at: activeLength, path: active.path)
            }
            activeLength += bytes.count
        } catch {
            statistics.ioErrors += 1
            do {
                try active.system.ftruncate(active.fd, activeLength, path: active.path)
                activeReserved = activeLength
            } catch let truncateError {
                let failure = StoreError(.durabilityLost, "appending to \(active.path) failed (\(error)) and cutting the partial record failed (\(truncateError)); writes are refused until restart")
                writeFailure = failure
                statistics.failure = failure.message
                options.log("namespace \(name): \(failure.message)")
            }
            throw StoreError.io("appending to", active.path, error)
        }
    }

    /// Writes the header of an active segment opened empty without one (its writing failed at
    /// opening, on a full disk), so that records follow a header as in every segment.
    private func writeMissingHeader() throws(StoreError) {
        do {
            try NamespaceFiles.writeHeader(to: active)
            activeLength = activeStart
        } catch {
            statistics.ioErrors += 1
            // A part of the header written is a torn header, which recovery cuts: nothing to undo.
            throw StoreError.io("appending to", active.path, error)
        }
    }

    /// Fills the segment with zeros ahead of a write of `count` bytes when the reservation policy
    /// asks for it. Only a speed-up: if it fails (a full disk), the write appends as usual and
    /// reports its own error.
    private func reserve(_ count: Int) {
        guard let range = options.reservation.fill(appendingAt: activeLength, count: count, reserved: activeReserved) else { return }
        let zeros = [UInt8](repeating: 0, count: range.count)
        do {
            try zeros.withBytes { (raw) throws(Errno) in
                try active.system.pwriteAll(active.fd, raw, at: range.lowerBound, path: active.path)
            }
            activeReserved = range.upperBound
            reservationFailed = false
        } catch {
            statistics.ioErrors += 1
            if !reservationFailed {
                options.log("namespace \(name): reserving log space ahead in \(active.path) failed (\(error)); "
                            + "writes are appended without it (each fsync then also commits the file's size) until it succeeds")
            }
            reservationFailed = true
        }
    }

    /// Starts a compaction if none is running and the log has outgrown `--compact-ratio`: after
    /// each write, and after each compaction (writes made while it ran may have grown the log
    /// past the ratio again, with no write after them to look). Not once closing began.
    func compactIfDue() {
        if compactionTask == nil, !closed,
           options.compaction.isDue(logBytes: logBytes, liveBytes: data.bytes) {
            startCompaction()
        }
    }

    // MARK: - Change feed

    /// Adds a follower of this namespace's changes, starting `from` there. Throws
    /// ``StoreError/Code/compacted`` when the changes after a `FROM` sequence are no longer all
    /// held, `invalidArgument` when that sequence is after the last one.
    ///
    /// With ``FollowFrom/snapshot`` it returns once the snapshot's last change is as durable as
    /// the fsync policy promises, so that it shows no write that a crash could undo.
    public func follow(from start: FollowFrom) async throws(StoreError) -> FollowStart {
        if data.deadline != 0 { expireIfDue() }  // a snapshot, or the last sequence, must not hold keys gone by then
        let oldest = oldestSequence
        var start = start
        if case .sequence(var after) = start {
            guard after <= lastSequence else {
                throw StoreError(.invalidArgument, "FROM sequence \(after) is after the last sequence of namespace '\(name)' (\(lastSequence))")
            }
            // A follower that has seen nothing (0) is served from where this life began, empty,
            // while every change since is held; one from before that, or from a change no longer
            // held, may miss keys.
            if after == 0 && startedEmptyAt + 1 == oldest {
                after = startedEmptyAt
                start = .sequence(after)
            }
            guard after + 1 >= oldest else { throw StoreError(.compacted, "oldest available sequence is \(oldest)") }
        }
        let always = options.durability == .always
        feed.addFollower(lastSequence: lastSequence, deliverable: always ? syncer.durableSequence : lastSequence)
        switch start {
        case .now:
            return FollowStart(feed: feed, sequence: lastSequence, snapshot: nil, namespace: self)
        case .sequence(let after):
            return FollowStart(feed: feed, sequence: after, snapshot: nil, namespace: self)
        case .snapshot:
            let sequence = lastSequence
            let snapshot = ChangeSnapshot(map: data.map, lifetimes: data.lifetimes.frozen())
            if always {
                do { try await syncer.waitDurable(sequence) } catch {
                    feed.removeFollower()
                    throw error as? StoreError ?? StoreError(.io, "\(error)")
                }
            }
            return FollowStart(feed: feed, sequence: sequence, snapshot: snapshot, namespace: self)
        }
    }

    /// Where this namespace's history is now: every segment kept, the active one last.
    public func historySource() -> HistorySource {
        HistorySource(files: files, segments: olderSegments + [SegmentSpan(number: active.number, firstSequence: activeFirstSequence, bytes: activeLength)])
    }

    /// The changes after `cursor` through `upper` from the log files, about `maxBytes` of them,
    /// going on from `position` when that is where the last read stopped (see
    /// ``ChangeHistory/read(_:after:through:maxBytes:from:)``). Reads off the actor.
    public nonisolated func readHistory(after cursor: UInt64, through upper: UInt64, maxBytes: Int,
                                        from position: HistoryPosition?) async throws(StoreError) -> ChangeHistory.Chunk {
        let source = await historySource()
        return try await BlockingIO.run { () throws(StoreError) in
            try ChangeHistory.read(source, after: cursor, through: upper, maxBytes: maxBytes, from: position)
        }
    }

    /// The bytes of the log that recovery replays: the segments and records after the snapshot
    /// (what `--compact-ratio` weighs; the history kept besides is not counted).
    var logBytes: Int { olderBytes + activeLength - activeCoveredBytes }

    /// The oldest change still held for followers.
    var oldestSequence: UInt64 { olderSegments.first?.firstSequence ?? activeFirstSequence }

    // MARK: - Lifecycle

    /// Figures for INFO.
    public func currentStatistics() -> NamespaceStatistics {
        var s = statistics
        s.keys = data.map.count
        s.liveBytes = data.bytes
        s.logBytes = logBytes
        s.historyBytes = olderSegments.reduce(0) { $0 + $1.bytes } - olderBytes + activeCoveredBytes
        s.lastSequence = lastSequence
        s.oldestSequence = oldestSequence
        s.followers = feed.followers
        s.changesSent = feed.messagesSent.load(ordering: .relaxed)
        s.followersDropped = feed.followersDropped.load(ordering: .relaxed)
        s.changesHeld = feed.heldBytes
        s.expiringKeys = data.lifetimes.expiringCount
        s.ephemeralKeys = data.lifetimes.ephemeralCount
        s.deadline = data.deadline
        if s.failure == nil { s.failure = syncer.failure?.message }  // a background fsync failed: writes are refused
        if syncer.failedInLoop { s.ioErrors += 1 }
        return s
    }

    /// Waits for a running compaction, fsyncs the log and refuses further writes. Returns why
    /// the log may not be durable (the final fsync failed, or an earlier one did), nil if it is.
    @discardableResult
    public func close() async -> StoreError? {
        closed = true
        sweeper?.cancel()
        promptSweep?.cancel()
        while let running = compactionTask { _ = try? await running.value }
        let syncer = self.syncer
        if let earlier = syncer.failure { return earlier }
        do {
            try await BlockingIO.run { () throws(StoreError) in try syncer.syncNow() }
            let (files, last, name, log) = (self.files, lastSequence, name, options.log)
            _ = try? await BlockingIO.run { () throws(StoreError) in
                do { try CleanCloseMarker.write(through: last, files: files) } catch {
                    log("namespace \(name): writing \(CleanCloseMarker.fileName) failed (\(error)); the next start checks its log as after a crash")
                }
            }
            return nil
        } catch {
            options.log("namespace \(name): the final fsync failed: \(error.message)")
            return error
        }
    }
}

/// A default actor that does nothing but lend its executor to a ``Namespace`` whose store has no
/// ``StoreOptions/serialExecutor``: an actor with a custom executor cannot fall back to the
/// default one otherwise.
private actor ExecutorLender {}
