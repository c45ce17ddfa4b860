@testable import ActorKVStore
import ActorKVTestSupport
import Testing

/// Redis's HEXPIRE family over a namespace's keys (``Operation/expire(_:)`` and
/// ``Operation/deadlines(_:)``): the rule for each key, and the namespace's record of them.
@Suite("Deadlines of several keys: HEXPIRE's family")
struct KeyExpiryTests {
    static let now: UInt64 = 1_000_000

    @Test("each condition against a key without a deadline, with an earlier one, with a later one, and absent; past deadlines delete, owners stay")
    func conditions() {
        let none = Lifetime(deadline: 0, owner: 9)
        let earlier = Lifetime(deadline: Self.now + 500, owner: 0)
        let later = Lifetime(deadline: Self.now + 5_000, owner: 9)
        let target = KeyExpiry.Deadline.after(milliseconds: 1_000)  // now + 1,000
        // (condition, current, expected result): Redis's rules, a key without a deadline
        // counting as one that never expires.
        let table: [(KeyExpiry.Condition, Lifetime?, KeyExpiry.Result)] = [
            (.always, none, .changed), (.always, earlier, .changed), (.always, later, .changed), (.always, nil, .absent),
            (.noDeadline, none, .changed), (.noDeadline, earlier, .conditionNotMet), (.noDeadline, later, .conditionNotMet),
            (.hasDeadline, none, .conditionNotMet), (.hasDeadline, earlier, .changed), (.hasDeadline, later, .changed),
            (.later, none, .conditionNotMet), (.later, earlier, .changed), (.later, later, .conditionNotMet),
            (.earlier, none, .changed), (.earlier, earlier, .conditionNotMet), (.earlier, later, .changed),
            (.later, nil, .absent), (.earlier, nil, .absent),
        ]
        for (condition, current, expected) in table {
            let (result, lifetime) = KeyExpiry(keys: [], deadline: target, condition: condition).apply(to: current, now: Self.now)
            #expect(result == expected, "\(condition) on \(String(describing: current))")
            if result == .changed {
                #expect(lifetime == Lifetime(deadline: Self.now + 1_000, owner: current!.owner), "the owner stays")
            } else {
                #expect(lifetime == current, "unchanged")
            }
        }
        // Equal deadlines are neither later nor earlier.
        let same = Lifetime(deadline: Self.now + 1_000)
        #expect(KeyExpiry(keys: [], deadline: target, condition: .later).apply(to: same, now: Self.now).result == .conditionNotMet)
        #expect(KeyExpiry(keys: [], deadline: target, condition: .earlier).apply(to: same, now: Self.now).result == .conditionNotMet)
        // A deadline at or before now deletes, once the condition holds.
        for deadline in [KeyExpiry.Deadline.after(milliseconds: 0), .at(milliseconds: Self.now), .at(milliseconds: 1)] {
            let expiry = KeyExpiry(keys: [], deadline: deadline)
            #expect(expiry.apply(to: none, now: Self.now) == (.deleted, nil))
        }
        #expect(KeyExpiry(keys: [], deadline: .at(milliseconds: 1), condition: .hasDeadline).apply(to: none, now: Self.now).result == .conditionNotMet)
        #expect(KeyExpiry(keys: [], deadline: .at(milliseconds: Self.now + 1)).apply(to: none, now: Self.now).result == .changed)
        #expect(KeyExpiry(keys: [], deadline: .after(milliseconds: .max)).apply(to: none, now: Self.now).lifetime?.deadline == .max)
        // HPERSIST: a deadline is removed (the owner stays); none to remove is -1.
        let persist = KeyExpiry(keys: [], deadline: .none)
        #expect(persist.apply(to: later, now: Self.now) == (.changed, Lifetime(deadline: 0, owner: 9)))
        #expect(persist.apply(to: none, now: Self.now) == (.noDeadline, none))
        #expect(persist.apply(to: nil, now: Self.now).result == .absent)
    }

