import ActorKVStore
import Synchronization

/// The etcd leases of an agent: one per connection that wrote an ephemeral key (kept alive
/// while the connection lives, revoked when it ends: etcd then deletes its keys); one per
/// connection and second for its ephemeral keys with a deadline in that second (kept alive
/// while the connection lives, until the deadline, then revoked); and one per second in which
/// keys with a deadline expire (shared by all of them, never renewed: etcd deletes the keys
/// when it runs out). Each lease's ID says which it is (``EtcdLeaseID``).
///
/// If the agent dies, nobody renews its connections' leases and etcd deletes their keys once
/// `ephemeralTTL` seconds have passed (a key with a deadline: by then, or soon after its
/// deadline, whichever is first).
public final class EtcdLeases: Sendable {
    private let client: EtcdClient
    /// Seconds a connection's lease lives without renewal (`--ephemeral-ttl`).
    public let ephemeralTTL: Int
    private let log: @Sendable (String) -> Void
    /// A connection and the second its keys' deadlines fall in.
    private struct OwnedDeadline: Hashable {
        var owner: UInt64
        var second: Int64
    }
    private struct State {
        /// Connection leases without deadline, by connection.
        var sessions: [UInt64: Int64] = [:]
        /// Connection leases with a deadline (until it passes).
        var owned: [OwnedDeadline: Int64] = [:]
        /// Expiry leases by the second (since the epoch) they run out at.
        var expiry: [Int64: Int64] = [:]
        /// Connections another connection is granting a lease for (a PERSIST or PEXPIRE of one
        /// of their keys), with how many such grants are under way.
        var claims: [UInt64: Int] = [:]
        /// Of those, the ones that ended meanwhile: a lease granted for them is revoked, not kept
        /// (nobody would revoke it: it would outlive its connection, renewed forever).
        var endedWhileClaimed: Set<UInt64> = []
        var closed = false

        /// The connection whose lease `lease` is, if it is one of this agent's.
        func owner(of lease: Int64) -> UInt64? {
            sessions.first { $0.value == lease }?.key ?? owned.first { $0.value == lease }?.key.owner
        }
    }
    private let state = Mutex(State())
    private let renewer = Mutex<Task<Void, Never>?>(nil)

    init(client: EtcdClient, ephemeralTTL: Int, log: @escaping @Sendable (String) -> Void) {
        self.client = client
        self.ephemeralTTL = ephemeralTTL
        self.log = log
    }

    /// How many connections hold a lease.
    public var sessionLeaseCount: Int {
        state.withLock { s in Set(s.sessions.keys).union(s.owned.keys.map(\.owner)).count }
    }

    /// The lease of connection `owner` for its keys without deadline, granted on its first
    /// ephemeral key. (Another connection's PERSIST of its key may ask at the same moment: the
    /// first grant recorded wins, the other is revoked.) Nil: `owner` ended while another
    /// connection's claim on it (``claimOwner(ofLease:)``) was waiting for the grant.
    func sessionLease(of owner: UInt64) async throws(EtcdError) -> Int64? {
        if let lease = state.withLock({ $0.sessions[owner] }) { return lease }
        let granted = try await grant(seconds: ephemeralTTL, kind: .owner, second: nil)
        guard let lease = await keepFirst(granted, at: owner, in: \.sessions, owner: owner) else { return nil }
        startRenewing()
        return lease
    }

