import Foundation
import Testing
@testable import ActorKVStore
import ActorKVTestSupport

/// Drawing keys at random (Redis's HRANDFIELD): the map's draw of one entry, uniform without
/// reading the others; ``RandomDraw``'s rules; and a namespace's ``Operation/sample(_:)``, which
/// never gives an expired key.
@Suite("Random draws")
struct RandomDrawTests {
    private func b(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// The number of entries in each leaf of `map`, left to right.
    private func leafSizes(_ map: OrderedMap) -> [Int] {
        func visit(_ node: OrderedMap.Node) -> [Int] {
            node.isLeaf ? [node.entries.count] : node.children.flatMap(visit)
        }
        return map.root.map(visit) ?? []
    }

    /// Pearson's chi-squared statistic of `counts` against the same expected count for each.
    private func chiSquared(_ counts: [Int], draws: Int) -> Double {
        let expected = Double(draws) / Double(counts.count)
        return counts.reduce(0) { $0 + (Double($1) - expected) * (Double($1) - expected) / expected }
    }

    @Test("the map draws every entry equally often, in a deep tree whose nodes are filled unevenly (chi-squared far below what uneven leaves would give)",
          arguments: [(4, 4), (5, 4), (64, 64)])
    func mapDrawsUniformly(leafCapacity: Int, branchCapacity: Int) throws {
        var generator = SeededGenerator(seed: 0x5EED_0000 + UInt64(leafCapacity * 100 + branchCapacity))
        var map = OrderedMap(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        let total = leafCapacity == 64 ? 6_000 : 400
        var keys = (0..<total).map { Array(String(format: "k%06d", $0).utf8) }
        keys.shuffle(using: &generator)
        for key in keys { _ = map.updateValue(key + b("="), forKey: key) }
        // Deleting a random 40% leaves nodes anywhere from half full to full.
        for key in keys.prefix(total * 2 / 5) { _ = map.removeValue(forKey: key) }
        try map.checkInvariants()
        let sizes = leafSizes(map)
        #expect(Set(sizes).count >= 2 && sizes.count > 10, "leaves filled unevenly: \(Set(sizes).sorted())")

        let live = keys.dropFirst(total * 2 / 5).sorted { $0.lexicographicallyPrecedes($1) }
        let index = Dictionary(uniqueKeysWithValues: live.enumerated().map { ($1, $0) })
        let draws = live.count * 200
        var counts = Array(repeating: 0, count: live.count)
        for _ in 0..<draws {
            guard let (key, entry) = map.randomEntry(using: &generator), let position = index[key] else {
                Issue.record("a draw gave no entry, or a key the map does not hold")
                return
            }
            #expect(entry.value == key + b("="))
            counts[position] += 1
        }
        // Uniform: the statistic is about its degrees of freedom (n - 1), give or take
        // sqrt(2(n - 1)). A walk that took children and entries at random without rejecting
        // any gives an entry of a leaf of half the entries twice the draws: thousands over it.
        let freedom = Double(live.count - 1)
        let statistic = chiSquared(counts, draws: draws)
        #expect(statistic < freedom + 6 * (2 * freedom).squareRoot(), "chi-squared \(statistic) for \(live.count - 1) degrees of freedom")
    }

    @Test("an empty map draws nothing; a map that is one leaf draws each of its entries")
    func smallMaps() {
        var generator = SeededGenerator(seed: 7)
        var map = OrderedMap()
        #expect(map.randomEntry(using: &generator) == nil)
        for key in ["a", "b", "c"] { _ = map.updateValue(b(key), forKey: b(key)) }
        var seen = Set<[UInt8]>()
        for _ in 0..<200 { seen.insert(map.randomEntry(using: &generator)!.key) }
        #expect(seen == [b("a"), b("b"), b("c")])
    }

    @Test("RandomDraw's rules: one; distinct, never one twice, all of them when asked for as many or more; repeating, exactly as many; none from nothing")
    func drawRules() {
        var generator = SeededGenerator(seed: 11)
        let entries = (0..<10).map { KeyValue(key: Array("k\($0)".utf8), value: Array("v\($0)".utf8)) }
        var calls = 0
        let next = { () -> KeyValue in
            calls += 1
            return entries[Int.random(in: 0..<entries.count, using: &generator)]
        }
        #expect(RandomDraw.one.draw(sampling: next).count == 1)
        let distinct = RandomDraw.distinct(3).draw(sampling: next)
        #expect(distinct.count == 3 && Set(distinct.map(\.key)).count == 3)
        let repeating = RandomDraw.repeating(25).draw(sampling: next)
        #expect(repeating.count == 25 && Set(repeating.map(\.key)).count < 25, "repeats: \(repeating.map(\.key))")
        #expect(RandomDraw.distinct(0).draw(sampling: next).isEmpty && RandomDraw.repeating(0).draw(sampling: next).isEmpty)

        let some = RandomDraw.distinct(4).draw(from: entries, using: &generator)
        #expect(some.count == 4 && Set(some.map(\.key)).count == 4 && some.allSatisfy(entries.contains))
        #expect(RandomDraw.distinct(10).draw(from: entries, using: &generator) == entries)
        #expect(RandomDraw.distinct(99).draw(from: entries, using: &generator) == entries)
        #expect(RandomDraw.repeating(30).draw(from: entries, using: &generator).count == 30)
        #expect(RandomDraw.one.draw(from: entries, using: &generator).count == 1)
        for draw in [RandomDraw.one, .distinct(3), .repeating(3)] { #expect(draw.draw(from: [], using: &generator).isEmpty) }

        // Sampling is for distinct keys under a third of them; the rest read them all.
        #expect(RandomDraw.distinct(3).samples(live: 9) && !RandomDraw.distinct(4).samples(live: 9))
        #expect(RandomDraw.one.samples(live: 1) && RandomDraw.repeating(100).samples(live: 1))
    }

    @Test("distinct draws from all the entries (a partial shuffle) take each entry equally often, first or anywhere")
    func partialShuffleIsUniform() {
        var generator = SeededGenerator(seed: 13)
        let entries = (0..<20).map { KeyValue(key: Array("k\($0)".utf8), value: []) }
        let position = Dictionary(uniqueKeysWithValues: entries.enumerated().map { ($1.key, $0) })
        let draws = 20_000
        var first = Array(repeating: 0, count: entries.count)
        var anywhere = Array(repeating: 0, count: entries.count)
        for _ in 0..<draws {
            let drawn = RandomDraw.distinct(5).draw(from: entries, using: &generator)
            first[position[drawn[0].key]!] += 1
            for entry in drawn { anywhere[position[entry.key]!] += 1 }
        }
        // 19 degrees of freedom: about 19, give or take 6; a shuffle that left the order
        // alone, or drew from the whole array each time, gives thousands.
        #expect(chiSquared(first, draws: draws) < 19 + 6 * 38.0.squareRoot(), "\(first)")
        #expect(chiSquared(anywhere, draws: draws * 5) < 19 + 6 * 38.0.squareRoot(), "\(anywhere)")
    }

    @Test("DrawGenerator is xoshiro256** (the reference's outputs for the state 1, 2, 3, 4), never all-zero, and seeded anew by default")
    func drawGenerator() {
        var known = DrawGenerator(seed: (1, 2, 3, 4))
        #expect((0..<6).map { _ in known.next() } == [11520, 0, 1_509_978_240, 1_215_971_899_390_074_240, 1_216_172_134_540_287_360, 607_988_272_756_665_600])
        var zero = DrawGenerator(seed: (0, 0, 0, 0))
        #expect((0..<4).map { _ in zero.next() }.contains { $0 != 0 }, "an all-zero state would give zeros forever")
        var (a, b) = (DrawGenerator(), DrawGenerator())
        #expect((0..<4).map { _ in a.next() } != (0..<4).map { _ in b.next() })
        var buckets = Array(repeating: 0, count: 16)
        for _ in 0..<16_000 { buckets[Int.random(in: 0..<16, using: &a)] += 1 }
        #expect(chiSquared(buckets, draws: 16_000) < 15 + 6 * 30.0.squareRoot(), "\(buckets)")
    }

    @Test("a namespace's sample: live keys only (never one whose deadline passed), with their values, as many as asked; a namespace that does not exist gives none")
    func namespaceSamples() async throws {
        let dir = TemporaryDirectory("random-draw")
        defer { dir.remove() }
        // The sweeper never runs: the expired keys stay in the map, where draws meet them.
        var options = testOptions()
        options.backgroundExecutor = ParkedExecutor.shared
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("h")
            let writes: [ActorKVStore.Operation] = (0..<1000).map { i in
                let key = Array("k\(i)".utf8), value = Array("v\(i)".utf8)
                // Every fifth key expires at once.
                return i % 5 == 0 ? .lifetimePut(LifetimePut(key: key, value: value, milliseconds: 1)) : .put(key: key, value: value)
            }
            _ = await ns.execute(writes)
            try await Task.sleep(nanoseconds: 20_000_000)
            func sample(_ draw: RandomDraw) async -> [KeyValue] {
                guard case .page(let page) = await ns.execute([.sample(draw)]).outcomes[0] else { return [] }
                return page.entries
            }
            func isLive(_ entry: KeyValue) -> Bool {
                guard let text = String(bytes: entry.key, encoding: .utf8), let i = Int(text.dropFirst()) else { return false }
                return i % 5 != 0 && entry.value == Array("v\(i)".utf8)
            }
            var drawn: [KeyValue] = []
            for _ in 0..<200 { drawn += await sample(.one) }
            drawn += await sample(.repeating(500))
            let distinct = await sample(.distinct(100))
            #expect(drawn.count == 700 && distinct.count == 100 && Set(distinct.map(\.key)).count == 100)
            #expect((drawn + distinct).allSatisfy(isLive), "\((drawn + distinct).filter { !isLive($0) }.map(\.key))")
            let all = await sample(.distinct(5000))
            #expect(all.count == 800 && Set(all.map(\.key)).count == 800 && all.allSatisfy(isLive))
            // Mostly expired keys, not swept yet: drawn from a read of the live ones.
            let mostlyExpired = try await store.namespace("m")
            _ = await mostlyExpired.execute((0..<100).map { i in
                .lifetimePut(LifetimePut(key: Array("k\(i)".utf8), value: Array("v\(i)".utf8), milliseconds: i < 10 ? 0 : 1))
            })
            try await Task.sleep(nanoseconds: 20_000_000)
            for draw in [RandomDraw.one, .distinct(3), .repeating(200)] {
                guard case .page(let page) = await mostlyExpired.execute([.sample(draw)]).outcomes[0] else { Issue.record("\(draw)"); continue }
                let live = (0..<10).map { Array("k\($0)".utf8) }
                #expect(!page.entries.isEmpty && page.entries.allSatisfy { live.contains($0.key) }, "\(draw): \(page.entries.map(\.key))")
            }
            let absent = await store.execute([.sample(.one), .sample(.repeating(5))], inNamespace: "nothing")
            #expect(absent.outcomes == [.page(ScanPage(entries: [], next: .start)), .page(ScanPage(entries: [], next: .start))])
        }
    }
}
