import ActorKVStore
import Synchronization

/// The etcd leases of an agent: one per connection that wrote an ephemeral key (kept alive
/// while the connection lives, revoked when it ends: etcd then deletes its keys), and one per
/// second in which keys with a deadline expire (shared by all of them, never renewed: etcd
/// deletes the keys when it runs out).
///
/// If the agent dies, nobody renews its connections' leases and etcd deletes their keys once
/// `ephemeralTTL` seconds have passed.
public final class EtcdLeases: Sendable {
    private let client: EtcdClient
    /// Seconds a connection's lease lives without renewal (`--ephemeral-ttl`).
    public let ephemeralTTL: Int
    private let log: @Sendable (String) -> Void
    private struct State {
        var sessions: [UInt64: Int64] = [:]
        /// Expiry leases by the second (since the epoch) they run out at.
        var expiry: [UInt64: Int64] = [:]
        var closed = false
    }
    private let state = Mutex(State())
    private let renewer = Mutex<Task<Void, Never>?>(nil)

    init(client: EtcdClient, ephemeralTTL: Int, log: @escaping @Sendable (String) -> Void) {
        self.client = client
        self.ephemeralTTL = ephemeralTTL
        self.log = log
    }

    /// How many connections hold a lease.
    public var sessionLeaseCount: Int { state.withLock { $0.sessions.count } }

    /// The lease of connection `owner`, granted on its first ephemeral key. (A connection's
    /// commands run one after another, so two grants for one owner never race.)
    func sessionLease(of owner: UInt64) async throws(EtcdError) -> Int64 {
        if let lease = state.withLock({ $0.sessions[owner] }) { return lease }
        let lease = try await grant(seconds: ephemeralTTL)
        state.withLock { $0.sessions[owner] = lease }
        startRenewing()
        return lease
    }

    /// A lease that runs out at the second after `deadline` (milliseconds since the epoch),
    /// shared by every key whose deadline falls in the same second.
    func expiryLease(deadline: UInt64) async throws(EtcdError) -> Int64 {
        let second = (deadline + 999) / 1000
        let now = WallClock.milliseconds() / 1000
        if let lease = state.withLock({ s -> Int64? in
            s.expiry = s.expiry.filter { $0.key > now }
            return s.expiry[second]
        }) { return lease }
        let lease = try await grant(seconds: Int(max(1, second - now)))
        return state.withLock { s in
            if let other = s.expiry[second] { return other }
            s.expiry[second] = lease
            return lease
        }
    }

    /// Seconds left of `lease` (nil: it is gone).
    func remainingSeconds(of lease: Int64) async throws(EtcdError) -> Int? {
        let body = Array("{\"ID\":\"\(lease)\"}".utf8)
        let answer = try await client.call(EtcdResponses.LeaseTimeToLive.self, "/v3/lease/timetolive", body: body, write: false)
        guard let ttl = answer.TTL.flatMap(Int.init), ttl >= 0 else { return nil }
        return ttl
    }

    /// Revokes connection `owner`'s lease, if it has one: etcd deletes its keys.
    public func release(_ owner: UInt64) async {
        guard let lease = state.withLock({ $0.sessions.removeValue(forKey: owner) }) else { return }
        await revoke(lease)
    }

    /// Revokes every connection's lease and stops renewing.
    func close() async {
        let leases = state.withLock { s -> [Int64] in
            s.closed = true
            defer { s.sessions = [:] }
            return Array(s.sessions.values)
        }
        renewer.withLock { $0?.cancel() }
        for lease in leases { await revoke(lease) }
    }

    private func grant(seconds: Int) async throws(EtcdError) -> Int64 {
        let body = Array("{\"TTL\":\"\(seconds)\"}".utf8)
        let answer = try await client.call(EtcdResponses.LeaseGrant.self, "/v3/lease/grant", body: body, write: true)
        guard let id = answer.ID.flatMap(Int64.init), id != 0 else {
            throw EtcdError(.refused, "etcd granted no lease: \(answer.error ?? "no ID in the answer")")
        }
        return id
    }

    private func revoke(_ lease: Int64) async {
        let body = Array("{\"ID\":\"\(lease)\"}".utf8)
        do { _ = try await client.call("/v3/lease/revoke", body: body, write: true) } catch where error.kind == .leaseNotFound {
            return
        } catch {
            log("cluster: could not revoke lease \(lease) (\(error.message)); etcd deletes its keys within \(ephemeralTTL) s")
        }
    }

    /// Renews every connection's lease three times per TTL.
    private func startRenewing() {
        renewer.withLock { task in
            guard task == nil else { return }
            let interval = Duration.milliseconds(max(100, ephemeralTTL * 1000 / 3))
            task = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    guard let self else { return }
                    await self.renewAll()
                }
            }
        }
    }

    private func renewAll() async {
        let leases = state.withLock { $0.closed ? [:] : $0.sessions }
        for (owner, lease) in leases {
            let body = Array("{\"ID\":\"\(lease)\"}".utf8)
            do {
                let answer = try await client.call(EtcdResponses.LeaseKeepAlive.self, "/v3/lease/keepalive", body: body, write: false)
                if (answer.result?.TTL.flatMap(Int.init) ?? 0) <= 0 {
                    // Expired (the agent could not reach etcd for a whole TTL): its keys are gone.
                    state.withLock { s in if s.sessions[owner] == lease { s.sessions[owner] = nil } }
                    log("cluster: the lease of connection \(owner) expired; its ephemeral keys were deleted by etcd")
                }
            } catch {
                log("cluster: could not renew the lease of connection \(owner): \(error.message)")
            }
        }
    }
}
