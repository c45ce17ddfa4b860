import ActorKVStore

/// ActorKV's data in an etcd cluster (cluster mode, `actorkvd --etcd`): runs the engine's
/// ``ActorKVStore/Operation``s as etcd requests, with the same outcomes the local engine gives.
///
/// Namespace `ns`, key `k` → etcd key `<prefix>ns/k` (a namespace name holds no `/`). A key's
/// version is its `mod_revision`. Reads are linearizable ranges; a PUT is a put; a conditional
/// PUT one transaction comparing the mod_revision; anything that reads before it writes (INCR,
/// BATCH, MULTI/EXEC) is resolved against the keys read at one revision and committed by one
/// transaction that holds only if none of those keys changed since, retried otherwise.
/// Ephemeral keys are attached to their connection's lease, keys with a deadline to a lease
/// shared by the deadlines of the same second (``EtcdLeases``).
///
/// Operations of one run are applied one after another, in order: each is acknowledged once
/// etcd has committed it (a quorum has it on disk).
///
/// This file runs operations and reads; the rest is by concern: `EtcdStoreWrites.swift`,
/// `EtcdStoreLifetimes.swift` (leases), `EtcdStoreChanges.swift` (CHANGES, WATCH's guard) and
/// `EtcdStoreCluster.swift` (namespaces, compaction, INFO).
public final class EtcdStore: Sendable {
    /// The client of the cluster.
    public let client: EtcdClient
    /// What every key etcd holds for ActorKV starts with (`actorkv/` by default).
    public let prefix: [UInt8]
    /// Size limits checked before anything is sent.
    public let limits: StoreLimits
    /// The leases of ephemeral keys and of keys with deadlines.
    public let leases: EtcdLeases
    /// How many revisions COMPACT keeps for change feeds (`--changes-history`).
    public let changesHistory: Int
    /// Transactions retried before an INCR or BATCH gives up under contention.
    static let maxAttempts = 1000
    /// How many CHANGES followers this agent serves (INFO's `changes_followers`).
    let followers = FollowerCount()
    /// Now, in milliseconds since the epoch, for the deadlines it gives (a seam for tests).
    let clock: @Sendable () -> UInt64

    /// A store in the cluster `client` reaches, under `prefix`; `clock` tells the time in
    /// milliseconds since the epoch (tests give one of their own).
    public init(client: EtcdClient, prefix: String = "actorkv/", limits: StoreLimits = StoreLimits(), ephemeralTTL: Int = 10,
                changesHistory: Int = 100_000, log: @escaping @Sendable (String) -> Void = { _ in },
                clock: @escaping @Sendable () -> UInt64 = { WallClock.milliseconds() }) {
        self.client = client
        self.clock = clock
        self.prefix = Array(prefix.utf8)
        self.limits = limits
        self.changesHistory = changesHistory
        leases = EtcdLeases(client: client, ephemeralTTL: ephemeralTTL, log: log)
    }

    /// The etcd key of `key` in `namespace`.
    public func etcdKey(_ namespace: String, _ key: some Collection<UInt8>) -> [UInt8] {
        var out = prefix
        out.reserveCapacity(prefix.count + namespace.utf8.count + 1 + key.count)
        out.append(contentsOf: namespace.utf8)
        out.append(UInt8(ascii: "/"))
        out.append(contentsOf: key)
        return out
    }

    /// Runs `operations` in order on `namespace`; one outcome each. Consecutive plain reads and
    /// writes (GET, GETV, EXISTS, PUT, HSET, DEL) go to etcd as one transaction (a pipeline is one
    /// round trip), as long as no key is written twice or read after it was written in it, and
    /// it holds at most ``maxTransactionOperations``.
    public func execute(_ operations: [Operation], inNamespace namespace: String) async -> [Outcome] {
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(operations.count)
        var index = 0
        while index < operations.count {
            if let problem = limits.problem(with: operations[index]) {
                outcomes.append(.failure(problem))
                index += 1
                continue
            }
            // One request of each transaction is kept for the marker put that goes with deletes.
            let end = TransactionGrouping.end(of: operations, from: index, limits: limits, maxRequests: Self.maxTransactionOperations - 1)
            do {
                if end - index >= 2 || Self.isBlindBatch(operations[index]) {
                    outcomes += try await runTogether(operations[index..<end], in: namespace)
                } else {
                    outcomes.append(try await run(operations[index], in: namespace))
                }
            } catch {
                outcomes += Array(repeating: .failure(error.storeError), count: max(1, end - index))
            }
            index = max(end, index + 1)
        }
        return outcomes
    }