    /// The lease of connection `owner` for its keys whose deadline (milliseconds since the
    /// epoch) falls in the same second as `deadline`: renewed while the connection lives, until
    /// then, and revoked at the end of that second. Nil: as for ``sessionLease(of:)``.
    func ownedLease(of owner: UInt64, deadline: UInt64) async throws(EtcdError) -> Int64? {
        let second = Self.endingSecond(of: deadline)
        let slot = OwnedDeadline(owner: owner, second: second)
        if let lease = state.withLock({ $0.owned[slot] }) { return lease }
        let left = max(1, Int(second - Int64(WallClock.milliseconds() / 1000)))
        let granted = try await grant(seconds: min(ephemeralTTL, left), kind: .ownerUntilDeadline, second: second)
        guard let lease = await keepFirst(granted, at: slot, in: \.owned, owner: owner) else { return nil }
        guard lease == granted else { return lease }
        startRenewing()
        Task { [weak self] in
            let wait = second * 1000 - Int64(WallClock.milliseconds())
            if wait > 0 { try? await Task.sleep(for: .milliseconds(wait)) }
            guard let self, self.state.withLock({ s in s.owned[slot] == lease ? s.owned.removeValue(forKey: slot) : nil }) != nil else { return }
            await self.revoke(lease)
        }
        return lease
    }

    /// The connection of this agent whose lease `lease` is (nil: none of this agent's
    /// connections', or one that ended), claimed for a grant on its behalf: if it ends before
    /// ``endClaim(_:)``, the leases granted for it meanwhile are revoked instead of kept.
    func claimOwner(ofLease lease: Int64) -> UInt64? {
        state.withLock { s in
            guard let owner = s.owner(of: lease) else { return nil }
            s.claims[owner, default: 0] += 1
            return owner
        }
    }

    /// Ends a claim of ``claimOwner(ofLease:)``.
    func endClaim(_ owner: UInt64) {
        state.withLock { s in
            let left = (s.claims[owner] ?? 1) - 1
            s.claims[owner] = left > 0 ? left : nil
            if left <= 0 { s.endedWhileClaimed.remove(owner) }
        }
    }

    /// A lease that runs out at the second after `deadline` (milliseconds since the epoch),
    /// shared by every key whose deadline falls in the same second.
    func expiryLease(deadline: UInt64) async throws(EtcdError) -> Int64 {
        let second = Self.endingSecond(of: deadline)
        let now = Int64(WallClock.milliseconds() / 1000)
        if let lease = state.withLock({ s -> Int64? in
            s.expiry = s.expiry.filter { $0.key > now }
            return s.expiry[second]
        }) { return lease }
        guard second - now <= Self.longestLeaseSeconds else {
            throw EtcdError(.refused, "a deadline \(second - now) seconds away cannot be kept in cluster mode: etcd's longest lease is \(Self.longestLeaseSeconds) seconds (about 285 years)")
        }
        let granted = try await grant(seconds: Int(max(1, second - now)), kind: .deadline, second: second)
        return await keepFirst(granted, at: second, in: \.expiry, owner: nil)!
    }

    /// The longest lease etcd grants (its `MaxLeaseTTL`), in seconds: a deadline further away
    /// cannot be kept by a lease (etcd answers "too large lease TTL").
    static let longestLeaseSeconds: Int64 = 9_000_000_000

    /// The milliseconds deadlines are kept to: a key expires at the end of the second its
    /// deadline falls in (``endingSecond(of:)``), so `GT` and `LT` compare deadlines so
    /// (``ActorKVStore/KeyExpiry/apply(to:now:granularity:)``).
    static let deadlineGranularity: UInt64 = 1000

    /// The second (since the epoch) at whose end a key with `deadline` (milliseconds since the
    /// epoch) expires: the end of the second the deadline falls in.
    static func endingSecond(of deadline: UInt64) -> Int64 { Int64((deadline + 999) / 1000) }

    /// Records `granted` at `key` of the leases at `table`, unless a grant that raced this one
    /// got there first: then that one is used and `granted`, which no key has yet, is revoked.
    /// A lease of connection `owner` that ended while claimed is revoked too, and nil returned.
    private func keepFirst<Key: Hashable>(_ granted: Int64, at key: Key, in table: WritableKeyPath<State, [Key: Int64]>,
                                          owner: UInt64?) async -> Int64? {
        let lease = state.withLock { s -> Int64? in
            if let owner, s.endedWhileClaimed.contains(owner) { return nil }
            if let first = s[keyPath: table][key] { return first }
            s[keyPath: table][key] = granted
            return granted
        }
        if lease != granted { await revoke(granted) }
        return lease
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
        let leases = state.withLock { s -> [Int64] in
            if s.claims[owner] != nil { s.endedWhileClaimed.insert(owner) }
            let owned = s.owned.filter { $0.key.owner == owner }
            for slot in owned.keys { s.owned[slot] = nil }
            return (s.sessions.removeValue(forKey: owner).map { [$0] } ?? []) + owned.values
        }
        for lease in leases { await revoke(lease) }
    }

