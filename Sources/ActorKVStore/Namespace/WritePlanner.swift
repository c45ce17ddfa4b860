import ActorKVProtocol

/// Plans the writes of one run of operations, in order: validates each, resolves it against the
/// state that the writes before it in the same run leave, and encodes its log record. All the
/// run's records go into one buffer, so the namespace writes them with one call and only then
/// applies them, in order (see `Namespace.execute`). No I/O, and nothing is applied here.
///
/// A plain PUT, DEL or batch of puts and deletes needs no resolving: its record is encoded from
/// the request as it is, and what it yields (whether a deleted key existed) is found when it is
/// applied. A write that reads state first (an ``Update``, or a batch with one) is resolved here
/// against a ``RunOverlay`` of the run's earlier writes, so that it sees them although they are
/// not applied yet; its mutations and outcome are kept in ``resolved`` for the apply step. The
/// overlay is built only when the first such write comes: plain runs never pay for it.
struct WritePlanner {
    /// A write resolved while planning: the mutations to apply and what it yields.
    struct Resolved {
        /// The mutations, in order (empty: nothing to write).
        var mutations: Mutations
        /// The operation's outcome once applied.
        var outcome: Outcome
        /// A batch's reads of the whole namespace (``BatchStep/read(_:)``), made when it is
        /// applied, between its mutations; their places in ``outcome`` hold ``Outcome/stored``
        /// until then.
        var reads: [DeferredRead] = []
    }

    /// A batch's read of the whole namespace, made while its mutations are applied: once the
    /// first `after` of them are, its outcome goes to place `result` of the batch's outcomes.
    struct DeferredRead {
        var read: NamespaceRead
        var after: Int
        var result: Int
    }

    /// A resolved write's mutations: none, one or two held inline (an INCR, a conditional put,
    /// a put with its lifetime: no array to allocate), or a list.
    enum Mutations: RandomAccessCollection {
        case none
        case one(Mutation)
        case two(Mutation, Mutation)
        case many([Mutation])

        var startIndex: Int { 0 }
        var endIndex: Int {
            switch self {
            case .none: 0
            case .one: 1
            case .two: 2
            case .many(let list): list.count
            }
        }
        subscript(position: Int) -> Mutation {
            switch self {
            case .one(let mutation) where position == 0: mutation
            case .two(let first, _) where position == 0: first
            case .two(_, let second) where position == 1: second
            case .many(let list): list[position]
            default: preconditionFailure("WritePlanner.Mutations: no mutation at \(position) of \(count)")
            }
        }
    }

    /// The encoded records, end to end.
    private(set) var buffer: [UInt8] = []
    /// The sequence number of the last record encoded.
    private(set) var sequence: UInt64
    /// The sequence number before the first record: the record of `written[i]` is numbered
    /// `startSequence + i + 1`, the version it gives the keys it writes.
    let startSequence: UInt64
    /// The operations that have a record in ``buffer``, in order.
    private(set) var written: [Int] = []
    /// Per operation: an outcome decided while planning (a refusal), or nil for one that is
    /// still to be performed (a read, a write to apply).
    private(set) var outcomes: [Outcome?]
    /// The writes resolved while planning, by operation index: empty until the first one is,
    /// then one entry per operation (nil: not resolved here).
    private(set) var resolved: [Resolved?] = []
    private var overlay: RunOverlay?
    private let limits: StoreLimits
    private let blocker: StoreError?
    private let syncer: LogSyncer
    /// Whether a ``Operation/delete(_:)`` deletes and logs every key it names without looking
    /// them up: the namespace's own deletes of keys it knows to be there (expired ones, an ended
    /// owner's), which the lookup would take for absent. Otherwise only keys that exist are.
    private let blindDeletes: Bool
    /// How far the log was durable, read from the syncer once, and only if something is written.
    private var durableClaim: UInt64?

    /// A planner for `count` operations after the record numbered `lastSequence`; with a
    /// `blocker`, every write is refused with it. Its arrays are moved out of `scratch` (empty,
    /// with the capacity they kept): see ``takeScratch(outcomes:)``.
    init(count: Int, lastSequence: UInt64, limits: StoreLimits, blocker: StoreError?, syncer: LogSyncer, blindDeletes: Bool = false,
         scratch: inout Scratch) {
        outcomes = []
        swap(&buffer, &scratch.buffer)
        swap(&written, &scratch.written)
        swap(&resolved, &scratch.resolved)
        swap(&outcomes, &scratch.outcomes)
        outcomes.append(contentsOf: repeatElement(nil, count: count))
        sequence = lastSequence
        startSequence = lastSequence
        self.limits = limits
        self.blocker = blocker
        self.syncer = syncer
        self.blindDeletes = blindDeletes
    }

    /// Whether any record was encoded.
    var hasRecords: Bool { !written.isEmpty }

    /// The outcomes, moved out (the planner keeps none): mutating them then copies nothing.
    mutating func takeOutcomes() -> [Outcome?] {
        var taken: [Outcome?] = []
        swap(&taken, &outcomes)
        return taken
    }