    /// A batch that only puts, sets and deletes (HSET, HDEL): one transaction, no read first.
    static func isBlindBatch(_ operation: Operation) -> Bool {
        if case .batch(let steps) = operation { return TransactionGrouping.blindKeys(steps) != nil }
        return false
    }

    /// The most requests the agent puts in one transaction (etcd's `--max-txn-ops`, 128 by default).
    static let maxTransactionOperations = 128

    /// The refusal of `MEMORY USAGE`: the data is in etcd's memory, not the agent's.
    public static let noMemoryUsage = StoreError(.invalidArgument, "MEMORY USAGE is not available in cluster mode (--etcd): the keys are held by the etcd cluster, not by this agent (etcd's own metrics give its memory)")

    /// Plain reads and writes as one transaction: their outcomes, in order.
    func runTogether(_ operations: ArraySlice<Operation>, in ns: String) async throws(EtcdError) -> [Outcome] {
        let (requests, writes) = plainRequests(operations, in: ns)
        let txn = transaction(of: requests, in: ns)
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: writes)
        // The branch etcd ran (a txn without a compare always runs its success branch).
        let ran = answer.succeeded == true ? txn.success : txn.failure
        var responses = (answer.responses ?? [])[...]
        guard responses.count == ran.count else { throw EtcdError(.refused, "etcd answered \(responses.count) of \(ran.count) requests") }
        return Self.plainOutcomes(operations, from: &responses, deletesRan: ran.contains(where: \.isDelete))
    }

    /// The transaction of plain `requests` on `ns`. With deletes, the namespace's marker is put
    /// too, so that WATCH sees them (``marker(of:)``), but only if a key deleted exists: a delete
    /// of keys that do not exist changes nothing, as locally. With a put among the requests the
    /// namespace changes anyway; without one, the deletes and the marker are the failure branch
    /// of a compare that holds when none of the deleted keys exists (each `mod_revision` 0), and
    /// the reads alone the success branch.
    func transaction(of requests: [EtcdRequest], in ns: String) -> EtcdTransaction {
        let deleted = requests.compactMap(\.deletedKey)
        guard !deleted.isEmpty else { return EtcdTransaction(success: requests) }
        let marked = requests + [markerPut(ns)]
        if requests.contains(where: \.isPut) { return EtcdTransaction(success: marked) }
        return EtcdTransaction(compare: deleted.map { EtcdCompare(key: $0, modRevision: 0) },
                               success: requests.filter { !$0.isDelete }, failure: marked)
    }

    /// The etcd requests of plain reads and writes, in order (a read of several keys, a delete
    /// of several or a batch gives one per key), and whether any of them writes.
    func plainRequests(_ operations: ArraySlice<Operation>, in ns: String) -> (requests: [EtcdRequest], writes: Bool) {
        var requests: [EtcdRequest] = []
        var writes = false
        for operation in operations {
            switch operation {
            case .get(let key), .getVersioned(let key): requests.append(.range(key: etcdKey(ns, key)))
            case .exists(let keys): requests += keys.map { .range(key: etcdKey(ns, $0), countOnly: true) }
            case .getMany(let keys): requests += keys.map { .range(key: etcdKey(ns, $0)) }
            case .put(let key, let value):
                requests.append(.put(key: etcdKey(ns, key), value: Array(value)))
                writes = true
            case .set(let key, let value):
                requests.append(.put(key: etcdKey(ns, key), value: Array(value), previous: true))
                writes = true
            case .delete(let keys):
                requests += TransactionGrouping.unique(keys).map { .deleteRange(key: etcdKey(ns, $0)) }
                writes = true
            case .batch(let steps):
                requests += steps.map { step in
                    switch step {
                    case .put(let key, let value): .put(key: etcdKey(ns, key), value: value)
                    case .set(let key, let value): .put(key: etcdKey(ns, key), value: value, previous: true)
                    default: .deleteRange(key: etcdKey(ns, step.key))
                    }
                }
                writes = true
            default: preconditionFailure("EtcdStore: not a plain read or write")
            }
        }
        return (requests, writes)
    }

    /// The outcomes of plain reads and writes from etcd's `responses` to their
    /// ``plainRequests(_:in:)``, taken from the front in the same order.
    static func plainOutcomes(_ operations: ArraySlice<Operation>, from responses: inout ArraySlice<EtcdResponses.ResponseOp>,
                                      deletesRan: Bool) -> [Outcome] {
        // Deletes that did not run (none of their keys existed) have no responses: each deleted nothing.
        func deleted() -> Int {
            deletesRan ? responses.popFirst()?.response_delete_range?.deletedValue ?? 0 : 0
        }
        return operations.map { operation in
            switch operation {
            case .get:
                return .value(responses.popFirst()?.response_range?.kvs?.first?.valueBytes)
            case .getVersioned:
                let kv = responses.popFirst()?.response_range?.kvs?.first
                return .versioned(kv.map { VersionedValue(value: $0.valueBytes, version: UInt64($0.modRevision)) })
            case .exists(let keys):
                return .integer(keys.indices.reduce(0) { total, _ in total + (responses.popFirst()?.response_range?.countValue ?? 0) })
            case .getMany(let keys):
                return .batch(keys.map { _ in .value(responses.popFirst()?.response_range?.kvs?.first?.valueBytes) })
            case .put:
                _ = responses.popFirst()
                return .stored
            case .set:
                return .integer(responses.popFirst()?.response_put?.prev_kv == nil ? 1 : 0)
            case .delete(let keys):
                return .integer(TransactionGrouping.unique(keys).indices.reduce(0) { total, _ in total + deleted() })
            case .batch(let steps):
                return .batch(steps.map { step in
                    switch step {
                    case .put:
                        _ = responses.popFirst()
                        return .stored
                    case .set: return .integer(responses.popFirst()?.response_put?.prev_kv == nil ? 1 : 0)
                    default: return .integer(deleted())
                    }
                })
            default: preconditionFailure("EtcdStore: not a plain read or write")
            }
        }
    }

    func run(_ operation: Operation, in ns: String) async throws(EtcdError) -> Outcome {
        switch operation {
        case .get(let key):
            return .value(try await read(etcdKey(ns, key))?.valueBytes)
        case .getVersioned(let key):
            return .versioned(try await read(etcdKey(ns, key)).map { VersionedValue(value: $0.valueBytes, version: UInt64($0.modRevision)) })
        case .exists(let keys):
            return .integer(try await exists(keys.map { etcdKey(ns, $0) }))
        case .getMany(let keys):
            return .batch(try await readAll(keys.map { etcdKey(ns, $0) }).map { .value($0?.valueBytes) })
        case .put(let key, let value):
            let request = EtcdRequest.put(key: etcdKey(ns, key), value: Array(value))
            _ = try await client.call(request.path, body: request.body, write: true)
            return .stored
        case .set(let key, let value):
            let request = EtcdRequest.put(key: etcdKey(ns, key), value: Array(value), previous: true)
            let answer = try await client.call(EtcdResponses.Put.self, request.path, body: request.body, write: true)
            return .integer(answer.prev_kv == nil ? 1 : 0)
        case .conditionalPut(let key, let value, let version):
            return try await conditionalPut(etcdKey(ns, key), value: Array(value), ifVersion: version, lease: 0)
        case .delete(let keys):
            return .integer(try await delete(keys.map { etcdKey(ns, $0) }, in: ns))
        case .increment(let key, let delta):
            return try await batchOfOne(.increment(key: key, by: delta), in: ns)
        case .batch(let steps):
            return try await batch(steps, in: ns)
        case .update(let key, let update):
            return try await batchOfOne(.update(key: key, update), in: ns)
        case .lifetimePut(let put):
            return try await lifetimePut(put, in: ns)
        case .setTimeToLive(let key, let milliseconds):
            // A time at or before now (0) deletes the key.
            let deadline = milliseconds.map { $0 <= 0 ? 0 : clock() + UInt64($0) }
            return try await setTimeToLive(etcdKey(ns, key), deadline: deadline, in: ns)
        case .timeToLive(let key):
            return .integer(try await timeToLive(etcdKey(ns, key)))
        case .expire(let expiry):
            return try await expire(expiry, in: ns)
        case .setAll(let setting):
            // HSETEX: a batch of one step, so one `txn` as a MULTI's.
            return try await batchOfOne(.setAll(setting), in: ns)
        case .deadlines(let keys):
            return .batch(try await deadlines(keys.map { etcdKey(ns, $0) }))
        case .count:
            return .integer(try await count(ns))
        case .scan(let cursor, let keyPrefix, let limit):
            return .page(try await scan(ns, after: cursor.afterKey, prefix: keyPrefix, limit: limit))
        case .packedEntries(let parts, let bound):
            let page = try await scan(ns, after: nil, prefix: [], limit: .max)
            // Weighed as the engine weighs a namespace: its keys and values, whichever parts are sent.
            return bound.allows(bytes: EntryParts.both.bytes(of: page.entries), keys: page.entries.count) ? .strings(parts.packed(page.entries)) : .page(page)
        case .setNamespaceDeadline, .namespaceDeadline:
            return .failure(Self.noNamespaceDeadline)
        case .memoryUsage:
            return .failure(Self.noMemoryUsage)
        case .sample(let draw):
            // etcd reads a range from its start, not from a position in it: every key is read.
            var generator = DrawGenerator()
            let all = try await scan(ns, after: nil, prefix: [], limit: .max).entries
            return .page(ScanPage(entries: draw.draw(from: all, using: &generator), next: .start))
        }
    }

    /// Runs `step` as a batch of its own (one `txn`, as a MULTI's): its outcome, not the batch's.
    private func batchOfOne(_ step: BatchStep, in ns: String) async throws(EtcdError) -> Outcome {
        let outcome = try await batch([step], in: ns)
        if case .batch(let results) = outcome { return results[0] }
        return outcome
    }

    // MARK: - Reads

    /// The deadlines of `keys`, as the engine gives them: -2 absent, -1 none, else milliseconds
    /// since the epoch.
    private func deadlines(_ keys: [[UInt8]]) async throws(EtcdError) -> [Outcome] {
        var deadlines: [Outcome] = []
        for kv in try await readAll(keys) {
            guard let kv, let deadline = try await deadline(of: kv) else {
                deadlines.append(.integer(-2))
                continue
            }
            deadlines.append(.integer(deadline == 0 ? -1 : Int(clamping: deadline)))
        }
        return deadlines
    }

    /// How many keys namespace `ns` holds (a count-only range: no key or value sent).
    private func count(_ ns: String) async throws(EtcdError) -> Int {
        let base = etcdKey(ns, [])
        let request = EtcdRequest.range(key: base, rangeEnd: EtcdKeys.rangeEnd(ofPrefix: base), countOnly: true)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return answer.countValue
    }

    func read(_ key: [UInt8]) async throws(EtcdError) -> EtcdResponses.KeyValue? {
        let request = EtcdRequest.range(key: key)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return answer.kvs?.first
    }

    /// Reads `keys` at one revision (one transaction of ranges): each key's state.
    func readAll(_ keys: [[UInt8]]) async throws(EtcdError) -> [EtcdResponses.KeyValue?] {
        if keys.count == 1 { return [try await read(keys[0])] }
        let txn = EtcdTransaction(success: keys.map { .range(key: $0) })
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: false)
        let responses = answer.responses ?? []
        return keys.indices.map { $0 < responses.count ? responses[$0].response_range?.kvs?.first : nil }
    }

    /// Reads `keys` and every entry of namespace `ns` at one revision (one transaction of
    /// ranges): each key's state, the entries by key (without the namespace's prefix), and
    /// that revision.
    func readAll(_ keys: [[UInt8]], andEntriesOf ns: String) async throws(EtcdError)
        -> (keys: [EtcdResponses.KeyValue?], entries: [[UInt8]: VersionedValue], revision: UInt64) {
        let base = etcdKey(ns, [])
        let txn = EtcdTransaction(success: keys.map { .range(key: $0) } + [.range(key: base, rangeEnd: EtcdKeys.rangeEnd(ofPrefix: base))])
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: false)
        let responses = answer.responses ?? []
        let states = keys.indices.map { $0 < responses.count ? responses[$0].response_range?.kvs?.first : nil }
        var entries: [[UInt8]: VersionedValue] = [:]
        if keys.count < responses.count {
            for kv in responses[keys.count].response_range?.kvs ?? [] {
                entries[Array(kv.keyBytes.dropFirst(base.count))] = VersionedValue(value: kv.valueBytes, version: UInt64(kv.modRevision))
            }
        }
        return (states, entries, UInt64(answer.header?.revisionValue ?? 0))
    }

    func exists(_ keys: [[UInt8]]) async throws(EtcdError) -> Int {
        let unique = TransactionGrouping.unique(keys)
        let found = try await readAll(unique)
        var present = Set<[UInt8]>()
        for (key, kv) in zip(unique, found) where kv != nil { present.insert(key) }
        return keys.filter { present.contains($0) }.count
    }

    func scan(_ ns: String, after: [UInt8]?, prefix keyPrefix: [UInt8], limit: Int) async throws(EtcdError) -> ScanPage {
        let base = etcdKey(ns, keyPrefix)
        let start = after.map { EtcdKeys.after(etcdKey(ns, $0)) } ?? base
        let request = EtcdRequest.range(key: start, rangeEnd: EtcdKeys.rangeEnd(ofPrefix: base), limit: limit)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        let strip = etcdKey(ns, []).count
        let entries = (answer.kvs ?? []).map { KeyValue(key: Array($0.keyBytes.dropFirst(strip)), value: $0.valueBytes) }
        let next: ScanCursor = (answer.more ?? false) && !entries.isEmpty ? .after(entries.last!.key) : .start
        return ScanPage(entries: entries, next: next)
    }
}

