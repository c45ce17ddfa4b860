@testable import ActorKVStore
import Testing

/// The bookkeeping of key lifetimes (deadlines and owners beside the map) and the pacing of the
/// expiry sweeper: pure logic, checked without a namespace.
@Suite("Key lifetimes and sweep pacing")
struct LifetimeTests {
    private func key(_ text: String) -> [UInt8] { Array(text.utf8) }

    @Test("due keys come out earliest first; a changed or cleared deadline leaves no stale entry behind")
    func dueKeysInDeadlineOrder() {
        var lifetimes = KeyLifetimes()
        // Deadlines in scrambled order, more than a heap of one level holds.
        let deadlines: [UInt64] = [50, 10, 40, 30, 20, 70, 60, 90, 80, 100]
        for (i, deadline) in deadlines.enumerated() { lifetimes.set(key("k\(i)"), Lifetime(deadline: deadline, owner: 0)) }
        lifetimes.set(key("k0"), Lifetime(deadline: 5, owner: 0))     // 50 → 5: the old entry is stale
        _ = lifetimes.remove(key("k4"))                                 // 20: gone
        #expect(lifetimes.expiringCount == 9)
        #expect(lifetimes.hasDue(at: 4) == false)
        #expect(lifetimes.hasExpired(key("k1"), at: 4) == false)
        #expect(lifetimes.hasExpired(key("k1"), at: 10))

        let due = lifetimes.takeDue(at: 60, limit: 100)
        #expect(due == [key("k0"), key("k1"), key("k3"), key("k2"), key("k6")])  // 5, 10, 30, 40, 60
        // What was taken and not deleted goes back; keys not due stay.
        lifetimes.requeue([key("k3")])
        #expect(lifetimes.takeDue(at: 60, limit: 100) == [key("k3")])
        #expect(lifetimes.takeDue(at: 1000, limit: 2) == [key("k5"), key("k8")])  // 70, 80: at most the limit
        // Counted: the due keys not taken yet (k7 at 90, k9 at 100); a taken key is deleted by
        // the namespace in the same turn.
        #expect(lifetimes.expiredCount(at: 1000) == 2)
        #expect(lifetimes.expiredCount(at: 95) == 1)
    }

    @Test("before the earliest deadline nothing is due, and a key without a deadline never is")
    func hasDueFollowsTheEarliestDeadline() {
        var lifetimes = KeyLifetimes()
        #expect(lifetimes.hasDue(at: .max) == false)
        lifetimes.set(key("owned"), Lifetime(deadline: 0, owner: 7))
        #expect(lifetimes.hasDue(at: .max) == false)
        #expect(lifetimes.hasExpired(key("owned"), at: .max) == false)
        lifetimes.set(key("soon"), Lifetime(deadline: 1_000, owner: 0))
        #expect(lifetimes.hasDue(at: 999) == false)
        #expect(lifetimes.hasDue(at: 1_000))
        #expect(lifetimes.hasExpired(key("soon"), at: 1_000))
        #expect(lifetimes.keys(ownedBy: 7) == [key("owned")])
        _ = lifetimes.remove(key("owned"))
        #expect(lifetimes.keys(ownedBy: 7).isEmpty)
        #expect(lifetimes.ephemeralCount == 0)
    }

    @Test("an owner's keys: each given, taken by another owner or removed leaves the owner's other keys; the last one gone leaves none")
    func ownersKeepTheirOtherKeys() {
        var lifetimes = KeyLifetimes()
        for name in ["a", "b", "c"] { lifetimes.set(key(name), Lifetime(deadline: 0, owner: 7)) }
        lifetimes.set(key("x"), Lifetime(deadline: 0, owner: 8))
        #expect(Set(lifetimes.keys(ownedBy: 7)) == [key("a"), key("b"), key("c")])
        lifetimes.set(key("b"), Lifetime(deadline: 0, owner: 8))  // taken over
        _ = lifetimes.remove(key("a"))
        #expect(lifetimes.keys(ownedBy: 7) == [key("c")])
        #expect(Set(lifetimes.keys(ownedBy: 8)) == [key("x"), key("b")])
        lifetimes.set(key("c"), Lifetime(deadline: 5_000, owner: 0))  // now persistent with a deadline
        #expect(lifetimes.keys(ownedBy: 7).isEmpty)
        #expect(lifetimes.ephemeralCount == 2)
        #expect(lifetimes.expiringCount == 1)
    }