    /// The arrays a planner fills, kept between runs by their namespace so that a run does not
    /// allocate them afresh (at one request per run, as many allocations as the request's own).
    struct Scratch {
        var buffer: [UInt8] = []
        var written: [Int] = []
        var resolved: [Resolved?] = []
        var outcomes: [Outcome?] = []

        /// Bytes of records, and entries of the other arrays, beyond which a run's arrays are
        /// let go rather than kept: one large run does not hold its memory for good.
        static let keptBytes = 64 * 1024
        static let keptEntries = 1024

        /// Takes back a run's `outcomes` once read, emptied, with the capacity it keeps.
        mutating func keep(outcomes taken: consuming [Outcome?]) {
            outcomes = consume taken
            outcomes.removeAll(keepingCapacityUpTo: Self.keptEntries)
        }
    }

    /// This run's arrays, emptied, for the next run's planner; `outcomes` are the ones
    /// ``takeOutcomes()`` took, once read. Call it once the run no longer needs them.
    mutating func takeScratch(outcomes taken: consuming [Outcome?]) -> Scratch {
        var scratch = Scratch()
        swap(&scratch.buffer, &buffer)
        swap(&scratch.written, &written)
        swap(&scratch.resolved, &resolved)
        scratch.keep(outcomes: taken)
        scratch.buffer.removeAll(keepingCapacityUpTo: Scratch.keptBytes)
        scratch.written.removeAll(keepingCapacityUpTo: Scratch.keptEntries)
        scratch.resolved.removeAll(keepingCapacityUpTo: Scratch.keptEntries)
        return scratch
    }

    /// Plans every operation, in order, against `data` as the namespace holds it before the run;
    /// `now` (milliseconds since the epoch; 0 when no key has a lifetime) decides which keys have
    /// expired, and the deadlines that PX and EX give.
    mutating func plan(_ operations: [Operation], in data: LiveData, now: UInt64) {
        base = Base(map: data.map, lifetimes: data.lifetimes, now: now, deadline: data.deadline)
        for index in operations.indices { plan(operations[index], at: index, of: operations) }
        // Let go of the namespace's map and lifetimes before the run's writes are applied to
        // them: held here, they would be shared, and each write would copy them first (the
        // map's path, the lifetimes' whole tables).
        base = Base(map: OrderedMap(), lifetimes: KeyLifetimes(), now: base.now)
    }

    /// The state before the run: what the overlay reads beneath the run's own writes.
    private var base = Base(map: OrderedMap(), lifetimes: KeyLifetimes(), now: 0)

    /// The records could not be written: every write planned fails with `error`, and so does every
    /// write resolved against them (what it read will not be there).
    mutating func failWrites(_ error: StoreError) {
        for index in written { outcomes[index] = .failure(error) }
        for index in resolved.indices where resolved[index] != nil { outcomes[index] = .failure(error) }
        written.removeAll()
        resolved.removeAll()
    }

    private mutating func plan(_ operation: Operation, at index: Int, of operations: [Operation]) {
        if let problem = limits.problem(with: operation) {
            outcomes[index] = .failure(problem)
            return
        }
        if overlay == nil && operation.readsBeforeWriting { overlay = replayWritten(operations) }
        // Nothing after the run's last operation reads what it writes: the overlay need not note it.
        if index == operations.count - 1 { overlay?.ignoresNotes = true }
        switch operation {
        case .put(let key, let value), .set(let key, let value):
            let recorded = record(of: index, bodyLength: LogRecordCodec.putBodyLength(key: key, value: value)) { sequence, claim, buffer in
                LogRecordCodec.encodePut(sequence: sequence, key: key, value: value, durableThrough: claim, into: &buffer)
            }
            if recorded, overlay?.ignoresNotes == false { overlay!.note(.put(key: Array(key), value: Array(value)), version: sequence) }
        case .delete(let keys) where blindDeletes:
            if record(keys.lazy.map { .delete(key: $0) }, of: index) { overlay?.note(keys.lazy.map { .delete(key: $0) }, version: sequence) }
        case .delete(let keys):
            resolveDelete(keys, at: index)
        case .batch(let steps) where !operation.readsBeforeWriting:
            let mutations = steps.lazy.map { $0.plainMutation! }
            if record(mutations, of: index) { overlay?.note(mutations, version: sequence) }
        case .batch(let steps):
            resolve(steps, at: index)
        case .update(let key, let update):
            resolve(.update(key: key, update), at: index)
        case .increment(let key, let delta):
            resolve(.increment(key: key, by: delta), at: index)
        case .conditionalPut(let key, let value, let version):
            resolveConditionalPut(key: key, value: value, ifVersion: version, at: index)
        case .lifetimePut(let put):
            resolve(put, at: index)
        case .setTimeToLive(let key, let milliseconds):
            resolveTimeToLive(key: key, milliseconds: milliseconds, at: index)
        case .expire(let expiry):
            resolveLifetimes(.expire(expiry), at: index)
        case .setAll(let setting):
            resolveLifetimes(.setAll(setting), at: index)
        case .setNamespaceDeadline(let change):
            precondition(index == 0, "WritePlanner: a change of the namespace's deadline is planned first in its run")
            let (mutations, outcome) = resolve(change, over: RunOverlay(), after: [], deadline: base.deadline)
            record(mutations, outcome: outcome, at: index)
        case .get, .getVersioned, .exists, .getMany, .count, .memoryUsage, .scan, .sample, .packedEntries, .timeToLive, .deadlines,
             .namespaceDeadline:
            return
        }
    }

