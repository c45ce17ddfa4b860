import ActorKVStore

/// Key lifetimes through etcd leases (``EtcdLeases``): puts with a deadline or an owner,
/// PEXPIRE/PERSIST and the field expiry commands, and the time a key has left.
extension EtcdStore {
    /// The refusal of a namespace's own deadline (Redis's `EXPIRE` of a hash), which an agent
    /// does not map: etcd gives a deadline to a key through a lease, and a namespace's keys
    /// written later, through any agent, would each have to be put with the namespace's lease.
    public static let noNamespaceDeadline = StoreError(.invalidArgument, "a deadline on a whole namespace (EXPIRE, PEXPIRE, EXPIREAT, PERSIST, TTL of a hash) is not available in cluster mode (--etcd): give its keys deadlines instead (HEXPIRE, HSETEX, PUT ... PX)")

    func lifetimePut(_ put: LifetimePut, in ns: String) async throws(EtcdError) -> Outcome {
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
    func lease(owner: UInt64, deadline: UInt64) async throws(EtcdError) -> Int64? {
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
    func setTimeToLive(_ key: [UInt8], deadline: UInt64?, in ns: String) async throws(EtcdError) -> Outcome {
        for _ in 0..<Self.maxAttempts {
            guard let kv = try await read(key) else { return .integer(0) }
            if let outcome = try await setTimeToLive(of: kv, key, deadline: deadline, in: ns) { return outcome }
        }
        throw EtcdError(.unavailable, "the key kept changing: \(Self.maxAttempts) attempts failed under contention")
    }

    /// One attempt of ``setTimeToLive(_:deadline:in:)`` on the key as `kv` found it: nil if
    /// it changed since. An absolute deadline, so that HEXPIREAT's second is kept exactly
    /// however long the request takes.
    func setTimeToLive(of kv: EtcdResponses.KeyValue, _ key: [UInt8], deadline: UInt64?, in ns: String) async throws(EtcdError) -> Outcome? {
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
    func expire(_ expiry: KeyExpiry, in ns: String) async throws(EtcdError) -> Outcome {
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
    func expire(_ key: [UInt8], _ expiry: KeyExpiry, in ns: String) async throws(EtcdError) -> Outcome {
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
    func deadline(of kv: EtcdResponses.KeyValue) async throws(EtcdError) -> UInt64? {
        guard kv.leaseID != 0 else { return 0 }
        if let lease = EtcdLeaseID(kv.leaseID) { return lease.deadlineSecond.map { UInt64(max(0, $0)) * 1000 } ?? 0 }
        guard let seconds = try await leases.remainingSeconds(of: kv.leaseID) else { return nil }
        return clock() + UInt64(max(0, seconds)) * 1000
    }

    /// PTTL: -2 absent, -1 without deadline (an ephemeral key's connection lease is not one),
    /// else the milliseconds until the end of the second its deadline falls in (its lease's
    /// remaining seconds for a lease an older agent numbered).
    func timeToLive(_ key: [UInt8]) async throws(EtcdError) -> Int {
        guard let kv = try await read(key), let deadline = try await deadline(of: kv) else { return -2 }
        guard deadline != 0 else { return -1 }
        return Int(clamping: deadline - min(deadline, clock()))
    }
}
