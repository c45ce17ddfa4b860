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
        var mutations: [Mutation]
        /// The operation's outcome once applied.
        var outcome: Outcome
    }

    /// The encoded records, end to end.
    private(set) var buffer: [UInt8] = []
    /// The sequence number of the last record encoded.
    private(set) var sequence: UInt64
    /// The operations that have a record in ``buffer``, in order.
    private(set) var written: [Int] = []
    /// Per operation: an outcome decided while planning (a refusal), or nil for one that is
    /// still to be performed (a read, a write to apply).
    private(set) var outcomes: [Outcome?]
    /// The writes resolved while planning, by operation index.
    private(set) var resolved: [Int: Resolved] = [:]
    private var overlay: RunOverlay?
    private let limits: StoreLimits
    private let blocker: StoreError?
    private let syncer: LogSyncer
    /// How far the log was durable, read from the syncer once, and only if something is written.
    private var durableClaim: UInt64?

    /// A planner for `count` operations after the record numbered `lastSequence`; with a
    /// `blocker`, every write is refused with it.
    init(count: Int, lastSequence: UInt64, limits: StoreLimits, blocker: StoreError?, syncer: LogSyncer) {
        outcomes = [Outcome?](repeating: nil, count: count)
        sequence = lastSequence
        self.limits = limits
        self.blocker = blocker
        self.syncer = syncer
    }

    /// Whether any record was encoded.
    var hasRecords: Bool { !written.isEmpty }

    /// The outcomes, moved out (the planner keeps none): mutating them then copies nothing.
    mutating func takeOutcomes() -> [Outcome?] {
        var taken: [Outcome?] = []
        swap(&taken, &outcomes)
        return taken
    }

    /// Plans every operation, in order, against `map` as the namespace holds it before the run.
    mutating func plan(_ operations: [Operation], in map: OrderedMap) {
        for index in operations.indices { plan(operations[index], at: index, of: operations, in: map) }
    }

    /// The records could not be written: every write planned fails with `error`, and so does every
    /// write resolved against them (what it read will not be there).
    mutating func failWrites(_ error: StoreError) {
        for index in written { outcomes[index] = .failure(error) }
        for index in resolved.keys { outcomes[index] = .failure(error) }
        written.removeAll()
        resolved.removeAll()
    }

    private mutating func plan(_ operation: Operation, at index: Int, of operations: [Operation], in map: OrderedMap) {
        if let problem = limits.problem(with: operation) {
            outcomes[index] = .failure(problem)
            return
        }
        if overlay == nil && operation.readsBeforeWriting { overlay = replayWritten(operations) }
        switch operation {
        case .put(let key, let value):
            let recorded = record(of: index, bodyLength: LogRecordCodec.putBodyLength(key: key, value: value)) { sequence, claim, buffer in
                LogRecordCodec.encodePut(sequence: sequence, key: key, value: value, durableThrough: claim, into: &buffer)
            }
            if recorded { overlay?.note(.put(key: Array(key), value: Array(value))) }
        case .delete(let keys):
            if record(keys.lazy.map { .delete(key: $0) }, of: index) { overlay?.note(keys.lazy.map { .delete(key: $0) }) }
        case .batch(let steps) where !operation.readsBeforeWriting:
            let mutations = steps.lazy.map { $0.plainMutation! }
            if record(mutations, of: index) { overlay?.note(mutations) }
        case .batch(let steps):
            resolveBatch(steps, at: index, in: map)
        case .update(let key, let update):
            resolveBatch([.update(key: key, update)], at: index, in: map, single: true)
        case .get, .exists, .count, .scan:
            return
        }
    }

    /// Resolves the steps in order against the overlay (and, beneath it, `map`), each seeing the
    /// ones before it; records their mutations as one record, or refuses them all. With
    /// `single`, the outcome is the one step's rather than a batch's.
    private mutating func resolveBatch(_ steps: [BatchStep], at index: Int, in map: OrderedMap, single: Bool = false) {
        var scratch = RunOverlay()  // this batch's own writes, over the run's
        func current(_ key: [UInt8]) -> [UInt8]? { scratch.noted(key) ?? overlay!.value(of: key, in: map) }
        var mutations: [Mutation] = []
        var results: [Outcome] = []
        results.reserveCapacity(steps.count)
        for step in steps {
            let mutation: Mutation?
            switch step {
            case .put(let key, let value):
                mutation = .put(key: key, value: value)
                results.append(.stored)
            case .delete(let key):
                mutation = .delete(key: key)
                results.append(.integer(current(key) == nil ? 0 : 1))
            case .update(let key, let update):
                let old = current(key)
                switch update.compute(old) {
                case .set(let value):
                    if let problem = limits.problem(withComputedValue: value) {
                        outcomes[index] = .failure(problem)
                        return
                    }
                    mutation = .put(key: key, value: value)
                    results.append(.value(value))
                case .delete:
                    mutation = old == nil ? nil : .delete(key: key)
                    results.append(.value(nil))
                case .keep:
                    mutation = nil
                    results.append(.value(old))
                case .refuse(let error):
                    outcomes[index] = .failure(error)
                    return
                }
            }
            if let mutation {
                scratch.note(mutation)
                mutations.append(mutation)
            }
        }
        if !mutations.isEmpty {
            guard record(mutations, of: index) else { return }
            overlay!.note(mutations)
        }
        resolved[index] = Resolved(mutations: mutations, outcome: single ? results[0] : .batch(results))
    }

    /// The overlay of the writes planned so far (built when the first write that reads comes).
    private func replayWritten(_ operations: [Operation]) -> RunOverlay {
        var overlay = RunOverlay()
        for index in written {
            if let resolved = resolved[index] {
                overlay.note(resolved.mutations)
                continue
            }
            switch operations[index] {
            case .put(let key, let value): overlay.note(.put(key: Array(key), value: Array(value)))
            case .delete(let keys): overlay.note(keys.lazy.map { .delete(key: $0) })
            case .batch(let steps): overlay.note(steps.lazy.map { $0.plainMutation! })
            case .update, .get, .exists, .count, .scan: preconditionFailure("WritePlanner: no plain record for this operation")
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
        // Sized for the first record (often the only one) rather than grown to it by doubling.
        if buffer.isEmpty { buffer.reserveCapacity(LogRecordCodec.headerLength + bodyLength) }
        encode(sequence, claim, &buffer)
        written.append(index)
        return true
    }
}

/// The values that the writes planned so far in a run give their keys (nil: deleted), over the
/// map they are not applied to yet.
struct RunOverlay {
    private var values: [[UInt8]: [UInt8]?] = [:]

    /// Notes what `mutation` does.
    mutating func note(_ mutation: Mutation) {
        switch mutation {
        case .put(let key, let value): values[key] = .some(value)
        case .delete(let key): values[key] = .some(nil)
        }
    }

    /// Notes what each of `mutations` does, in order.
    mutating func note<C: Collection<Mutation>>(_ mutations: C) {
        for mutation in mutations { note(mutation) }
    }

    /// What the noted writes left under `key`: nil if none of them touched it, `.some(nil)` if
    /// the last one deleted it.
    func noted(_ key: [UInt8]) -> [UInt8]?? { values[key] }

    /// The value under `key` after the noted writes, reading `map` where they did not touch it.
    func value(of key: [UInt8], in map: OrderedMap) -> [UInt8]? {
        if let noted = values[key] { return noted }
        return map[key]
    }
}