    /// The mutations and outcome of `change` to the namespace's own deadline, over the run's
    /// base and a batch's earlier steps (`batch`, whose mutations are `earlier`), the deadline
    /// being `deadline` then: nothing, with 0, when no key is left or the condition does not
    /// hold; else the new deadline, or, a time at or before now, a delete of every key left.
    /// Planned first in its run (see `Namespace.execute`), so the run's overlay is the base.
    private mutating func resolve(_ change: NamespaceDeadline, over batch: RunOverlay, after earlier: [Mutation],
                                  deadline: UInt64) -> (mutations: [Mutation], outcome: Outcome) {
        let now = self.now()
        let holdsKeys = liveCount(over: batch, after: earlier, now: now) > 0
        let (result, target) = change.apply(to: holdsKeys ? deadline : nil, now: now)
        let outcome = Outcome.integer(NamespaceDeadline.reply(to: result))
        switch result {
        case .changed: return ([.namespaceDeadline(target ?? 0)], outcome)
        case .deleted: return (liveKeys(over: batch, after: earlier, now: now).map { .delete(key: $0) }, outcome)
        case .absent, .noDeadline, .conditionNotMet: return ([], outcome)
        }
    }

    /// Whether `key` is in the base and has not expired by `now`.
    private func inBase(_ key: [UInt8], now: UInt64) -> Bool {
        base.map.contains(key) && !base.lifetimes.hasExpired(key, at: now)
    }

    /// How many keys the namespace holds after `earlier`, a batch's mutations so far (noted in
    /// `batch`): the base's unexpired keys, and what those mutations added and removed.
    private func liveCount(over batch: RunOverlay, after earlier: [Mutation], now: UInt64) -> Int {
        var count = base.map.count - base.lifetimes.expiredCount(at: now)
        var seen = Set<[UInt8]>()
        for mutation in earlier {
            let key: [UInt8]
            switch mutation {
            case .put(let written, _), .delete(let written): key = written
            case .lifetime: continue
            }
            guard seen.insert(key).inserted else { continue }
            count += (isNoted(key, in: batch) ? 1 : 0) - (inBase(key, now: now) ? 1 : 0)
        }
        return count
    }

    /// Whether `earlier`, a batch's mutations so far, applied to the base's map, empty it with a
    /// delete from the one at index `start` on (a delete that leaves no key clears the
    /// namespace's deadline: ``LiveData/delete(_:now:)``).
    private func empties(_ earlier: [Mutation], from start: Int) -> Bool {
        var count = base.map.count
        var present: [[UInt8]: Bool] = [:]
        var emptied = false
        for (index, mutation) in earlier.enumerated() {
            switch mutation {
            case .put(let key, _):
                if !(present[key] ?? base.map.contains(key)) { count += 1 }
                present[key] = true
            case .delete(let key):
                if present[key] ?? base.map.contains(key) {
                    count -= 1
                    if count == 0 && index >= start { emptied = true }
                }
                present[key] = false
            case .lifetime:
                continue
            }
        }
        return emptied
    }

    /// Whether `batch` leaves `key` holding a value.
    private func isNoted(_ key: [UInt8], in batch: RunOverlay) -> Bool {
        if case .some(.some) = batch.noted(key) { return true }
        return false
    }

    /// The keys the namespace holds after `earlier` (as ``liveCount(over:after:now:)`` counts
    /// them): the base's unexpired keys those did not delete, then those they put.
    private func liveKeys(over batch: RunOverlay, after earlier: [Mutation], now: UInt64) -> [[UInt8]] {
        var keys: [[UInt8]] = []
        let lifetimes = base.lifetimes
        base.map.forEach { key, _, _ in
            switch batch.noted(key) {
            case .some(.none): break
            case .some(.some): keys.append(key)
            case .none: if !lifetimes.hasExpired(key, at: now) { keys.append(key) }
            }
            return true
        }
        // Then those only the batch holds (a key of the map, expired or not, was judged above).
        var added = Set<[UInt8]>()
        for case .put(let key, _) in earlier where !base.map.contains(key) && isNoted(key, in: batch) && added.insert(key).inserted {
            keys.append(key)
        }
        return keys
    }

