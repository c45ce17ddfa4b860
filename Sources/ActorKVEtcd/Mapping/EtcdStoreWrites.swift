import ActorKVStore

/// The writes of ``EtcdStore``: conditional puts, deletes (with the namespace's marker), and
/// batches and transactions resolved against the keys read at one revision.
extension EtcdStore {
    func conditionalPut(_ key: [UInt8], value: [UInt8], ifVersion version: UInt64, lease: Int64) async throws(EtcdError) -> Outcome {
        guard version <= UInt64(Int64.max) else { return .conditionFailed }
        let txn = EtcdTransaction(compare: [EtcdCompare(key: key, modRevision: Int64(version))], success: [.put(key: key, value: value, lease: lease)])
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        guard answer.succeeded == true else { return .conditionFailed }
        return .version(UInt64(answer.header?.revisionValue ?? 0))
    }

    func delete(_ keys: [[UInt8]], in ns: String) async throws(EtcdError) -> Int {
        let txn = transaction(of: TransactionGrouping.unique(keys).map { .deleteRange(key: $0) }, in: ns)
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        // None of the keys existed: the branch that ran is empty, and so are its responses.
        return (answer.responses ?? []).reduce(0) { $0 + ($1.response_delete_range?.deletedValue ?? 0) }
    }

    /// Resolves `steps` against the keys read at one revision and commits the writes in one
    /// transaction guarded by those keys' versions; again from the read if one changed meanwhile.
    func batch(_ steps: [BatchStep], in ns: String) async throws(EtcdError) -> Outcome {
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
    enum LeaseGrant {
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
    func grantLeases(for writes: [(key: [UInt8], value: [UInt8]?, lease: BatchResolver.Lease)], readWith read: [[UInt8]: Int64],
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
    func lifetimes(of keys: [[UInt8]], _ read: [EtcdResponses.KeyValue?]) async throws(EtcdError) -> [[UInt8]: Lifetime] {
        var lifetimes: [[UInt8]: Lifetime] = [:]
        for (key, kv) in zip(keys, read) {
            guard let kv, kv.leaseID != 0 else { continue }
            let owned = EtcdLeaseID(kv.leaseID)?.isOwned == true
            lifetimes[key] = Lifetime(deadline: try await deadline(of: kv) ?? 0, owner: owned ? 1 : 0)
        }
        return lifetimes
    }
}