extension EtcdError {
    /// The engine error a client is answered with (``ActorKVStore/StoreError``, mapped to a
    /// wire code in one place by the server).
    public var storeError: StoreError {
        switch kind {
        case .unavailable: return StoreError(.unavailable, message)
        case .outcomeUnknown: return StoreError(.io, message)
        case .tooLarge: return StoreError(.valueTooLarge, message)
        case .compacted(let oldest): return StoreError(.compacted, "oldest available sequence is \(oldest)")
        case .leaseNotFound: return StoreError(.unavailable, "the lease of this key was lost (\(message)); try again")
        case .invalidConfiguration, .refused: return StoreError(.invalidArgument, message)
        }
    }
}

extension EtcdRequest {
    /// Whether it deletes.
    var isDelete: Bool { deletedKey != nil }

    /// The key it deletes (the first of its range), or nil.
    var deletedKey: [UInt8]? {
        if case .deleteRange(let key, _) = self { return key }
        return nil
    }

    /// Whether it puts.
    var isPut: Bool {
        if case .put = self { return true }
        return false
    }
}

extension [BatchStep] {
    /// The sequence of the WATCH guard among the steps (0: none).
    var watchedSequence: UInt64 {
        for step in self { if case .unchangedSince(let sequence) = step { return sequence } }
        return 0
    }
}