    /// Resolves a single-step write (an INCR, an update) against the overlay (and, beneath it,
    /// `map`) and records its mutation, if any: the short way of a one-step batch, with no
    /// arrays of steps and results and no overlay of the batch's own writes.
    private mutating func resolve(_ step: BatchStep, at index: Int) {
        let (current, mayHaveLifetime) = overlay!.entryAndMark(of: step.key, in: base)
        switch resolve(step, current: current) {
        case .failure(let refusal):
            outcomes[index] = refusal.outcome
        case .success(let resolvedStep):
            guard let mutation = resolvedStep.mutation else {
                keep(Resolved(mutations: .none, outcome: resolvedStep.outcome), at: index)
                return
            }
            let kept = keptLifetime(step, writing: mutation, current: current, mayHaveLifetime: mayHaveLifetime)
            guard !kept.isNone else { return record(mutation, outcome: resolvedStep.outcome, at: index) }
            let mutations = Mutations.two(mutation, .lifetime(key: step.key, kept))
            guard record(mutations, of: index) else { return }
            overlay!.note(mutations, version: sequence)
            keep(Resolved(mutations: mutations, outcome: resolvedStep.outcome), at: index)
        }
    }

    /// The lifetime that `step`'s write (`mutation`) must give its key again, the key being
    /// `current` before it: an INCR changes a counter's value but not how long the key lives, so
    /// an INCR of a key that exists keeps its deadline and owner (as Redis's INCR keeps a TTL),
    /// written as a lifetime mutation after the put, which alone would clear them; so does an
    /// update that says so (``Update/keepsLifetime``) and sets a value. Every other write (and an
    /// INCR of an absent key) gives ``Lifetime/none``: nothing to add. Unless `mayHaveLifetime`
    /// (see ``RunOverlay/entryAndMark(of:in:)``), no table is looked in: the usual counter pays
    /// nothing. `batch`: the writes of the steps before this one in its BATCH, read before the run's.
    private func keptLifetime(_ step: BatchStep, writing mutation: Mutation, current: VersionedValue?, mayHaveLifetime: Bool,
                              batch: RunOverlay? = nil) -> Lifetime {
        guard step.keepsLifetime, current != nil, mayHaveLifetime, case .put = mutation else { return .none }
        return batch?.notedLifetime(step.key) ?? overlay!.lifetime(of: step.key, in: base)
    }

    /// Resolves a conditional put: writes `value` under `key` if the key's version (0: absent)
    /// is `ifVersion`, its outcome being the version the record gives the key; otherwise
    /// ``Outcome/conditionFailed`` with nothing recorded.
    private mutating func resolveConditionalPut(key: [UInt8], value: ArraySlice<UInt8>, ifVersion: UInt64, at index: Int) {
        guard (overlay!.entry(of: key, in: base)?.version ?? 0) == ifVersion else {
            outcomes[index] = .conditionFailed
            return
        }
        let recorded = record(of: index, bodyLength: LogRecordCodec.putBodyLength(key: key[...], value: value)) { sequence, claim, buffer in
            LogRecordCodec.encodePut(sequence: sequence, key: key[...], value: value, durableThrough: claim, into: &buffer)
        }
        guard recorded else { return }
        let mutation = Mutation.put(key: key, value: Array(value))
        overlay!.note(mutation, version: sequence)
        keep(Resolved(mutations: .one(mutation), outcome: .version(sequence)), at: index)
    }

    /// Resolves a put with a lifetime: a put and the key's lifetime in one record, if the
    /// condition (if any) holds.
    private mutating func resolve(_ put: LifetimePut, at index: Int) {
        if let ifVersion = put.ifVersion, (overlay!.entry(of: put.key, in: base)?.version ?? 0) != ifVersion {
            outcomes[index] = .conditionFailed
            return
        }
        let deadline = put.milliseconds == 0 ? 0 : now() + put.milliseconds
        let mutations = Mutations.two(.put(key: put.key, value: Array(put.value)), .lifetime(key: put.key, Lifetime(deadline: deadline, owner: put.owner)))
        guard record(mutations, of: index) else { return }
        overlay!.note(mutations, version: sequence)
        keep(Resolved(mutations: mutations, outcome: put.ifVersion == nil ? .stored : .version(sequence)), at: index)
    }

    /// Resolves a delete of `keys`: a key is deleted, and in the record, only if it exists as
    /// the writes before leave it (its deadline not passed), and once if named twice. A delete
    /// that finds none writes no record: it changes nothing, so it takes no version, followers
    /// see no change and a WATCH of the namespace still holds (as Redis's DEL of a missing key).
    /// The outcome counts the keys deleted.
    private mutating func resolveDelete(_ keys: [[UInt8]], at index: Int) {
        if keys.count == 1 {  // the usual DEL and HDEL: no array, no set
            guard overlay!.entry(of: keys[0], in: base) != nil else { return keep(Resolved(mutations: .none, outcome: .integer(0)), at: index) }
            return record(.delete(key: keys[0]), outcome: .integer(1), at: index)
        }
        var mutations: [Mutation] = []
        var named = Set<[UInt8]>(minimumCapacity: keys.count)
        for key in keys where overlay!.entry(of: key, in: base) != nil {
            if !named.insert(key).inserted { continue }
            mutations.append(.delete(key: key))
        }
        record(mutations, outcome: .integer(mutations.count), at: index)
    }