    /// Revokes every connection's lease and stops renewing.
    func close() async {
        let leases = state.withLock { s -> [Int64] in
            s.closed = true
            defer { (s.sessions, s.owned) = ([:], [:]) }
            return Array(s.sessions.values) + s.owned.values
        }
        renewer.withLock { $0?.cancel() }
        for lease in leases { await revoke(lease) }
    }

    /// Grants a lease of `seconds` whose ID says `kind` and `second` (``EtcdLeaseID``), drawing
    /// another ID while etcd has the one asked for.
    private func grant(seconds: Int, kind: EtcdLeaseID.Kind, second: Int64?) async throws(EtcdError) -> Int64 {
        var attempt = 0
        while true {
            let wanted = EtcdLeaseID(kind: kind, deadlineSecond: second, random: UInt64.random(in: .min ... .max)).id
            let body = Array("{\"TTL\":\"\(seconds)\",\"ID\":\"\(wanted)\"}".utf8)
            let answer: EtcdResponses.LeaseGrant
            do {
                answer = try await client.call(EtcdResponses.LeaseGrant.self, "/v3/lease/grant", body: body, write: true)
            } catch where error.message.contains("lease already exists") && attempt < 8 {
                attempt += 1
                continue
            }
            guard let id = answer.ID.flatMap(Int64.init), id != 0 else {
                throw EtcdError(.refused, "etcd granted no lease: \(answer.error ?? "no ID in the answer")")
            }
            return id
        }
    }

    private func revoke(_ lease: Int64) async {
        let body = Array("{\"ID\":\"\(lease)\"}".utf8)
        do { _ = try await client.call("/v3/lease/revoke", body: body, write: true) } catch where error.kind == .leaseNotFound {
            return
        } catch {
            log("cluster: could not revoke lease \(lease) (\(error.message)); etcd deletes its keys within \(ephemeralTTL) s")
        }
    }

    /// Renews every connection's lease three times per TTL (one with a deadline only while it
    /// would otherwise run out before the deadline).
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
        // A lease renewed a third of a TTL ago runs out two thirds of a TTL from now: renew one
        // with a deadline while that is before its deadline (its revocation ends it on time).
        let runsOut = Int64(WallClock.milliseconds()) + Int64(ephemeralTTL) * 2000 / 3
        let leases = state.withLock { s -> [(UInt64, Int64)] in
            guard !s.closed else { return [] }
            let owned = s.owned.filter { runsOut < $0.key.second * 1000 }.map { ($0.key.owner, $0.value) }
            return s.sessions.map { ($0.key, $0.value) } + owned
        }
        for (owner, lease) in leases {
            let body = Array("{\"ID\":\"\(lease)\"}".utf8)
            do {
                let answer = try await client.call(EtcdResponses.LeaseKeepAlive.self, "/v3/lease/keepalive", body: body, write: false)
                if (answer.result?.TTL.flatMap(Int.init) ?? 0) <= 0 {
                    // Expired (the agent could not reach etcd for a whole TTL): its keys are gone.
                    state.withLock { s in
                        if s.sessions[owner] == lease { s.sessions[owner] = nil }
                        s.owned = s.owned.filter { $0.value != lease }
                    }
                    log("cluster: the lease of connection \(owner) expired; its ephemeral keys were deleted by etcd")
                }
            } catch {
                log("cluster: could not renew the lease of connection \(owner): \(error.message)")
            }
        }
    }
}