    @Test("after many deadline changes (heap rebuilds), every key comes out once, in deadline order")
    func heapRebuildKeepsOrder() {
        var lifetimes = KeyLifetimes()
        var rng = SystemRandomNumberGenerator()
        var expected: [String: UInt64] = [:]
        for _ in 0..<20 {
            for i in 0..<100 {
                let deadline = UInt64.random(in: 1...1_000_000, using: &rng)
                lifetimes.set(key("k\(i)"), Lifetime(deadline: deadline, owner: 0))
                expected["k\(i)"] = deadline
            }
        }
        #expect(lifetimes.expiringCount == 100)
        let due = lifetimes.takeDue(at: .max - 1, limit: 1_000)
        #expect(due.count == 100)
        #expect(Set(due.map { String(decoding: $0, as: UTF8.self) }) == Set(expected.keys))
        let order = due.map { expected[String(decoding: $0, as: UTF8.self)]! }
        #expect(order == order.sorted())
    }

    @Test("a frozen copy (for a snapshot being written) answers lookups and expiry as the original did, whatever the original does next")
    func frozenCopy() {
        var lifetimes = KeyLifetimes()
        for i in 0..<200 { lifetimes.set(key("k\(i)"), Lifetime(deadline: UInt64(1_000 + i * 10), owner: i % 3 == 0 ? 7 : 0)) }
        lifetimes.set(key("owned"), Lifetime(deadline: 0, owner: 9))
        let frozen = lifetimes.frozen()
        // The original goes on: keys taken due, deadlines changed, an owner's key dropped.
        let due = lifetimes.takeDue(at: 1_500, limit: 100)
        #expect(due.count == 51)
        for key in due { _ = lifetimes.remove(key) }
        lifetimes.set(key("k150"), Lifetime(deadline: 50, owner: 0))
        _ = lifetimes.remove(key("owned"))
        #expect(frozen.hasDue(at: 1_000) && !frozen.hasDue(at: 999))
        for i in 0..<200 {
            #expect(frozen.lifetime(of: key("k\(i)")) == Lifetime(deadline: UInt64(1_000 + i * 10), owner: i % 3 == 0 ? 7 : 0))
            #expect(frozen.hasExpired(key("k\(i)"), at: 1_500) == (i <= 50))
        }
        #expect(frozen.lifetime(of: key("owned")) == Lifetime(deadline: 0, owner: 9))
        #expect(frozen.expiringCount == 200 && frozen.ephemeralCount == 68)
        #expect(lifetimes.lifetime(of: key("k10")) == .none && lifetimes.hasExpired(key("k150"), at: 60))
    }