    /// Resolves `PEXPIRE` (`milliseconds`) or `PERSIST` (nil) of `key`: a lifetime with the new
    /// deadline and the same owner, or a delete when the deadline is already past; nothing when
    /// the key is absent or (`PERSIST`) has no deadline.
    private mutating func resolveTimeToLive(key: [UInt8], milliseconds: Int64?, at index: Int) {
        guard overlay!.entry(of: key, in: base) != nil else {
            keep(Resolved(mutations: .none, outcome: .integer(0)), at: index)
            return
        }
        let current = overlay!.lifetime(of: key, in: base)
        let mutation: Mutation
        if let milliseconds {
            let now = now()
            guard milliseconds > 0 else { return record(.delete(key: key), outcome: .integer(1), at: index) }
            let deadline = now.addingReportingOverflow(UInt64(milliseconds))
            mutation = .lifetime(key: key, Lifetime(deadline: deadline.overflow ? UInt64.max : deadline.partialValue, owner: current.owner))
        } else {
            guard current.deadline != 0 else {
                keep(Resolved(mutations: .none, outcome: .integer(0)), at: index)
                return
            }
            mutation = .lifetime(key: key, Lifetime(deadline: 0, owner: current.owner))
        }
        record(mutation, outcome: .integer(1), at: index)
    }

    /// Resolves a write of several keys' lifetimes on its own (Redis's `HEXPIRE` family,
    /// `HSETEX`), recorded as one record: as the same step of a batch with nothing before it.
    private mutating func resolveLifetimes(_ step: BatchStep, at index: Int) {
        let (mutations, outcome) = resolveLifetimeStep(step, over: RunOverlay())
        record(mutations, outcome: outcome, at: index)
    }

    /// The mutations and outcome of `expiry` at `now`, over keys whose state before it `entry`
    /// and `lifetime` give: each key in order, seeing what the change did to the ones before it
    /// (a key named twice is judged twice).
    private static func resolve(_ expiry: KeyExpiry, now: UInt64, entry: ([UInt8]) -> VersionedValue?,
                                lifetime: ([UInt8]) -> Lifetime) -> (mutations: [Mutation], outcome: Outcome) {
        var own = RunOverlay()  // what this change did to the keys before, for a key named twice
        var mutations: [Mutation] = []
        var results: [Outcome] = []
        results.reserveCapacity(expiry.keys.count)
        for key in expiry.keys {
            let current: Lifetime?
            var value: [UInt8]?
            if case .some(.none) = own.noted(key) {
                current = nil
            } else {
                value = entry(key)?.value
                current = value == nil ? nil : own.notedLifetime(key) ?? lifetime(key)
            }
            let (result, changed) = expiry.apply(to: current, now: now)
            results.append(expiry.yields == .values ? .value(value) : .integer(result.rawValue))
            guard result == .changed || result == .deleted else { continue }
            let mutation = changed.map { Mutation.lifetime(key: key, $0) } ?? .delete(key: key)
            own.note(mutation, version: 0)
            mutations.append(mutation)
        }
        return (mutations, .batch(results))
    }

    /// The mutations and outcome of `setting` at `now`, over keys whose state before it `entry`
    /// and `lifetime` give: nothing, with 0, unless the presence condition holds for the keys as
    /// they are before it; else each key put with its lifetime (none; the one it had; the
    /// deadline), or deleted if it exists and the deadline is at or before now, with 1.
    private static func resolve(_ setting: KeySetting, now: UInt64, entry: ([UInt8]) -> VersionedValue?,
                                lifetime: ([UInt8]) -> Lifetime) -> (mutations: [Mutation], outcome: Outcome) {
        guard setting.holds(where: { entry($0) != nil }) else { return ([], .integer(0)) }
        let deadline = setting.absoluteDeadline(now: now)
        var mutations: [Mutation] = []
        if let deadline, deadline <= now {
            // A time already past: the keys that exist are deleted, each once.
            var deleted = Set<[UInt8]>()
            for key in setting.keys where entry(key) != nil && deleted.insert(key).inserted {
                mutations.append(.delete(key: key))
            }
        } else {
            for (key, value) in zip(setting.keys, setting.values) {
                mutations.append(.put(key: key, value: value))
                if let deadline {
                    mutations.append(.lifetime(key: key, Lifetime(deadline: deadline, owner: 0)))
                } else if setting.deadline == .keep, entry(key) != nil {
                    // KEEPTTL: the lifetime the key had before this write (a key named twice too).
                    let kept = lifetime(key)
                    if !kept.isNone { mutations.append(.lifetime(key: key, kept)) }
                }
            }
        }
        return (mutations, .integer(1))
    }

    /// Records `mutations` (none: no record) as the write of operation `index`, with `outcome`.
    private mutating func record(_ mutations: [Mutation], outcome: Outcome, at index: Int) {
        if !mutations.isEmpty {
            guard record(mutations, of: index) else { return }
            overlay!.note(mutations, version: sequence)
        }
        keep(Resolved(mutations: .many(mutations), outcome: outcome), at: index)
    }

