import ActorKVStore
import Dispatch

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
    private let followers = FollowerCount()
    /// Now, in milliseconds since the epoch, for the deadlines it gives (a seam for tests).
    private let clock: @Sendable () -> UInt64

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
    private static func isBlindBatch(_ operation: Operation) -> Bool {
        if case .batch(let steps) = operation { return TransactionGrouping.blindKeys(steps) != nil }
        return false
    }

    /// The most requests the agent puts in one transaction (etcd's `--max-txn-ops`, 128 by default).
    static let maxTransactionOperations = 128

    /// Plain reads and writes as one transaction: their outcomes, in order.
    private func runTogether(_ operations: ArraySlice<Operation>, in ns: String) async throws(EtcdError) -> [Outcome] {
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
    private func plainRequests(_ operations: ArraySlice<Operation>, in ns: String) -> (requests: [EtcdRequest], writes: Bool) {
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
    private static func plainOutcomes(_ operations: ArraySlice<Operation>, from responses: inout ArraySlice<EtcdResponses.ResponseOp>,
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

    private func run(_ operation: Operation, in ns: String) async throws(EtcdError) -> Outcome {
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
            let outcome = try await batch([.increment(key: key, by: delta)], in: ns)
            if case .batch(let results) = outcome { return results[0] }
            return outcome
        case .batch(let steps):
            return try await batch(steps, in: ns)
        case .update(let key, let update):
            let outcome = try await batch([.update(key: key, update)], in: ns)
            if case .batch(let results) = outcome { return results[0] }
            return outcome
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
            let outcome = try await batch([.setAll(setting)], in: ns)
            if case .batch(let results) = outcome { return results[0] }
            return outcome
        case .deadlines(let keys):
            var deadlines: [Outcome] = []
            for kv in try await readAll(keys.map { etcdKey(ns, $0) }) {
                guard let kv, let deadline = try await deadline(of: kv) else {
                    deadlines.append(.integer(-2))
                    continue
                }
                deadlines.append(.integer(deadline == 0 ? -1 : Int(clamping: deadline)))
            }
            return .batch(deadlines)
        case .count:
            let base = etcdKey(ns, [])
            let request = EtcdRequest.range(key: base, rangeEnd: EtcdKeys.rangeEnd(ofPrefix: base), countOnly: true)
            let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
            return .integer(answer.countValue)
        case .scan(let cursor, let keyPrefix, let limit):
            return .page(try await scan(ns, after: cursor.afterKey, prefix: keyPrefix, limit: limit))
        case .packedEntries(let parts, let bound):
            let page = try await scan(ns, after: nil, prefix: [], limit: .max)
            // Weighed as the engine weighs a namespace: its keys and values, whichever parts are sent.
            return bound.allows(bytes: EntryParts.both.bytes(of: page.entries), keys: page.entries.count) ? .strings(parts.packed(page.entries)) : .page(page)
        case .sample(let draw):
            // etcd reads a range from its start, not from a position in it: every key is read.
            var generator = DrawGenerator()
            let all = try await scan(ns, after: nil, prefix: [], limit: .max).entries
            return .page(ScanPage(entries: draw.draw(from: all, using: &generator), next: .start))
        }
    }

    // MARK: - Reads

    private func read(_ key: [UInt8]) async throws(EtcdError) -> EtcdResponses.KeyValue? {
        let request = EtcdRequest.range(key: key)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return answer.kvs?.first
    }

    /// Reads `keys` at one revision (one transaction of ranges): each key's state.
    private func readAll(_ keys: [[UInt8]]) async throws(EtcdError) -> [EtcdResponses.KeyValue?] {
        if keys.count == 1 { return [try await read(keys[0])] }
        let txn = EtcdTransaction(success: keys.map { .range(key: $0) })
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: false)
        let responses = answer.responses ?? []
        return keys.indices.map { $0 < responses.count ? responses[$0].response_range?.kvs?.first : nil }
    }

    /// Reads `keys` and every entry of namespace `ns` at one revision (one transaction of
    /// ranges): each key's state, the entries by key (without the namespace's prefix), and
    /// that revision.
    private func readAll(_ keys: [[UInt8]], andEntriesOf ns: String) async throws(EtcdError)
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

    private func exists(_ keys: [[UInt8]]) async throws(EtcdError) -> Int {
        let unique = TransactionGrouping.unique(keys)
        let found = try await readAll(unique)
        var present = Set<[UInt8]>()
        for (key, kv) in zip(unique, found) where kv != nil { present.insert(key) }
        return keys.filter { present.contains($0) }.count
    }

    private func scan(_ ns: String, after: [UInt8]?, prefix keyPrefix: [UInt8], limit: Int) async throws(EtcdError) -> ScanPage {
        let base = etcdKey(ns, keyPrefix)
        let start = after.map { EtcdKeys.after(etcdKey(ns, $0)) } ?? base
        let request = EtcdRequest.range(key: start, rangeEnd: EtcdKeys.rangeEnd(ofPrefix: base), limit: limit)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        let strip = etcdKey(ns, []).count
        let entries = (answer.kvs ?? []).map { KeyValue(key: Array($0.keyBytes.dropFirst(strip)), value: $0.valueBytes) }
        let next: ScanCursor = (answer.more ?? false) && !entries.isEmpty ? .after(entries.last!.key) : .start
        return ScanPage(entries: entries, next: next)
    }

    // MARK: - Writes

    private func conditionalPut(_ key: [UInt8], value: [UInt8], ifVersion version: UInt64, lease: Int64) async throws(EtcdError) -> Outcome {
        guard version <= UInt64(Int64.max) else { return .conditionFailed }
        let txn = EtcdTransaction(compare: [EtcdCompare(key: key, modRevision: Int64(version))], success: [.put(key: key, value: value, lease: lease)])
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        guard answer.succeeded == true else { return .conditionFailed }
        return .version(UInt64(answer.header?.revisionValue ?? 0))
    }

    private func delete(_ keys: [[UInt8]], in ns: String) async throws(EtcdError) -> Int {
        let txn = transaction(of: TransactionGrouping.unique(keys).map { .deleteRange(key: $0) }, in: ns)
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        // None of the keys existed: the branch that ran is empty, and so are its responses.
        return (answer.responses ?? []).reduce(0) { $0 + ($1.response_delete_range?.deletedValue ?? 0) }
    }

    /// Resolves `steps` against the keys read at one revision and commits the writes in one
    /// transaction guarded by those keys' versions; again from the read if one changed meanwhile.
    private func batch(_ steps: [BatchStep], in ns: String) async throws(EtcdError) -> Outcome {
        let keys = BatchResolver.keys(of: steps)
        let etcdKeys = keys.map { etcdKey(ns, $0) }
        let unchanged = steps.compactMap { step -> EtcdCompare? in
            guard case .unchangedSince(let sequence) = step else { return nil }
            return unchangedSince(sequence, in: ns)
        }
        let readsNamespace = BatchResolver.readsNamespace(steps)
        let readsLifetimes = BatchResolver.readsLifetimes(steps)
        for _ in 0..<Self.maxAttempts {
            var read: [EtcdResponses.KeyValue?]
            var namespace: [[UInt8]: VersionedValue] = [:]
            // A read of the whole namespace holds only if none of its keys changes before the
            // write: the same guard as WATCH's, from the revision it was read at.
            var readGuard: [EtcdCompare] = []
            if readsNamespace {
                let whole = try await readAll(etcdKeys, andEntriesOf: ns)
                (read, namespace) = (whole.keys, whole.entries)
                readGuard = [unchangedSince(whole.revision, in: ns)]
            } else {
                read = try await readAll(etcdKeys)
            }
            var current: [[UInt8]: BatchResolver.State] = [:]
            for (key, kv) in zip(keys, read) {
                current[key] = kv.map { VersionedValue(value: $0.valueBytes, version: UInt64($0.modRevision)) }
            }
            let lifetimes = readsLifetimes ? try await self.lifetimes(of: keys, read) : [:]
            switch BatchResolver.resolve(steps, current: current, namespace: namespace, lifetimes: lifetimes, now: clock(), limits: limits) {
            case .conditionFailed: return .conditionFailed
            case .refused(let error):
                // WATCH's guard comes first, as in Redis and the local engine: a transaction
                // whose namespace was written since is not run (*-1), so none of its steps fails.
                if !unchanged.isEmpty, try await lastChange(of: ns) > steps.watchedSequence { return .conditionFailed }
                return .failure(error)
            case .apply(let writes, let outcomes):
                guard !writes.isEmpty || !unchanged.isEmpty else { return .batch(outcomes) }
                let compare = zip(etcdKeys, read).map { EtcdCompare(key: $0, modRevision: $1?.modRevision ?? 0) }
                // The compare keeps each key on the lease it was read with (a revoked lease
                // deletes its keys, failing the compare), so an INCR can name that lease again.
                let readLeases = Dictionary(zip(keys, read.map { $0?.leaseID ?? 0 }), uniquingKeysWith: { first, _ in first })
                // The connections whose keys get a lease of theirs stay claimed until the `txn` is sent.
                var claims: [UInt64] = []
                defer { for owner in claims { leases.endClaim(owner) } }
                let leaseIDs: [[UInt8]: Int64]
                switch try await grantLeases(for: writes, readWith: readLeases, claims: &claims) {
                case .granted(let granted): leaseIDs = granted
                case .otherAgentsKey: return .failure(Self.otherAgentsKey)
                case .ownerGone: continue  // its key went with its lease: read again
                }
                var success: [EtcdRequest] = writes.map { write in
                    let key = etcdKey(ns, write.key)
                    return write.value.map { .put(key: key, value: $0, lease: leaseIDs[write.key] ?? 0) } ?? .deleteRange(key: key)
                }
                if success.contains(where: \.isDelete) { success.append(markerPut(ns)) }
                let txn = EtcdTransaction(compare: unchanged + readGuard + compare, success: success)
                let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: !writes.isEmpty)
                if answer.succeeded == true { return .batch(outcomes) }
                // WATCH's guard failed (not one of the keys read): nothing to retry.
                if !unchanged.isEmpty, try await lastChange(of: ns) > steps.watchedSequence { return .conditionFailed }
            }
        }
        throw EtcdError(.unavailable, "the keys kept changing: \(Self.maxAttempts) attempts of this write failed under contention")
    }

    /// What ``grantLeases(for:readWith:claims:)`` came to.
    private enum LeaseGrant {
        /// The lease ID to put each written key with (0: none).
        case granted([[UInt8]: Int64])
        /// A key that gets a lease of its connection's belongs to another agent's connection.
        case otherAgentsKey
        /// A connection whose key gets a lease of its own ended meanwhile, and the key with it.
        case ownerGone
    }

    /// The refusal of a deadline change of a key another agent's connection owns.
    static let otherAgentsKey = StoreError(.invalidArgument, "the key belongs to a connection of another agent: in cluster mode only that agent can change its deadline")

    /// The lease each of a resolved batch's `writes` is put with: the one its key was read with
    /// (`readWith`), none, one per deadline second (granted now that the batch is sure to be
    /// tried), or a lease of the connection that owns the key, which stays claimed (its owner
    /// added to `claims`) until the caller ends the claim.
    private func grantLeases(for writes: [(key: [UInt8], value: [UInt8]?, lease: BatchResolver.Lease)], readWith read: [[UInt8]: Int64],
                             claims: inout [UInt64]) async throws(EtcdError) -> LeaseGrant {
        var byDeadline: [UInt64: Int64] = [:]
        var ids: [[UInt8]: Int64] = [:]
        for write in writes where write.value != nil {
            switch write.lease {
            case .asRead: ids[write.key] = read[write.key] ?? 0
            case .none: ids[write.key] = 0
            case .deadline(let deadline):
                if byDeadline[deadline] == nil { byDeadline[deadline] = try await leases.expiryLease(deadline: deadline) }
                ids[write.key] = byDeadline[deadline]
            case .owned(let deadline):
                guard let owner = leases.claimOwner(ofLease: read[write.key] ?? 0) else { return .otherAgentsKey }
                claims.append(owner)
                guard let lease = try await lease(owner: owner, deadline: deadline) else { return .ownerGone }
                ids[write.key] = lease
            }
        }
        return .granted(ids)
    }

    /// The lifetimes of `keys` as `read` found them (none for a key without a lease or absent):
    /// the deadline its lease's ID says (or, for a lease an older agent numbered, the one etcd
    /// gives), and an owner (1) for a key of a connection.
    private func lifetimes(of keys: [[UInt8]], _ read: [EtcdResponses.KeyValue?]) async throws(EtcdError) -> [[UInt8]: Lifetime] {
        var lifetimes: [[UInt8]: Lifetime] = [:]
        for (key, kv) in zip(keys, read) {
            guard let kv, kv.leaseID != 0 else { continue }
            let owned = EtcdLeaseID(kv.leaseID)?.isOwned == true
            lifetimes[key] = Lifetime(deadline: try await deadline(of: kv) ?? 0, owner: owned ? 1 : 0)
        }
        return lifetimes
    }

    private func lifetimePut(_ put: LifetimePut, in ns: String) async throws(EtcdError) -> Outcome {
        let deadline = put.milliseconds == 0 ? 0 : clock() + put.milliseconds
        guard let lease = try await lease(owner: put.owner, deadline: deadline) else {
            throw EtcdError(.unavailable, "this connection's lease is gone (it is ending)")
        }
        let key = etcdKey(ns, put.key)
        if let version = put.ifVersion { return try await conditionalPut(key, value: Array(put.value), ifVersion: version, lease: lease) }
        let request = EtcdRequest.put(key: key, value: Array(put.value), lease: lease)
        _ = try await client.call(request.path, body: request.body, write: true)
        return .stored
    }

    /// The lease for a key of connection `owner` (0: nobody) expiring at `deadline`
    /// (milliseconds since the epoch; 0: never); 0 for neither; nil if `owner` ended while
    /// another connection had claimed it.
    private func lease(owner: UInt64, deadline: UInt64) async throws(EtcdError) -> Int64? {
        switch (owner != 0, deadline != 0) {
        case (true, true): return try await leases.ownedLease(of: owner, deadline: deadline)
        case (true, false): return try await leases.sessionLease(of: owner)
        case (false, true): return try await leases.expiryLease(deadline: deadline)
        case (false, false): return 0
        }
    }

    /// PEXPIRE and PERSIST: the key is written again, with its value, under the new lease (or
    /// none), if it has not changed since it was read. A key of a connection keeps its owner
    /// (which must then be a connection of this agent's: only it can renew the lease).
    /// `deadline` is in milliseconds since the epoch (nil: none; at or before now: delete).
    private func setTimeToLive(_ key: [UInt8], deadline: UInt64?, in ns: String) async throws(EtcdError) -> Outcome {
        for _ in 0..<Self.maxAttempts {
            guard let kv = try await read(key) else { return .integer(0) }
            if let outcome = try await setTimeToLive(of: kv, key, deadline: deadline, in: ns) { return outcome }
        }
        throw EtcdError(.unavailable, "the key kept changing: \(Self.maxAttempts) attempts failed under contention")
    }

    /// One attempt of ``setTimeToLive(_:deadline:in:)`` on the key as `kv` found it: nil if
    /// it changed since. An absolute deadline, so that HEXPIREAT's second is kept exactly
    /// however long the request takes.
    private func setTimeToLive(of kv: EtcdResponses.KeyValue, _ key: [UInt8], deadline: UInt64?, in ns: String) async throws(EtcdError) -> Outcome? {
        let current = EtcdLeaseID(kv.leaseID)
        if deadline == nil && (kv.leaseID == 0 || current?.kind == .owner) { return .integer(0) }
        if let deadline, deadline <= clock() {
            let txn = EtcdTransaction(compare: [EtcdCompare(key: key, modRevision: kv.modRevision)], success: [.deleteRange(key: key), markerPut(ns)])
            let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
            return answer.succeeded == true ? .integer(1) : nil
        }
        var owner: UInt64 = 0
        if current?.isOwned == true {
            guard let found = leases.claimOwner(ofLease: kv.leaseID) else {
                return .failure(Self.otherAgentsKey)
            }
            owner = found
        }
        let granted: Int64?
        do { granted = try await lease(owner: owner, deadline: deadline ?? 0) } catch {
            if owner != 0 { leases.endClaim(owner) }
            throw error
        }
        if owner != 0 { leases.endClaim(owner) }
        // Its connection ended meanwhile: the lease the key has is revoked, and the key with it.
        guard let lease = granted else { return .integer(0) }
        let txn = EtcdTransaction(compare: [EtcdCompare(key: key, modRevision: kv.modRevision)],
                                  success: [.put(key: key, value: kv.valueBytes, lease: lease)])
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        return answer.succeeded == true ? .integer(1) : nil
    }

    /// HEXPIRE and its family: a batch of one step, so all the keys in one `txn`, as in a MULTI.
    /// Key by key (``expire(_:_:in:)``) where that cannot be: more keys than etcd takes in one
    /// `txn` (its `--max-txn-ops`).
    private func expire(_ expiry: KeyExpiry, in ns: String) async throws(EtcdError) -> Outcome {
        do {
            let outcome = try await batch([.expire(expiry)], in: ns)
            if case .batch(let results) = outcome { return results[0] }
            return outcome
        } catch where error.kind == .tooLarge && expiry.keys.count > 1 {}
        var results: [Outcome] = []
        for key in expiry.keys {
            let outcome = try await expire(etcdKey(ns, key), expiry, in: ns)
            if case .failure = outcome { return outcome }
            results.append(outcome)
        }
        return .batch(results)
    }

    /// HEXPIRE and its family, for one key, where one `txn` cannot take them all: judged on its
    /// deadline as read, then set (or removed, or the key deleted) if the key has not changed
    /// since, as `PEXPIRE` does, a key of this agent's connection keeping its owner. The outcome
    /// is the ``KeyExpiry/Result``'s number, or the failure of a key another agent's connection owns.
    private func expire(_ key: [UInt8], _ expiry: KeyExpiry, in ns: String) async throws(EtcdError) -> Outcome {
        func yield(_ result: KeyExpiry.Result, _ kv: EtcdResponses.KeyValue?) -> Outcome {
            expiry.yields == .values ? .value(kv?.valueBytes) : .integer(result.rawValue)
        }
        for _ in 0..<Self.maxAttempts {
            guard let kv = try await read(key), let deadline = try await deadline(of: kv) else { return yield(.absent, nil) }
            let now = clock()
            let (result, lifetime) = expiry.apply(to: Lifetime(deadline: deadline), now: now, granularity: EtcdLeases.deadlineGranularity)
            let newDeadline: UInt64?
            switch result {
            case .absent, .noDeadline, .conditionNotMet: return yield(result, kv)
            case .deleted: newDeadline = 0
            case .changed: newDeadline = lifetime!.deadline == 0 ? nil : lifetime!.deadline
            }
            switch try await setTimeToLive(of: kv, key, deadline: newDeadline, in: ns) {
            case nil: continue
            case .integer(0)?: return yield(.absent, kv)  // its connection ended meanwhile, and the key with it
            case .integer?: return yield(result, kv)
            case let other?: return other
            }
        }
        throw EtcdError(.unavailable, "the key kept changing: \(Self.maxAttempts) attempts failed under contention")
    }

    /// The deadline of the key `kv` as read, in milliseconds since the epoch (the end of the
    /// second it falls in; 0: none, as for a key only a connection owns), or nil if the key has
    /// gone since (its lease, numbered by an older agent, has ended).
    private func deadline(of kv: EtcdResponses.KeyValue) async throws(EtcdError) -> UInt64? {
        guard kv.leaseID != 0 else { return 0 }
        if let lease = EtcdLeaseID(kv.leaseID) { return lease.deadlineSecond.map { UInt64(max(0, $0)) * 1000 } ?? 0 }
        guard let seconds = try await leases.remainingSeconds(of: kv.leaseID) else { return nil }
        return clock() + UInt64(max(0, seconds)) * 1000
    }

    /// PTTL: -2 absent, -1 without deadline (an ephemeral key's connection lease is not one),
    /// else the milliseconds until the end of the second its deadline falls in (its lease's
    /// remaining seconds for a lease an older agent numbered).
    private func timeToLive(_ key: [UInt8]) async throws(EtcdError) -> Int {
        guard let kv = try await read(key), let deadline = try await deadline(of: kv) else { return -2 }
        guard deadline != 0 else { return -1 }
        return Int(clamping: deadline - min(deadline, clock()))
    }

    // MARK: - Changes

    /// Starts following `namespace`'s changes (CHANGES) `from` where asked, buffering at most
    /// about `limitBytes` of them, telling `listener` when there are more (``EtcdChangeStream``).
    /// Sequences are etcd revisions. `FROM` a revision etcd has compacted away fails with the
    /// oldest it still has; `SNAPSHOT` reads the namespace's keys at the current revision.
    public func follow(_ namespace: String, from start: FollowFrom, limitBytes: Int, listener: ChangeListener) async throws(EtcdError) -> FollowStart {
        var current = UInt64(try await revision())
        var after = current
        var snapshot: ChangeSnapshot?
        switch start {
        case .now:
            break
        case .snapshot:
            (current, snapshot) = try await self.snapshot(of: namespace, at: current)
            after = current
        case .sequence(let sequence):
            guard sequence <= current else {
                throw EtcdError(.refused, "FROM sequence \(sequence) is after the last sequence (the cluster's revision, \(current))")
            }
            try await checkHeld(after: sequence)
            after = sequence
        }
        let stream = EtcdChangeStream(namespace: namespace, client: client, keyPrefix: etcdKey(namespace, []), marker: marker(of: namespace),
                                      after: after, catchingUp: after < current, limitBytes: limitBytes, listener: listener,
                                      followers: followers)
        stream.start()
        return FollowStart(feed: stream, sequence: after, snapshot: snapshot, namespace: nil)
    }

    /// UNLINK: when namespace `ns` holds a key, deletes all its keys and puts its marker (for
    /// WATCH), in one `txn`; whether it held one. (A namespace is there only while it holds a
    /// key, and revisions are the cluster's: a name used again numbers on from there.)
    public func removeNamespace(_ ns: String) async throws(EtcdError) -> Bool {
        let base = etcdKey(ns, [])
        let end = EtcdKeys.rangeEnd(ofPrefix: base)
        // Every key's mod_revision is 0 only when there is none.
        let txn = EtcdTransaction(compare: [EtcdCompare(key: base, rangeEnd: end, modRevision: 0, less: false)],
                                  failure: [.deleteRange(key: base, rangeEnd: end), markerPut(ns)])
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        return answer.succeeded != true
    }

    /// The marker of `namespace` (``WatchUpdate``): `<prefix>ns0`, where its key range ends. Put
    /// (empty) by a CHANGES follower catching up, and with every delete, so that the newest
    /// mod_revision of the namespace's keys and marker shows its last change, deletes included.
    func marker(of namespace: String) -> [UInt8] { EtcdKeys.rangeEnd(ofPrefix: etcdKey(namespace, [])) }

    /// The put of `namespace`'s marker.
    private func markerPut(_ namespace: String) -> EtcdRequest { .put(key: marker(of: namespace), value: []) }

    /// The range of `namespace`'s keys and its marker, which WATCH's sequence and guard cover.
    private func markedRange(of namespace: String) -> (key: [UInt8], end: [UInt8]) {
        (etcdKey(namespace, []), EtcdKeys.after(marker(of: namespace)))
    }

    /// The revision of `namespace`'s last change (WATCH's sequence): the newest mod_revision of
    /// its keys and its marker (0: none). A key deleted by its lease (an expiry, an ephemeral
    /// key's release) moves no marker: such a delete is not seen here.
    public func lastChange(of namespace: String) async throws(EtcdError) -> UInt64 {
        let range = markedRange(of: namespace)
        let request = EtcdRequest.range(key: range.key, rangeEnd: range.end, limit: 1, newestFirst: true)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return UInt64(answer.kvs?.first?.modRevision ?? 0)
    }

    /// WATCH's guard in a transaction: no key of `namespace`, nor its marker, was written after
    /// revision `sequence`.
    private func unchangedSince(_ sequence: UInt64, in namespace: String) -> EtcdCompare {
        let range = markedRange(of: namespace)
        return EtcdCompare(key: range.key, rangeEnd: range.end, modRevision: Int64(sequence) + 1, less: true)
    }

    /// The keys and values of `namespace` at one revision, `revision` first, and that revision.
    /// A large namespace is read a page at a time, all at that revision: when etcd compacts it
    /// before the last page (a COMPACT by another client, or etcd's own), the whole read is
    /// made again at the revision of that moment.
    private func snapshot(of namespace: String, at revision: UInt64) async throws(EtcdError) -> (UInt64, ChangeSnapshot) {
        var at = revision
        for _ in 0..<Self.snapshotAttempts {
            do { return (at, ChangeSnapshot(entries: try await entries(of: namespace, at: at))) } catch where error.message.contains("compacted") {
                at = UInt64(try await self.revision())
            }
        }
        throw EtcdError(.unavailable, "etcd compacted its history \(Self.snapshotAttempts) times while the snapshot of \(namespace) was read; try again")
    }

    /// How many times a snapshot is read again when etcd compacts the revision it reads at.
    static let snapshotAttempts = 5

    /// Every key and value of `namespace` as of `revision`, in key order, read a page at a time.
    private func entries(of namespace: String, at revision: UInt64) async throws(EtcdError) -> [(key: [UInt8], value: [UInt8])] {
        let base = etcdKey(namespace, [])
        let end = EtcdKeys.rangeEnd(ofPrefix: base)
        var out: [(key: [UInt8], value: [UInt8])] = []
        var start = base
        var limit = Self.firstSnapshotPage
        while true {
            let request = EtcdRequest.range(key: start, rangeEnd: end, limit: limit, revision: Int64(revision))
            let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
            let kvs = answer.kvs ?? []
            var bytes = 0
            for kv in kvs {
                out.append((Array(kv.keyBytes.dropFirst(base.count)), kv.valueBytes))
                bytes += out[out.count - 1].key.count + out[out.count - 1].value.count
            }
            guard answer.more == true, let last = kvs.last else { return out }
            start = EtcdKeys.after(last.keyBytes)
            limit = Self.nextSnapshotPage(after: limit, keys: kvs.count, bytes: bytes)
        }
    }

    /// The keys the first page of a snapshot asks for.
    static let firstSnapshotPage = 1000
    /// The most keys a page of a snapshot asks for.
    static let maxSnapshotPage = 65_536
    /// About the most bytes of keys and values a page of a snapshot asks for.
    static let snapshotPageBytes = 16 << 20

    /// The keys the next page of a snapshot asks for, after a page of `keys` keys holding
    /// `bytes` bytes read with `limit`: twice as many, up to ``maxSnapshotPage`` and to what
    /// ``snapshotPageBytes`` holds at that page's size per key (at least one). etcd 3.4 counts
    /// every key from a page's start to the namespace's end whatever its limit, so pages that
    /// stayed at 1,000 keys made a snapshot's cost grow with the square of the namespace's size.
    static func nextSnapshotPage(after limit: Int, keys: Int, bytes: Int) -> Int {
        let perKey = max(1, bytes / max(1, keys))
        return max(1, min(limit * 2, maxSnapshotPage, snapshotPageBytes / perKey))
    }

    /// Throws ``EtcdError/Kind/compacted(oldest:)`` if etcd no longer holds every revision after
    /// `sequence` (a read as of it fails once it is compacted).
    private func checkHeld(after sequence: UInt64) async throws(EtcdError) {
        let request = EtcdRequest.range(key: prefix, limit: 1, countOnly: true, revision: Int64(max(sequence, 1)))
        do { _ = try await client.call(request.path, body: request.body, write: false) } catch where error.message.contains("compacted") {
            let compacted = await compactedRevision()
            throw EtcdError(.compacted(oldest: compacted.map { $0 + 1 } ?? 0), error.message)
        }
    }

    /// The revision etcd's history was last compacted to, which a watch from revision 1 is
    /// canceled with (nil: no answer within the client's timeout).
    private func compactedRevision() async -> Int64? {
        let (client, marker) = (self.client, self.marker(of: ""))
        return await withCheckedContinuation { done in
            DispatchQueue.global().async {
                var found: Int64?
                let began = MonotonicClock.seconds()
                var splitter = WatchMessageSplitter()
                let body = EtcdChangeStream.createRequest(marker, marker: marker, from: 1)
                try? client.streamingConnection().stream("/v3/watch", body: body, handle: { chunk in
                    for message in splitter.messages(chunk) {
                        if let decoded = try? EtcdResponses.decode(EtcdResponses.WatchMessage.self, from: message),
                           let compacted = WatchUpdate(decoded, keyPrefix: marker, marker: marker).compactRevision {
                            found = compacted
                            return false
                        }
                    }
                    return true
                }, idle: { MonotonicClock.seconds() - began < client.timeout })
                done.resume(returning: found)
            }
        }
    }

    // MARK: - Namespaces and the cluster

    /// The namespaces that hold at least one key, in name order, as a local server lists them
    /// (etcd's order of their keys puts `ns-b/…` before `ns/…`): keys-only ranges, a page of keys
    /// giving the names of as many namespaces as it reaches (``NamespaceNameWalk``).
    public func namespaceNames() async throws(EtcdError) -> [String] {
        var walk = NamespaceNameWalk(prefix: prefix)
        let end = EtcdKeys.rangeEnd(ofPrefix: prefix)
        while let start = walk.start {
            let request = EtcdRequest.range(key: start, rangeEnd: end, limit: walk.limit, keysOnly: true)
            let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
            walk.take(answer.kvs?.map(\.keyBytes) ?? [], more: answer.more ?? false)
        }
        return walk.names.sorted()
    }

    /// The cluster's current revision (WATCH's and CHANGES's sequence).
    public func revision() async throws(EtcdError) -> Int64 {
        let request = EtcdRequest.range(key: prefix, limit: 1, countOnly: true)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return answer.header?.revisionValue ?? 0
    }

    /// Compacts etcd's history, keeping the last ``changesHistory`` revisions (etcd's history
    /// is the whole cluster's: every namespace's is compacted together). Returns the revision
    /// compacted to (0: nothing to compact).
    @discardableResult
    public func compact() async throws(EtcdError) -> Int64 {
        let target = try await revision() - Int64(changesHistory)
        guard target > 0 else { return 0 }
        let body = Array("{\"revision\":\"\(target)\",\"physical\":false}".utf8)
        do { _ = try await client.call("/v3/kv/compaction", body: body, write: true) } catch where error.message.contains("compacted") {
            return target
        }
        return target
    }

    /// The facts INFO shows about the cluster: members, leader, revision, database size, and
    /// the agent's round-trip time to etcd.
    public func clusterFacts() async -> [(String, String)] {
        var facts: [(String, String)] = [("etcd_endpoints", client.endpoints.map(\.description).joined(separator: ",")),
                                         ("etcd_prefix", String(decoding: prefix, as: UTF8.self))]
        do {
            let status = try await client.call(EtcdResponses.Status.self, "/v3/maintenance/status", body: Array("{}".utf8), write: false)
            let members = try await client.call(EtcdResponses.MemberList.self, "/v3/cluster/member/list", body: Array("{}".utf8), write: false)
            let list = members.members ?? []
            let leader = list.first { $0.ID == status.leader }
            facts += [("etcd_status", "ok"), ("etcd_version", status.version ?? "?"), ("etcd_members", String(list.count)),
                      ("etcd_member_names", list.compactMap(\.name).sorted().joined(separator: ",")),
                      ("etcd_leader", leader?.name ?? status.leader ?? "none"),
                      ("etcd_revision", status.header?.revision ?? "0"), ("etcd_db_size", status.dbSize ?? "0"),
                      ("etcd_answering", client.currentEndpoint.description)]
        } catch {
            facts += [("etcd_status", "unavailable"), ("etcd_error", error.message.split(separator: "\n").joined(separator: " "))]
        }
        let trips = client.statistics
        facts += [("etcd_round_trips", String(trips.count)), ("etcd_latency_mean_us", String(Int(trips.meanMicroseconds))),
                  ("etcd_latency_last_us", String(Int(trips.lastMicroseconds))), ("ephemeral_leases", String(leases.sessionLeaseCount)),
                  ("changes_followers", String(followers.current))]
        return facts
    }

    /// Revokes the leases this agent holds (its ephemeral keys go at once) and stops renewing.
    public func close() async {
        await leases.close()
        client.closeAll()
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