    @Test("kept to the second (an etcd agent's deadlines): GT and LT compare the new deadline rounded up to its second, so one in the same second as the current is neither later nor earlier")
    func toTheSecond() {
        let now: UInt64 = 1_000_250
        let current = Lifetime(deadline: 1_005_000)  // the end of the second 1,004.x
        func result(_ condition: KeyExpiry.Condition, at deadline: UInt64) -> KeyExpiry.Result {
            KeyExpiry(keys: [], deadline: .at(milliseconds: deadline), condition: condition).apply(to: current, now: now, granularity: 1000).result
        }
        // Within that second: neither (by the millisecond, LT would hold at 1,004,500).
        for deadline: UInt64 in [1_004_001, 1_004_500, 1_005_000] {
            #expect(result(.earlier, at: deadline) == .conditionNotMet, "\(deadline)")
            #expect(result(.later, at: deadline) == .conditionNotMet, "\(deadline)")
        }
        #expect(result(.earlier, at: 1_004_000) == .changed)
        #expect(result(.later, at: 1_005_001) == .changed)
        #expect(KeyExpiry(keys: [], deadline: .at(milliseconds: 1_004_500), condition: .earlier).apply(to: current, now: now).result == .changed,
                "by the millisecond, as the local engine keeps deadlines")
        // The deadline kept is the one asked; a time at or before now still deletes.
        #expect(KeyExpiry(keys: [], deadline: .at(milliseconds: 1_003_200), condition: .earlier).apply(to: current, now: now, granularity: 1000).lifetime == Lifetime(deadline: 1_003_200))
        #expect(KeyExpiry(keys: [], deadline: .at(milliseconds: 5), condition: .earlier).apply(to: current, now: now, granularity: 1000).result == .deleted)
        #expect(KeyExpiry(keys: [], deadline: .at(milliseconds: .max), condition: .later).apply(to: current, now: now, granularity: 1000).result == .changed)
    }

    @Test("a change of several keys is one record; each key sees the ones before it; deadlines read back exactly, after a restart and a compaction too")
    func oneRecord() async throws {
        let dir = TemporaryDirectory("key-expiry")
        defer { dir.remove() }
        let hour: UInt64 = 3_600_000
        var deadlines: [Outcome] = []
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            for key in ["a", "b", "c", "gone"] { try await ns.put(b(key), b("v")) }
            _ = await ns.execute([.lifetimePut(LifetimePut(key: b("owned"), value: b("v"), milliseconds: 0, owner: 4))])
            let before = await ns.entriesWithLifetimes().sequence
            let at = WallClock.milliseconds() + hour
            let run = await ns.execute([.expire(KeyExpiry(keys: [b("a"), b("b"), b("missing"), b("a"), b("gone"), b("owned")],
                                                          deadline: .at(milliseconds: at), condition: .noDeadline))])
            // a: set; b: set; missing: -2; a again: it has one now; gone: set; owned: set, owner kept.
            #expect(run.outcomes == [.batch([.integer(1), .integer(1), .integer(-2), .integer(0), .integer(1), .integer(1)])])
            #expect(await ns.entriesWithLifetimes().sequence == before + 1, "one record")
            let later = await ns.execute([.expire(KeyExpiry(keys: [b("a"), b("gone"), b("c")], deadline: .at(milliseconds: at + 1), condition: .later)),
                                          .expire(KeyExpiry(keys: [b("gone")], deadline: .after(milliseconds: 0))),
                                          .expire(KeyExpiry(keys: [b("b"), b("c"), b("gone")], deadline: .none)),
                                          .deadlines([b("a"), b("b"), b("c"), b("gone"), b("owned"), b("missing")])])
            #expect(later.outcomes[0] == .batch([.integer(1), .integer(1), .integer(0)]))
            #expect(later.outcomes[1] == .batch([.integer(2)]))
            #expect(later.outcomes[2] == .batch([.integer(1), .integer(-1), .integer(-2)]))
            deadlines = [.integer(Int(at + 1)), .integer(-1), .integer(-1), .integer(-2), .integer(Int(at)), .integer(-2)]
            #expect(later.outcomes[3] == .batch(deadlines))
            #expect(await ns.get(b("gone")) == nil)
            #expect(await ns.entriesWithLifetimes().entries.first { $0.key == b("owned") }?.lifetime.owner == 4)
            #expect(await ns.lifetimeMarksMatch())
            // Changing nothing writes nothing.
            let sequence = await ns.entriesWithLifetimes().sequence
            let idle = await ns.execute([.expire(KeyExpiry(keys: [b("missing"), b("a")], deadline: .after(milliseconds: hour), condition: .noDeadline))])
            #expect(idle.outcomes == [.batch([.integer(-2), .integer(0)])])
            #expect(await ns.entriesWithLifetimes().sequence == sequence)
        }
        // The owned key is gone with its connection's run of the server; the rest reopens as it was.
        deadlines[4] = .integer(-2)
        for compact in [false, true] {
            try await withStore(dir.data) { store in
                let ns = try await store.namespace("h")
                let read = await ns.execute([.deadlines([b("a"), b("b"), b("c"), b("gone"), b("owned"), b("missing")])])
                #expect(read.outcomes == [.batch(deadlines)], "compacted: \(compact)")
                if !compact { try await ns.compact() }
            }
        }
    }

    @Test("in a namespace that does not exist, every key is absent and nothing is created")
    func missingNamespace() async throws {
        let dir = TemporaryDirectory("key-expiry-missing")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let outcomes = await store.execute([.expire(KeyExpiry(keys: [b("a"), b("b")], deadline: .after(milliseconds: 1000))),
                                                .deadlines([b("a")])], inNamespace: "nothing").outcomes
            #expect(outcomes == [.batch([.integer(-2), .integer(-2)]), .batch([.integer(-2)])])
            #expect(await store.namespaceNames().contains("nothing") == false)
        }
    }
}