    /// Records a single resolved mutation with its outcome.
    private mutating func record(_ mutation: Mutation, outcome: Outcome, at index: Int) {
        guard record(CollectionOfOne(mutation), of: index) else { return }
        overlay!.note(mutation, version: sequence)
        keep(Resolved(mutations: .one(mutation), outcome: outcome), at: index)
    }

    /// The run's wall-clock time: the one given to ``plan(_:in:now:)``, or read once now.
    private mutating func now() -> UInt64 {
        if base.now == 0 { base.now = WallClock.milliseconds() }
        return base.now
    }

    /// Keeps what operation `index` was resolved to, for the apply step.
    private mutating func keep(_ write: Resolved, at index: Int) {
        if resolved.isEmpty { resolved.append(contentsOf: repeatElement(nil, count: outcomes.count)) }
        resolved[index] = write
    }

    /// Resolves a batch's steps in order against the overlay (and, beneath it, `map`), each
    /// seeing the ones before it; records their mutations as one record, or refuses them all:
    /// with the error of a step that refused, or ``Outcome/conditionFailed`` when a guard does
    /// not hold.
    private mutating func resolve(_ steps: [BatchStep], at index: Int) {
        var batch = BatchProgress(version: sequence + 1, namespaceDeadline: base.deadline)
        batch.results.reserveCapacity(steps.count)
        for (position, step) in steps.enumerated() {
            batch.notesWrites = position + 1 < steps.count  // no step after the last one reads what it writes
            if let refusal = resolve(step, of: index, into: &batch) {
                outcomes[index] = refusal
                return
            }
        }
        if !batch.mutations.isEmpty {
            guard record(batch.mutations, of: index) else { return }
            overlay!.note(batch.mutations, version: batch.version)
        }
        keep(Resolved(mutations: .many(batch.mutations), outcome: .batch(batch.results), reads: batch.reads), at: index)
    }

    /// A batch being resolved: what its steps so far write and yield, and the state they leave.
    private struct BatchProgress {
        /// The number the batch's record gets if there is one.
        let version: UInt64
        /// The batch's own writes so far, over the run's: what its later steps see.
        var scratch = RunOverlay()
        var mutations: [Mutation] = []
        var results: [Outcome] = []
        var reads: [DeferredRead] = []
        /// The namespace's own deadline as the steps so far leave it.
        var namespaceDeadline: UInt64
        /// How many of ``mutations`` came before the last change of ``namespaceDeadline``.
        var deadlineSetAt = 0
        /// Whether a step after the one being resolved may read what it writes (not after the last).
        var notesWrites = true

        init(version: UInt64, namespaceDeadline: UInt64) {
            self.version = version
            self.namespaceDeadline = namespaceDeadline
        }

        /// Adds a step's mutations, noted for the steps after it, and its outcome.
        mutating func add(_ written: [Mutation], outcome: Outcome) {
            results.append(outcome)
            if notesWrites { scratch.note(written, version: version) }
            mutations += written
        }
    }

    /// Resolves one step of operation `index`, a batch, into `batch`; returns the outcome the
    /// whole batch gets instead when the step refuses or its guard fails, else nil.
    private mutating func resolve(_ step: BatchStep, of index: Int, into batch: inout BatchProgress) -> Outcome? {
        switch step {
        case .unchangedSince(let expected):
            // `sequence` is the last record before this batch, the run's earlier ones included.
            guard sequence == expected else { return .conditionFailed }
            batch.results.append(.stored)
        case .read(let read):
            // Made when the batch is applied, after the mutations of the steps before it.
            batch.reads.append(DeferredRead(read: read, after: batch.mutations.count, result: batch.results.count))
            batch.results.append(.stored)
        case .setNamespaceDeadline(let change):
            precondition(index == 0, "WritePlanner: a batch that changes the namespace's deadline is planned first in its run")
            resolve(change, into: &batch)
        case .put, .delete, .update, .ifVersion, .increment, .set, .setIfAbsent, .expire, .setAll, .deadlines:
            guard step.readsLifetimes else { return resolveKeyStep(step, into: &batch) }
            let (written, outcome) = resolveLifetimeStep(step, over: batch.scratch)
            batch.add(written, outcome: outcome)
        }
        return nil
    }

    /// Resolves `change` to the namespace's own deadline, a step of `batch`.
    private mutating func resolve(_ change: NamespaceDeadline, into batch: inout BatchProgress) {
        // The delete that empties the namespace clears its deadline, when applied.
        if empties(batch.mutations, from: batch.deadlineSetAt) { batch.namespaceDeadline = 0 }
        let (written, outcome) = resolve(change, over: batch.scratch, after: batch.mutations, deadline: batch.namespaceDeadline)
        for case .lifetime(let key, let lifetime) in written where key.isEmpty { batch.namespaceDeadline = lifetime.deadline }
        if case .delete? = written.first { batch.namespaceDeadline = 0 }  // every key deleted
        batch.deadlineSetAt = batch.mutations.count + written.count
        batch.add(written, outcome: outcome)
    }

