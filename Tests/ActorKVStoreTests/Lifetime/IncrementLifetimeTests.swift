@testable import ActorKVStore
import ActorKVTestSupport
import Testing

/// An INCR changes a counter's value, not how long its key lives: it keeps the key's deadline
/// and owner, as Redis's INCR keeps a TTL (a rate limiter's `INCR` then `PEXPIRE` on the first
/// count relies on it), in every path that plans one: alone, after other writes of its run, and
/// inside a BATCH, where a PUT before it replaces the lifetime as a PUT always does.
@Suite("INCR keeps its key's deadline and owner")
struct IncrementLifetimeTests {
    static let hour: UInt64 = 3_600_000

    /// Each key's lifetime, from the namespace's own tables.
    private func lifetimes(_ ns: Namespace) async -> [String: Lifetime] {
        var out: [String: Lifetime] = [:]
        for entry in await ns.entriesWithLifetimes().entries { out[String(decoding: entry.key, as: UTF8.self)] = entry.lifetime }
        return out
    }

    @Test("an update that keepsLifetime (HINCRBYFLOAT's) keeps them when it sets a value, alone and in a BATCH; one that does not, or that deletes, does not")
    func updatesThatKeepLifetimes() async throws {
        let dir = TemporaryDirectory("update-lifetime")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("u")
            for key in ["kept", "batch", "replaced", "deleted"] {
                _ = await ns.execute([.lifetimePut(LifetimePut(key: b(key), value: b("1"), milliseconds: Self.hour, owner: 7))])
            }
            let before = await lifetimes(ns)
            let append = Update(keepsLifetime: true) { old in .set((old ?? []) + b("+")) }
            let replace = Update { old in .set((old ?? []) + b("+")) }
            let delete = Update(keepsLifetime: true) { _ in .delete }
            let run = await ns.execute([.update(key: b("kept"), append), .update(key: b("replaced"), replace), .update(key: b("deleted"), delete),
                                        .update(key: b("fresh"), append),
                                        .batch([.update(key: b("batch"), append), .update(key: b("batch"), append)])])
            #expect(run.outcomes == [.value(b("1+")), .value(b("1+")), .value(nil), .value(b("+")), .batch([.value(b("1+")), .value(b("1++"))])])
            let after = await lifetimes(ns)
            #expect(after["kept"] == before["kept"] && after["batch"] == before["batch"])
            #expect(after["replaced"] == Lifetime.none && after["fresh"] == Lifetime.none)
            #expect(after["deleted"] == nil, "a deleted key has no lifetime left: \(after)")
            try await ns.put(b("deleted"), b("again"))
            #expect(await lifetimes(ns)["deleted"] == Lifetime.none)
            #expect(await ns.lifetimeMarksMatch())
            #expect(await ns.releaseOwner(7) == 2, "the kept owner still takes its keys: kept and batch")
        }
    }

    @Test("alone, in a run after other writes, and in a BATCH; reopened from the log and from a snapshot")
    func incrementKeepsLifetimes() async throws {
        let dir = TemporaryDirectory("incr-lifetime")
        defer { dir.remove() }
        var expected: [String: Lifetime] = [:]
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            for (key, ms, owner) in [("ttl", Self.hour, UInt64(0)), ("eph", 0, 5), ("both", Self.hour, 6), ("inrun", Self.hour, 0),
                                     ("batch", Self.hour, 0), ("replaced", Self.hour, 0)] {
                _ = await ns.execute([.lifetimePut(LifetimePut(key: b(key), value: b("10"), milliseconds: ms, owner: owner))])
            }
            try await ns.put(b("plain"), b("1"))
            try await ns.put(b("pex"), b("1"))  // no lifetime until a PEXPIRE in the run below
            let before = await lifetimes(ns)
            #expect(before["ttl"]!.deadline != 0 && before["eph"]!.owner == 5 && before["both"]!.owner == 6)

            #expect(try await ns.increment(b("ttl")) == 11)
            #expect(try await ns.increment(b("eph"), by: 5) == 15)
            #expect(try await ns.increment(b("plain")) == 2)
            // One run: a PEXPIRE-like lifetime change before the INCR, then another INCR that sees both.
            let run = await ns.execute([.increment(key: b("both"), by: 1), .setTimeToLive(key: b("inrun"), milliseconds: Int64(2 * Self.hour)),
                                        .increment(key: b("inrun"), by: 1), .increment(key: b("both"), by: 1), .increment(key: b("new"), by: 1),
                                        .setTimeToLive(key: b("pex"), milliseconds: Int64(Self.hour)), .increment(key: b("pex"), by: 1)])
            #expect(run.outcomes == [.integer(11), .integer(1), .integer(11), .integer(12), .integer(1), .integer(1), .integer(2)])
            let batch = await ns.execute([.batch([.increment(key: b("batch"), by: 1), .increment(key: b("batch"), by: 1),
                                                  .put(key: b("replaced"), value: b("0")), .increment(key: b("replaced"), by: 1)])])
            #expect(batch.outcomes == [.batch([.integer(11), .integer(12), .stored, .integer(1)])])

            let after = await lifetimes(ns)
            for key in ["ttl", "eph", "both", "batch"] { #expect(after[key] == before[key], "\(key): \(String(describing: after[key]))") }
            #expect(after["inrun"]!.deadline > before["inrun"]!.deadline, "the INCR kept the deadline set just before it in its run")
            #expect(after["pex"]!.deadline != 0, "the INCR kept the deadline a PEXPIRE just before it gave a key that had none")
            #expect(after["replaced"] == Lifetime.none, "a PUT before the INCR in its BATCH replaced the lifetime")
            #expect(after["plain"] == Lifetime.none && after["new"] == Lifetime.none)
            #expect(await ns.lifetimeMarksMatch())
            #expect(await ns.timeToLive(b("ttl")) > 0)

            // The owner's keys still go with it, counters included.
            #expect(await ns.releaseOwner(5) == 1)
            #expect(await ns.get(b("eph")) == nil)
            expected = await lifetimes(ns)
        }
        // The log holds each kept lifetime; so does a snapshot.
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            var reopened = await lifetimes(ns)
            // Ephemeral keys of an earlier run are deleted on opening.
            expected["both"] = nil
            #expect(reopened == expected)
            #expect(await ns.get(b("ttl")) == b("11"))
            try await ns.compact()
            reopened = await lifetimes(ns)
            #expect(reopened == expected)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            #expect(await lifetimes(ns) == expected)
            #expect(await ns.lifetimeMarksMatch())
        }
    }

    @Test("random runs of every write, lifetimes included (PX and EPHEMERAL puts, PEXPIRE, PERSIST, HEXPIRE's family, INCRs that keep them, and HEXPIRE, HGETEX and HSETEX as steps of batches), equal a model applied one at a time, and reopen the same less the owned keys")
    func modelRunsWithLifetimes() async throws {
        let dir = TemporaryDirectory("incr-lifetime-model")
        defer { dir.remove() }
        var random = SeededGenerator(seed: 0x11fe_20)
        var model = WritePlannerTests.Model()
        let keys = (0..<5).map { b("k\($0)") }
        func value() -> [UInt8] {
            Int.random(in: 0..<4, using: &random) > 0 ? b("\(Int.random(in: -3...3, using: &random))") : b("p\(Int.random(in: 0..<9, using: &random))")
        }
        func guardVersion(_ key: [UInt8]) -> UInt64 {
            Bool.random(using: &random) ? model.entries[key]?.version ?? 0 : UInt64.random(in: 0...3, using: &random)
        }
        func lifetimePut(_ key: [UInt8]) -> LifetimePut {
            let owner = UInt64.random(in: 0...2, using: &random)
            let ms = owner == 0 || Bool.random(using: &random) ? Self.hour : 0
            return LifetimePut(key: key, value: value(), milliseconds: ms, owner: owner, ifVersion: Bool.random(using: &random) ? nil : guardVersion(key))
        }
        func expiry() -> KeyExpiry {
            // HEXPIRE's family (or HGETEX) over several keys, a key maybe named twice.
            let named = (0..<Int.random(in: 1...3, using: &random)).map { _ in keys.randomElement(using: &random)! }
            let deadline: KeyExpiry.Deadline = [.after(milliseconds: Self.hour), .after(milliseconds: 0), .none].randomElement(using: &random)!
            let condition: KeyExpiry.Condition = [.always, .noDeadline, .hasDeadline].randomElement(using: &random)!
            let yields: KeyExpiry.Yield = Bool.random(using: &random) ? .results : .values  // HGETEX: .values
            return KeyExpiry(keys: named, deadline: deadline, condition: condition, yields: yields)
        }
        func setting() -> KeySetting {
            // HSETEX over several keys, a key maybe named twice.
            let named = (0..<Int.random(in: 1...3, using: &random)).map { _ in keys.randomElement(using: &random)! }
            let deadline: KeySetting.Deadline = [.after(milliseconds: Self.hour), .after(milliseconds: 0), .none, .keep].randomElement(using: &random)!
            let presence: KeySetting.Presence = [.any, .allAbsent, .allPresent].randomElement(using: &random)!
            return KeySetting(keys: named, values: named.map { _ in value() }, presence: presence, deadline: deadline)
        }
        func randomStep(_ key: [UInt8]) -> BatchStep {
            switch Int.random(in: 0..<7, using: &random) {
            case 0: return .put(key: key, value: value())
            case 1: return .delete(key: key)
            case 2: return .ifVersion(key: key, guardVersion(key))
            // HEXPIRE, HGETEX and HSETEX queued in MULTI.
            case 3: return .expire(expiry())
            case 4: return .setAll(setting())
            default: return .increment(key: key, by: Int64.random(in: -2...2, using: &random))
            }
        }
        func state(_ ns: Namespace) async -> ([[UInt8]: VersionedValue], [[UInt8]: WritePlannerTests.Model.ModelLifetime]) {
            var entries: [[UInt8]: VersionedValue] = [:]
            var lifetimes: [[UInt8]: WritePlannerTests.Model.ModelLifetime] = [:]
            for entry in await ns.entriesWithLifetimes().entries {
                entries[entry.key] = VersionedValue(value: entry.value, version: entry.version)
                if !entry.lifetime.isNone {
                    lifetimes[entry.key] = .init(hasDeadline: entry.lifetime.deadline != 0, owner: entry.lifetime.owner)
                }
            }
            return (entries, lifetimes)
        }
        var (sawOwners, sawDeadlines) = (false, false)
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            for round in 0..<400 {
                var operations: [Operation] = []
                for _ in 0..<Int.random(in: 1...10, using: &random) {
                    let key = keys.randomElement(using: &random)!
                    switch Int.random(in: 0..<13, using: &random) {
                    case 0: operations.append(.put(key: key, value: value()))
                    case 1: operations.append(.delete([key]))
                    case 2: operations.append(.update(key: key, WritePlannerTests.append("u")))
                    case 3: operations.append(.batch((0..<Int.random(in: 1...3, using: &random)).map { _ in randomStep(keys.randomElement(using: &random)!) }))
                    case 4, 5: operations.append(.increment(key: key, by: Int64.random(in: -2...2, using: &random)))
                    case 6: operations.append(.conditionalPut(key: key, value: value()[...], ifVersion: guardVersion(key)))
                    case 7, 8: operations.append(.lifetimePut(lifetimePut(key)))
                    case 9:
                        let ms: Int64? = [Int64(Self.hour), nil, 0].randomElement(using: &random)!
                        operations.append(.setTimeToLive(key: key, milliseconds: ms))
                    case 10: operations.append(.expire(expiry()))
                    case 11: operations.append(.setAll(setting()))
                    default: operations.append(.getVersioned(key[...]))
                    }
                }
                let run = await ns.execute(operations)
                try await run.durability.wait()
                let expected = operations.map { model.apply($0) }
                #expect(run.outcomes == expected, "round \(round)")
                let (entries, lifetimes) = await state(ns)
                #expect(entries == model.entries && lifetimes == model.lifetimes, "round \(round)")
                sawOwners = sawOwners || model.lifetimes.values.contains { $0.owner != 0 }
                sawDeadlines = sawDeadlines || model.lifetimes.values.contains { $0.hasDeadline }
                if round % 100 == 99 { try await ns.compact() }
            }
            #expect(sawOwners && sawDeadlines, "the runs left keys with owners and with deadlines")
        }
        let reopened = model.reopened()
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            let (entries, lifetimes) = await state(ns)
            #expect(entries == reopened.entries && lifetimes == reopened.lifetimes)
            #expect(await ns.lifetimeMarksMatch())
        }
    }

    @Test("an INCR of a key past its deadline counts from 0 and gives the new key no lifetime")
    func incrementOfExpiredKey() async throws {
        let dir = TemporaryDirectory("incr-expired")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            _ = await ns.execute([.lifetimePut(LifetimePut(key: b("gone"), value: b("41"), milliseconds: 1))])
            try await Task.sleep(for: .milliseconds(20))
            #expect(try await ns.increment(b("gone")) == 1)
            #expect(await ns.timeToLive(b("gone")) == -1)
            #expect(await lifetimes(ns)["gone"] == Lifetime.none)
        }
    }
}
