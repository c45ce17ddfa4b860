@testable import ActorKVStore
import ActorKVTestSupport
import Testing

/// The lifetime mark of a map entry (``LiveData``): a key has a lifetime exactly when its entry
/// is marked, so reads and writes of keys without one skip the lifetime tables. Checked through
/// every write that gives, changes or drops a lifetime, through compaction and reopening, and
/// by the reads that trust it.
@Suite("Lifetime marks in the map")
struct LifetimeMarkTests {
    private func b(_ text: String) -> [UInt8] { Array(text.utf8) }
    private static let hour: UInt64 = 3_600_000

    @Test("random writes with and without lifetimes keep exactly the keys with one marked, through compaction, an owner's release and reopening")
    func marksFollowLifetimes() async throws {
        let dir = TemporaryDirectory("lifetime-marks")
        defer { dir.remove() }
        var random = SeededGenerator(seed: 0x11fe_71)
        let keys = (0..<8).map { b("k\($0)") }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            for round in 0..<300 {
                var operations: [Operation] = []
                for _ in 0..<Int.random(in: 1...10, using: &random) {
                    let key = keys.randomElement(using: &random)!
                    let value = b("v\(round)")
                    switch Int.random(in: 0..<9, using: &random) {
                    case 0: operations.append(.put(key: key, value: value))
                    case 1: operations.append(.set(key: key[...], value: value[...]))
                    case 2, 3:
                        let owner = UInt64.random(in: 0...2, using: &random)
                        let ms = owner == 0 || Bool.random(using: &random) ? Self.hour : 0
                        operations.append(.lifetimePut(LifetimePut(key: key, value: value, milliseconds: ms, owner: owner)))
                    case 4: operations.append(.setTimeToLive(key: key, milliseconds: Int64(Self.hour)))
                    case 5: operations.append(.setTimeToLive(key: key, milliseconds: Bool.random(using: &random) ? nil : 0))
                    case 6: operations.append(.delete([key]))
                    case 7: operations.append(.batch([.set(key: key, value: value), .delete(key: keys.randomElement(using: &random)!)]))
                    default: operations.append(.increment(key: b("n"), by: 1))
                    }
                }
                _ = await ns.execute(operations)
                if round % 50 == 49 { _ = await ns.releaseOwner(1) }
                if round % 100 == 99 { try await ns.compact() }
                #expect(await ns.lifetimeMarksMatch(), "after round \(round)")
            }
            #expect(await ns.currentStatistics().expiringKeys > 0, "the rounds left keys with deadlines")
        }
        // Reopened: from the snapshot and the log after it (the owners' keys are deleted).
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            #expect(await ns.lifetimeMarksMatch())
            #expect(await ns.currentStatistics().ephemeralKeys == 0)
            try await ns.compact()
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            #expect(await ns.lifetimeMarksMatch(), "from a snapshot alone")
        }
    }

    @Test("reads trust the mark: keys past their deadline read as absent, one at a time and pipelined, beside keys without a lifetime and with a later one; a put over one adds it")
    func readsOfExpiredKeys() async throws {
        let dir = TemporaryDirectory("lifetime-mark-reads")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("r")
            var writes: [Operation] = []
            for i in 0..<30 {
                switch i % 3 {
                case 0: writes.append(.lifetimePut(LifetimePut(key: b("k\(i)"), value: b("v\(i)"), milliseconds: 1)))
                case 1: writes.append(.put(key: b("k\(i)"), value: b("v\(i)")))
                default: writes.append(.lifetimePut(LifetimePut(key: b("k\(i)"), value: b("v\(i)"), milliseconds: Self.hour)))
                }
            }
            _ = await ns.execute(writes)
            try await Task.sleep(for: .milliseconds(20))
            let expected: [Outcome] = (0..<30).map { .value($0 % 3 == 0 ? nil : b("v\($0)")) }
            #expect(await ns.execute((0..<30).map { .get(b("k\($0)")) }).outcomes == expected, "a pipeline of GETs, looked up together")
            for i in 0..<30 { #expect(await ns.get(b("k\(i)")) == (i % 3 == 0 ? nil : b("v\(i)")), "GET k\(i)") }
            #expect(await ns.execute([.set(key: b("k0")[...], value: b("new")[...]), .set(key: b("k1")[...], value: b("new")[...]), .get(b("k0"))]).outcomes
                    == [.integer(1), .integer(0), .value(b("new"))])
            #expect(await ns.timeToLive(b("k0")) == -1, "the put dropped the old deadline")
            #expect(await ns.lifetimeMarksMatch())
        }
    }
}