    /// Resolves a step that reads one key's value and may write it, into `batch`; returns the
    /// outcome the whole batch gets instead when the step refuses or its guard fails, else nil.
    private mutating func resolveKeyStep(_ step: BatchStep, into batch: inout BatchProgress) -> Outcome? {
        let (before, mayHaveLifetime) = currentAndMark(step.key, under: batch.scratch)
        let resolved: ResolvedStep
        switch resolve(step, current: before) {
        case .failure(let refusal): return refusal.outcome
        case .success(let result): resolved = result
        }
        batch.results.append(resolved.outcome)
        guard let mutation = resolved.mutation else { return nil }
        let kept = keptLifetime(step, writing: mutation, current: before, mayHaveLifetime: mayHaveLifetime, batch: batch.scratch)
        if batch.notesWrites {
            batch.scratch.note(mutation, version: batch.version)
            if !kept.isNone { batch.scratch.note(.lifetime(key: step.key, kept), version: batch.version) }
        }
        batch.mutations.append(mutation)
        if !kept.isNone { batch.mutations.append(.lifetime(key: step.key, kept)) }
        return nil
    }

    /// The value of `key` as a batch's earlier steps (`batch`) and the run before it leave it,
    /// and whether it may have a lifetime (one of those steps may have given it one without
    /// writing its value).
    private mutating func currentAndMark(_ key: [UInt8], under batch: RunOverlay) -> (VersionedValue?, Bool) {
        if let noted = batch.noted(key) { return (noted, batch.hasLifetimes) }
        let (entry, mayHaveLifetime) = overlay!.entryAndMark(of: key, in: base)
        return (entry, mayHaveLifetime || batch.hasLifetimes)
    }

    /// The mutations and outcome of a batch step that reads or writes keys' lifetimes
    /// (``BatchStep/readsLifetimes``: a change of deadlines, a read of them, a write with a
    /// lifetime rule), the batch's earlier steps being `batch`.
    private mutating func resolveLifetimeStep(_ step: BatchStep, over batch: RunOverlay) -> (mutations: [Mutation], outcome: Outcome) {
        let now = self.now()
        func entry(_ key: [UInt8]) -> VersionedValue? {
            if let noted = batch.noted(key) { return noted }
            return overlay!.entry(of: key, in: base)
        }
        func lifetime(_ key: [UInt8]) -> Lifetime { batch.notedLifetime(key) ?? overlay!.lifetime(of: key, in: base) }
        switch step {
        case .expire(let expiry): return Self.resolve(expiry, now: now, entry: entry, lifetime: lifetime)
        case .setAll(let setting): return Self.resolve(setting, now: now, entry: entry, lifetime: lifetime)
        case .deadlines(let keys):
            // As `Namespace` reads them: -2 absent, -1 no deadline, else milliseconds since the epoch.
            return ([], .batch(keys.map { key in
                guard entry(key) != nil else { return .integer(-2) }
                let deadline = lifetime(key).deadline
                return .integer(deadline == 0 ? -1 : Int(clamping: deadline))
            }))
        case .put, .delete, .update, .ifVersion, .increment, .set, .setIfAbsent, .unchangedSince, .read, .setNamespaceDeadline:
            preconditionFailure("WritePlanner: not a step of lifetimes")
        }
    }

    /// A step resolved against the key's current state: what it writes (nil: nothing) and yields.
    private struct ResolvedStep {
        var mutation: Mutation?
        var outcome: Outcome
    }

    /// Resolves one step given its key's `current` state, or fails with the outcome the whole
    /// operation gets instead (a refusal, a failed guard).
    private func resolve(_ step: BatchStep, current: VersionedValue?) -> Result<ResolvedStep, Refusal> {
        switch step {
        case .put(let key, let value):
            return .success(ResolvedStep(mutation: .put(key: key, value: value), outcome: .stored))
        case .delete(let key):
            // A key that is not there is not deleted: no mutation, and none in the record.
            return .success(ResolvedStep(mutation: current == nil ? nil : .delete(key: key), outcome: .integer(current == nil ? 0 : 1)))
        case .set(let key, let value):
            return .success(ResolvedStep(mutation: .put(key: key, value: value), outcome: .integer(current == nil ? 1 : 0)))
        case .setIfAbsent(let key, let value):
            guard current == nil else { return .success(ResolvedStep(mutation: nil, outcome: .integer(0))) }
            return .success(ResolvedStep(mutation: .put(key: key, value: value), outcome: .integer(1)))
        case .unchangedSince, .read, .expire, .deadlines, .setAll, .setNamespaceDeadline:
            preconditionFailure("WritePlanner: a namespace guard, read or deadline, or a step of lifetimes, is handled by the batch, not per key")
        case .ifVersion(_, let expected):
            guard (current?.version ?? 0) == expected else { return .failure(Refusal(.conditionFailed)) }
            return .success(ResolvedStep(mutation: nil, outcome: .stored))
        case .increment(let key, let delta):
            switch Self.sum(of: current?.value, and: delta) {
            case .failure(let error): return .failure(Refusal(.failure(error)))
            case .success(let sum):
                var digits: [UInt8] = []
                digits.reserveCapacity(20)
                ASCIIDecimal.append(sum, to: &digits)
                return .success(ResolvedStep(mutation: .put(key: key, value: digits), outcome: .integer(Int(sum))))
            }
        case .update(let key, let update):
            let old = current?.value
            switch update.compute(old) {
            case .set(let value):
                if let problem = limits.problem(withComputedValue: value) { return .failure(Refusal(.failure(problem))) }
                return .success(ResolvedStep(mutation: .put(key: key, value: value), outcome: .value(value)))
            case .delete:
                return .success(ResolvedStep(mutation: old == nil ? nil : .delete(key: key), outcome: .value(nil)))
            case .keep:
                return .success(ResolvedStep(mutation: nil, outcome: .value(old)))
            case .refuse(let error):
                return .failure(Refusal(.failure(error)))
            }
        }
    }

