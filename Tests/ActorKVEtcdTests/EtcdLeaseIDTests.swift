@testable import ActorKVEtcd
import Testing

@Suite("Lease IDs that say what a lease is for")
struct EtcdLeaseIDTests {
    @Test("each kind and deadline round-trips through the ID, for random draws; IDs are positive and differ between draws")
    func roundTrip() {
        var seen = Set<Int64>()
        for _ in 0..<2000 {
            let second = Int64.random(in: 1_700_000_000...4_000_000_000)
            let random = UInt64.random(in: .min ... .max)
            for (kind, deadline) in [(EtcdLeaseID.Kind.owner, nil), (.ownerUntilDeadline, second), (.deadline, second)] {
                let made = EtcdLeaseID(kind: kind, deadlineSecond: deadline, random: random)
                #expect(made.id > 0)
                let decoded = EtcdLeaseID(made.id)
                #expect(decoded == made)
                #expect(decoded?.isOwned == (kind != .deadline))
                seen.insert(made.id)
            }
        }
        #expect(seen.count > 5900, "random bits make distinct IDs: \(seen.count) of 6000")
    }

    @Test("0, negative IDs and IDs without the agents' tag (numbered by etcd) decode to nil")
    func foreign() {
        #expect(EtcdLeaseID(0) == nil)
        #expect(EtcdLeaseID(-1) == nil)
        // etcd's own IDs, as the cluster test's members gave out.
        #expect(EtcdLeaseID(7_587_886_218_375_620_868) == nil)
        #expect(EtcdLeaseID(0x694d_7a1f_3c2b_0001) == nil)
        // The tag with a kind no agent uses.
        #expect(EtcdLeaseID(0x1000_0AC0 | 0x7) == nil)
        #expect(EtcdLeaseID(0x1000_0AC0 | 0x2) != nil)
    }
}
