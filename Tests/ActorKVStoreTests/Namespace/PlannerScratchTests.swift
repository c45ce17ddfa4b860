@testable import ActorKVStore
import ActorKVTestSupport
import Testing

/// What the write planner does to allocate less: a resolved write's mutations held inline, and
/// the arrays a namespace keeps from one run's planner to the next (emptied, bounded:
/// `ArrayReuseTests`), which must carry nothing over.
@Suite("Write planner: inline mutations, arrays reused between runs")
struct PlannerScratchTests {
    @Test("a resolved write's mutations, held inline (none, one, two) or as a list, are the same collection in the same order")
    func mutationsInlineAndListed() {
        let a = Mutation.put(key: Array("a".utf8), value: Array("1".utf8))
        let b = Mutation.delete(key: Array("b".utf8))
        let c = Mutation.lifetime(key: Array("a".utf8), Lifetime(deadline: 9, owner: 0))
        #expect(Array(WritePlanner.Mutations.none).isEmpty)
        #expect(Array(WritePlanner.Mutations.one(a)) == [a])
        #expect(Array(WritePlanner.Mutations.two(a, c)) == [a, c])
        #expect(Array(WritePlanner.Mutations.many([a, b, c])) == [a, b, c])
        #expect(WritePlanner.Mutations.two(b, a).count == 2)
        #expect(WritePlanner.Mutations.two(b, a).last == a)
    }

    @Test("runs of every size after one another on one namespace reuse the arrays: the next run starts from none of the last run's records, outcomes or resolved writes")
    func scratchCarriesNothingOver() async throws {
        let dir = TemporaryDirectory("plan-scratch")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("s")
            // A run with resolved writes and records, then shorter and longer runs of reads.
            let first = await ns.execute([.conditionalPut(key: b("a"), value: b("1")[...], ifVersion: 0),
                                          .increment(key: b("n"), by: 5), .put(key: b("b"), value: b("2"))])
            #expect(first.outcomes == [.version(1), .integer(5), .stored])
            #expect(await ns.execute([.get(b("a")[...])]).outcomes == [.value(b("1"))])
            let reads = await ns.execute([.get(b("n")[...]), .get(b("b")[...]), .get(b("zz")[...]), .exists([b("a")])])
            #expect(reads.outcomes == [.value(b("5")), .value(b("2")), .value(nil), .integer(1)])
            // A large record (beyond what is kept), then a small write: numbered and logged alone.
            let big = [UInt8](repeating: 0x61, count: 100_000)
            #expect(await ns.execute([.put(key: b("big")[...], value: big[...])]).outcomes == [.stored])
            #expect(await ns.execute([.increment(key: b("n"), by: 1)]).outcomes == [.integer(6)])
            #expect(await ns.versioned(b("n"))?.version == 5)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("s")
            #expect(await ns.get(b("n")) == b("6"))
            #expect(await ns.get(b("big"))?.count == 100_000)
            #expect(await ns.get(b("a")) == b("1"))
        }
    }
}