    /// The outcome an operation gets when one of its steps refuses.
    private struct Refusal: Error {
        var outcome: Outcome
        init(_ outcome: Outcome) { self.outcome = outcome }
    }

    /// `value` (nil: 0) read as a canonical signed 64-bit decimal, plus `delta`.
    static func sum(of value: [UInt8]?, and delta: Int64) -> Result<Int64, StoreError> {
        var base: Int64 = 0
        if let value {
            guard let parsed = ASCIIDecimal.parse(value[...]) else {
                return .failure(StoreError(.notAnInteger, "value is not an integer"))
            }
            base = parsed
        }
        let (sum, overflow) = base.addingReportingOverflow(delta)
        guard !overflow else { return .failure(StoreError(.overflow, "increment or decrement would overflow")) }
        return .success(sum)
    }

    /// The overlay of the writes planned so far (built when the first write that reads comes).
    /// The record of `written[i]` is numbered `startSequence + i + 1`.
    private func replayWritten(_ operations: [Operation]) -> RunOverlay {
        var overlay = RunOverlay(capacity: operations.count)
        for (position, index) in written.enumerated() {
            let version = startSequence + UInt64(position) + 1
            if !resolved.isEmpty, let resolved = resolved[index] {
                overlay.note(resolved.mutations, version: version)
                continue
            }
            switch operations[index] {
            case .put(let key, let value), .set(let key, let value): overlay.note(.put(key: Array(key), value: Array(value)), version: version)
            case .delete(let keys): overlay.note(keys.lazy.map { .delete(key: $0) }, version: version)
            case .batch(let steps): overlay.note(steps.lazy.map { $0.plainMutation! }, version: version)
            case .update, .increment, .conditionalPut, .lifetimePut, .setTimeToLive, .expire, .setAll, .get, .getVersioned, .exists, .getMany,
                 .count, .memoryUsage, .scan, .sample, .packedEntries, .timeToLive, .deadlines, .setNamespaceDeadline, .namespaceDeadline:
                preconditionFailure("WritePlanner: no plain record for this operation")
            }
        }
        return overlay
    }

    /// ``record(of:bodyLength:_:)`` for a record of `mutations` (none: no record at all, which
    /// counts as recorded).
    private mutating func record<C: Collection<Mutation>>(_ mutations: C, of index: Int) -> Bool {
        // A delete of no keys changes nothing: no record, no sequence number.
        guard !mutations.isEmpty else { return true }
        return record(of: index, bodyLength: LogRecordCodec.bodyLength(of: mutations)) { sequence, claim, buffer in
            LogRecordCodec.encode(sequence: sequence, mutations: mutations, durableThrough: claim, into: &buffer)
        }
    }

    /// Encodes the record of operation `index` (`bodyLength` bytes of body, written by `encode`
    /// given its sequence number and durable claim) into the buffer and returns true, or sets
    /// the operation's outcome to why it cannot be written and returns false.
    private mutating func record(of index: Int, bodyLength: Int, _ encode: (UInt64, UInt64, inout [UInt8]) -> Void) -> Bool {
        if let blocker {
            outcomes[index] = .failure(blocker)
            return false
        }
        // Recovery refuses a record longer than this as corrupt: never write one.
        if bodyLength > LogRecordCodec.maximumBodyLength {
            outcomes[index] = .failure(StoreError(.valueTooLarge, "the write is \(bodyLength) bytes; one write holds at most \(LogRecordCodec.maximumBodyLength)"))
            return false
        }
        sequence += 1
        let claim = durableClaim ?? syncer.durableSequence
        durableClaim = claim
        // Sized for the first record (often the only one) rather than grown to it by doubling
        // (a no-op when the buffer kept from an earlier run has room).
        if buffer.isEmpty { buffer.reserveCapacity(LogRecordCodec.headerLength + bodyLength) }
        encode(sequence, claim, &buffer)
        written.append(index)
        return true
    }
}
