@testable import ActorKVEtcd
import ActorKVStore
import Foundation
import Synchronization
import Testing

/// `EtcdLeases` against a fake member: the race between a connection ending and another
/// connection granting a lease on its behalf (PEXPIRE or PERSIST of one of its keys).
@Suite struct EtcdLeasesTests {
    @Test("a connection that ends while another's PEXPIRE of its key waits for a grant: that lease is revoked, not kept and renewed forever")
    func endedWhileClaimed() async throws {
        let hold = DispatchSemaphore(value: 0)
        let grants = Atomic<Int>(0)
        let revoked = Mutex<[String]>([])
        let member = try FakeMember(requests: { _, request in
            switch request.path {
            case "/v3/lease/grant":
                let id = request.json["ID"] as? String ?? "1"
                if grants.add(1, ordering: .relaxed).oldValue > 0 { hold.wait() }  // the second: held until the owner ended
                return .answer(200, Array(#"{"header":{"revision":"3"},"ID":"\#(id)","TTL":"10"}"#.utf8))
            case "/v3/lease/revoke":
                revoked.withLock { $0.append(request.json["ID"] as? String ?? "?") }
                return .answer(200, Array(#"{"header":{"revision":"4"}}"#.utf8))
            default:
                return .answer(404, Array(#"{"error":"not found","code":5,"message":"not found"}"#.utf8))
            }
        })
        let leases = EtcdLeases(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), ephemeralTTL: 10, log: { _ in })
        let first = try #require(try await leases.sessionLease(of: 7))
        let owner = try #require(leases.claimOwner(ofLease: first))
        #expect(owner == 7)
        async let second = leases.ownedLease(of: 7, deadline: WallClock.milliseconds() + 60_000)
        while grants.load(ordering: .relaxed) < 2 { try await Task.sleep(for: .milliseconds(5)) }
        await leases.release(7)
        hold.signal()
        let granted = try await second
        leases.endClaim(7)

        #expect(granted == nil, "a lease was kept for a connection that had ended")
        #expect(leases.sessionLeaseCount == 0)
        let ids = revoked.withLock { $0 }
        #expect(ids.count == 2 && ids.contains(String(first)), "revoked: \(ids)")
    }

    @Test("a deadline past etcd's longest lease is refused with a sentence saying so, before any grant; the longest one is asked for")
    func deadlineBeyondTheLongestLease() async throws {
        let asked = Mutex<[String]>([])
        let member = try FakeMember(requests: { _, request in
            let ttl = request.json["TTL"] as? String ?? "?"
            asked.withLock { $0.append(ttl) }
            return .answer(200, Array(#"{"header":{"revision":"3"},"ID":"\#(request.json["ID"] as? String ?? "1")","TTL":"\#(ttl)"}"#.utf8))
        })
        let leases = EtcdLeases(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), ephemeralTTL: 10, log: { _ in })
        let now = WallClock.milliseconds() / 1000 * 1000
        let longest = UInt64(EtcdLeases.longestLeaseSeconds) * 1000
        do {
            _ = try await leases.expiryLease(deadline: now + longest + 2_000)
            Issue.record("granted")
        } catch {
            #expect(error.kind == .refused && error.message.contains("etcd's longest lease is 9000000000 seconds"), "\(error)")
        }
        #expect(asked.withLock { $0 }.isEmpty, "nothing asked of etcd")
        _ = try await leases.expiryLease(deadline: now + longest - 1_000)
        let ttl = try #require(asked.withLock { $0 }.first.flatMap { Int64($0) })
        #expect(ttl <= EtcdLeases.longestLeaseSeconds && ttl > EtcdLeases.longestLeaseSeconds - 3, "\(ttl)")
    }

    @Test("a claim on a live connection: the lease granted for it is kept, and revoked when it ends")
    func claimOnALiveConnection() async throws {
        let revoked = Mutex<[String]>([])
        let member = try FakeMember(requests: { _, request in
            switch request.path {
            case "/v3/lease/grant":
                let id = request.json["ID"] as? String ?? "1"
                return .answer(200, Array(#"{"header":{"revision":"3"},"ID":"\#(id)","TTL":"10"}"#.utf8))
            default:
                revoked.withLock { $0.append(request.json["ID"] as? String ?? "?") }
                return .answer(200, Array(#"{"header":{"revision":"4"}}"#.utf8))
            }
        })
        let leases = EtcdLeases(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), ephemeralTTL: 10, log: { _ in })
        let first = try #require(try await leases.sessionLease(of: 9))
        _ = try #require(leases.claimOwner(ofLease: first))
        let owned = try #require(try await leases.ownedLease(of: 9, deadline: WallClock.milliseconds() + 60_000))
        leases.endClaim(9)
        #expect(leases.claimOwner(ofLease: owned) == 9)
        leases.endClaim(9)
        await leases.release(9)
        #expect(Set(revoked.withLock { $0 }) == [String(first), String(owned)])
        #expect(leases.sessionLeaseCount == 0)
        #expect(leases.claimOwner(ofLease: owned) == nil)
    }
}