    @Test("a sweep that took t rests 9t (10% of the time) while requests come and t (50%) while none does; otherwise it waits for the next deadline, at most 100 ms")
    func pacing() {
        var pacing = SweepPacing()
        let ms: UInt64 = 1_000_000
        #expect(pacing.maySweep(at: 0))
        // Nothing swept yet: the next deadline decides, capped at the interval.
        #expect(pacing.delay(now: 0, wallNow: 1_000, earliest: 1_030) == 30 * ms)
        #expect(pacing.delay(now: 0, wallNow: 1_000, earliest: 9_000) == 100 * ms)
        #expect(pacing.delay(now: 0, wallNow: 1_000, earliest: 900) == 0)
        // A 5 ms sweep ending at t = 10 ms while clients are served: no sweep before 55 ms,
        // even with keys due.
        pacing.swept(from: 5 * ms, to: 10 * ms, busy: true)
        #expect(pacing.restUntil == 55 * ms)
        #expect(!pacing.maySweep(at: 54 * ms))
        #expect(pacing.maySweep(at: 55 * ms))
        #expect(pacing.delay(now: 10 * ms, wallNow: 1_000, earliest: 900) == 45 * ms)
        // The rest never shortens the wait for a later deadline.
        #expect(pacing.delay(now: 10 * ms, wallNow: 1_000, earliest: 1_050) == 50 * ms)
        // With nobody served meanwhile, the same sweep rests as long as it took.
        pacing.swept(from: 60 * ms, to: 65 * ms, busy: false)
        #expect(pacing.restUntil == 70 * ms)
        #expect(pacing.delay(now: 65 * ms, wallNow: 1_000, earliest: 900) == 5 * ms)
        // A sweep that found nothing to do costs (almost) no rest.
        pacing.swept(from: 80 * ms, to: 80 * ms, busy: true)
        #expect(pacing.maySweep(at: 80 * ms))
    }

    @Test("a snapshot taken at time t leaves out exactly the keys whose deadline passed by t, counts only what it writes, and reads back with every other key's value, version and lifetime")
    func snapshotLeavesOutExpiredKeys() throws {
        var map = OrderedMap()
        var lifetimes = KeyLifetimes()
        var kept: [[UInt8]: (value: [UInt8], version: UInt64, lifetime: Lifetime)] = [:]
        let now: UInt64 = 1_200
        for i in 0..<400 {
            let k = key("k\(i)"), value = Array("v\(i)".utf8), version = UInt64(i + 1)
            map.updateValue(value, forKey: k, version: version)
            let lifetime = switch i % 4 {
            case 0: Lifetime.none
            case 1: Lifetime(deadline: 1_003 + UInt64(i))  // passed by `now` for i <= 197 (exactly at it for 197)
            case 2: Lifetime(owner: Lifetime.recoveredOwner)  // ephemeral, no deadline
            default: Lifetime(deadline: 1_002 + UInt64(i), owner: Lifetime.recoveredOwner)  // passed for i <= 195, not at 199 (1_201)
            }
            if !lifetime.isNone {
                let marked = map.setMarked(true, forKey: k)
                #expect(marked)
                lifetimes.set(k, lifetime)
            }
            if !lifetime.hasExpired(at: now) { kept[k] = (value, version, lifetime) }
        }
        #expect(kept.count == 400 - 50 - 49)
        let header = SnapshotCodec.Header(namespace: "ttl", lastSequence: 400, createdAt: 1)
        // Encoded from a frozen copy, as a compaction does (it has no heap of deadlines to count from).
        var written = 0
        var document: [UInt8] = []
        written = SnapshotCodec.encode(map, header: header, lifetimes: lifetimes.frozen(), expiredAt: now) { (chunk: UnsafeRawBufferPointer) throws(Never) in
            document.append(contentsOf: chunk)
        }
        #expect(written == kept.count)
        #expect(document.firstRange(of: Array("\"count\":\(kept.count),".utf8)) != nil)
        let contents = try document.withUnsafeBytes { try SnapshotCodec.decodeContents($0) }
        #expect(contents.map.count == kept.count && contents.lifetimes.count == kept.values.count { !$0.lifetime.isNone })
        for (k, entry) in kept {
            #expect(contents.map.versionedValue(k) == VersionedValue(value: entry.value, version: entry.version))
            #expect(contents.lifetimes.lifetime(of: k) == entry.lifetime)
        }
        // Without a time, every key is written, expired or not.
        let whole = try SnapshotCodec.encode(map, header: header, lifetimes: lifetimes).withUnsafeBytes { try SnapshotCodec.decodeContents($0) }
        #expect(whole.map.count == 400 && whole.lifetimes.count == 300)
    }
}
