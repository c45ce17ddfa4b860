import Testing
@testable import ActorKVStore
import ActorKVTestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Helpers

/// The seed for a test: `ORDEREDMAP_SEED` from the environment when set (to replay a failure),
/// else `fallback`; printed either way.
private func testSeed(_ name: String, _ fallback: UInt64) -> UInt64 {
    var seed = fallback
    if let text = getenv("ORDEREDMAP_SEED"), let value = UInt64(String(cString: text)) { seed = value }
    print("\(name): seed \(seed) (replay with ORDEREDMAP_SEED=\(seed))")
    return seed
}

/// Key order computed independently of the code under test.
private func precedes(_ a: [UInt8], _ b: [UInt8]) -> Bool { a.lexicographicallyPrecedes(b) }

/// The reference model: entries kept sorted in an array, by an order computed independently
/// of the code under test.
private struct Model {
    private(set) var sorted: [(key: [UInt8], value: [UInt8])] = []

    var count: Int { sorted.count }

    /// The index of the first entry whose key is not below `key`.
    private func position(of key: [UInt8]) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let mid = (low + high) / 2
            if precedes(sorted[mid].key, key) { low = mid + 1 } else { high = mid }
        }
        return low
    }

    subscript(key: [UInt8]) -> [UInt8]? {
        let i = position(of: key)
        return i < sorted.count && sorted[i].key == key ? sorted[i].value : nil
    }

    /// Stores `value` for `key`; returns the value replaced.
    mutating func put(_ value: [UInt8], _ key: [UInt8]) -> [UInt8]? {
        let i = position(of: key)
        if i < sorted.count && sorted[i].key == key {
            defer { sorted[i].value = value }
            return sorted[i].value
        }
        sorted.insert((key, value), at: i)
        return nil
    }

    /// Removes `key`; returns the value removed.
    mutating func delete(_ key: [UInt8]) -> [UInt8]? {
        let i = position(of: key)
        guard i < sorted.count && sorted[i].key == key else { return nil }
        return sorted.remove(at: i).value
    }
}

/// Every entry of `map` in the order `forEach` gives.
private func contents(_ map: OrderedMap) -> [(key: [UInt8], value: [UInt8])] {
    var out: [(key: [UInt8], value: [UInt8])] = []
    map.forEach { out.append((key: $0, value: $1)); _ = $2; return true }
    return out
}

private func same(_ a: [(key: [UInt8], value: [UInt8])], _ b: [(key: [UInt8], value: [UInt8])]) -> Bool {
    a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
}

/// Checks the invariants of `map` and that it holds exactly `expected`.
private func expectMap(_ map: OrderedMap, equals expected: [(key: [UInt8], value: [UInt8])],
                       _ context: String = "", sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(throws: Never.self, "\(context)", sourceLocation: sourceLocation) { try map.checkInvariants() }
    #expect(map.count == expected.count, "\(context)", sourceLocation: sourceLocation)
    #expect(map.isEmpty == expected.isEmpty, "\(context)", sourceLocation: sourceLocation)
    #expect(same(contents(map), expected), "\(context): contents differ", sourceLocation: sourceLocation)
}

/// Keys drawn from a tiny alphabet rich in edge bytes, short enough to collide often and to
/// be prefixes of each other.
private func smallKey(_ rng: inout SeededGenerator) -> [UInt8] {
    let alphabet: [UInt8] = [0x00, 0x01, 0x61, 0x62, 0x7F, 0x80, 0xFE, 0xFF]
    return (0..<Int.random(in: 0...4, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }
}

/// Keys with long shared beginnings, like `user:00017`, some of them prefixes of others: they
/// exercise the nodes' shared-prefix bookkeeping (a key that breaks the shared run of a node).
private func structuredKey(_ rng: inout SeededGenerator) -> [UInt8] {
    let stems = ["user:0000", "user:0001", "user:000", "user:", "session:", "user:0000000000", ""]
    var key = Array(stems.randomElement(using: &rng)!.utf8)
    key += (0..<Int.random(in: 0...3, using: &rng)).map { _ in UInt8(ascii: "0") + UInt8.random(in: 0...9, using: &rng) }
    if Int.random(in: 0..<8, using: &rng) == 0 { key.append([0x00, 0xFF].randomElement(using: &rng)!) }
    return key
}

/// A value that says which write produced it.
private func value(_ n: Int) -> [UInt8] { Array("v\(n)".utf8) }

/// Random 16-byte keys, like the engine's typical ones.
private func randomKey(_ rng: inout SeededGenerator, length: Int = 16) -> [UInt8] {
    (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// The distinct node objects of a map.
private func nodeIdentities(_ map: OrderedMap) -> Set<ObjectIdentifier> {
    var seen = Set<ObjectIdentifier>()
    func walk(_ node: OrderedMap.Node) {
        seen.insert(ObjectIdentifier(node))
        node.children.forEach(walk)
    }
    if let root = map.root { walk(root) }
    return seen
}

/// The number of levels of the tree.
private func height(_ map: OrderedMap) -> Int {
    var levels = 0
    var node = map.root
    while let current = node { levels += 1; node = current.children.first }
    return levels
}

// MARK: - Key order

@Suite("compareBytes")
struct CompareBytesTests {
    @Test func edgeCases() {
        let cases: [([UInt8], [UInt8], Int)] = [
            ([], [], 0), ([], [0], -1), ([0], [], 1), ([0], [0], 0), ([0], [0, 0], -1),
            ([0xFF], [0x00, 0xFF], 1), ([0x7F], [0x80], -1), ([0x80], [0x7F], 1), ([0xFF], [0xFF, 0x00], -1),
            (Array(repeating: 7, count: 8), Array(repeating: 7, count: 9), -1),
            (Array(repeating: 7, count: 9) + [1], Array(repeating: 7, count: 9) + [2], -1),
            ([1, 2, 3, 4, 5, 6, 7, 9], [1, 2, 3, 4, 5, 6, 8, 0, 0], -1), ([1, 2, 3, 4, 5, 6, 9], [1, 2, 3, 4, 5, 6, 8, 0, 0], 1),
            (Array(repeating: 0xFF, count: 20), Array(repeating: 0xFF, count: 20), 0),
        ]
        for (a, b, expected) in cases {
            #expect(compareBytes(a, b) == expected, "\(a) vs \(b)")
            #expect(compareBytes(b, a) == -expected, "\(b) vs \(a)")
        }
    }

    @Test func agreesWithLexicographicOrder() {
        var rng = SeededGenerator(seed: testSeed("compareBytes", 11))
        for _ in 0..<3000 {
            let common = randomKey(&rng, length: Int.random(in: 0...12, using: &rng))
            let a = common + randomKey(&rng, length: Int.random(in: 0...3, using: &rng)).map { $0 & 0x81 }
            let b = common + randomKey(&rng, length: Int.random(in: 0...3, using: &rng)).map { $0 & 0x81 }
            let expected = a == b ? 0 : (precedes(a, b) ? -1 : 1)
            #expect(compareBytes(a, b) == expected, "\(a) vs \(b)")
        }
    }
}

// MARK: - Differential test against the model

@Suite("OrderedMap")
struct OrderedMapTests {
    @Test func emptyMap() throws {
        let map = OrderedMap()
        #expect(map.isEmpty && map.count == 0)
        #expect(map[[]] == nil && map[[1]] == nil)
        #expect(map.entries(after: nil, prefix: [], limit: 10).isEmpty)
        var none: [[UInt8]?] = []
        map.values(forKeys: [[1], []]) { _, value in none.append(value) }
        #expect(none == [nil, nil])
        try map.checkInvariants()
        var copy = map
        #expect(copy.removeValue(forKey: [1]) == nil)
        #expect(copy.updateValue([9], forKey: []) == nil)
        #expect(copy[[]] == [9] && map.isEmpty)
        #expect(copy.removeValue(forKey: []) == [9])
        expectMap(copy, equals: [])
    }

    /// Thousands of random operations with small fan-outs (many levels, many splits and merges)
    /// and with the production fan-out, each checked against the model.
    @Test(arguments: [(4, 4, UInt64(1), false), (5, 5, 2, false), (3, 6, 3, false), (8, 4, 4, false), (64, 64, 5, false),
                      (4, 4, 6, true), (64, 64, 7, true)])
    func matchesModel(leafCapacity: Int, branchCapacity: Int, seed: UInt64, structured: Bool) {
        let seed = testSeed("model \(leafCapacity)/\(branchCapacity)\(structured ? " structured" : "")", seed)
        var rng = SeededGenerator(seed: seed)
        var map = OrderedMap(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var model = Model()
        var maxHeight = 0
        var writes = 0
        let production = leafCapacity == 64
        func newKey(_ rng: inout SeededGenerator) -> [UInt8] {
            if structured { return structuredKey(&rng) }
            return production ? randomKey(&rng, length: Int.random(in: 0...5, using: &rng)).map { $0 & 0x87 } : smallKey(&rng)
        }
        // Grow, shrink to nothing, grow again, shrink again: every level splits and merges.
        let size = production ? 1500 : 700
        for (phase, putShare, target) in [(0, 90, size), (1, 10, 0), (2, 85, size / 2), (3, 20, 0)] {
            for batch in 1...400 {
                // A hint only: the map must be unchanged (checked against the model below).
                map.prefetch(forKeys: (0..<Int.random(in: 0...20, using: &rng)).map { _ in
                    embedded(model.count > 0 && Bool.random(using: &rng) ? model.sorted.randomElement(using: &rng)!.key : newKey(&rng), &rng)
                })
                for _ in 0..<60 {
                    let roll = Int.random(in: 0..<100, using: &rng)
                    let key = model.count == 0 || Int.random(in: 0..<2, using: &rng) == 0
                        ? newKey(&rng) : model.sorted.randomElement(using: &rng)!.key
                    if roll < putShare {
                        writes += 1
                        // Half the time from a slice of a larger buffer, as the server passes keys.
                        let expected = model.put(value(writes), key)
                        switch Int.random(in: 0..<3, using: &rng) {
                        case 0:
                            #expect(map.updateValue(value(writes), forKey: key) == expected, "seed \(seed): put \(key)")
                        case 1:
                            // A slice spanning the whole array: stored without a copy.
                            let copied = map.updateValue(copying: value(writes)[...], forKey: embedded(key, &rng))
                            #expect(copied == expected?.count, "seed \(seed): put \(key) from a whole slice")
                        default:
                            // Copying the value in from a larger buffer too, as a server's PUT does.
                            let copied = map.updateValue(copying: embedded(value(writes), &rng), forKey: embedded(key, &rng))
                            #expect(copied == expected?.count, "seed \(seed): put \(key) copying")
                        }
                    } else if roll < 97 {
                        let removed = map.removeValue(forKey: key)
                        #expect(removed == model.delete(key), "seed \(seed): delete \(key)")
                    } else {
                        #expect(map[key] == model[key], "seed \(seed): get \(key)")
                        #expect(map[embedded(key, &rng)] == model[key], "seed \(seed): get \(key) from a slice")
                    }
                }
                maxHeight = Swift.max(maxHeight, height(map))
                expectMap(map, equals: model.sorted, "seed \(seed) phase \(phase) batch \(batch)")
                checkQueries(map, model.sorted, &rng, seed: seed)
                if phase % 2 == 0 ? model.count >= target : model.count <= target { break }
            }
            #expect(phase % 2 == 0 ? model.count >= target : model.count <= target, "phase \(phase) did not reach its size")
        }
        #expect(maxHeight >= (production ? 2 : 4), "the test should have built a deep tree")
    }

    /// `key` as a slice of a buffer with random bytes before and after it (so its indices do
    /// not start at zero, as with a key inside a decoded request).
    private func embedded(_ key: [UInt8], _ rng: inout SeededGenerator) -> ArraySlice<UInt8> {
        let before = randomKey(&rng, length: Int.random(in: 1...9, using: &rng))
        let buffer = before + key + randomKey(&rng, length: Int.random(in: 0...9, using: &rng))
        return buffer[before.count..<(before.count + key.count)]
    }

    /// Random `entries(after:prefix:limit:)` and `forEach` queries against the model.
    private func checkQueries(_ map: OrderedMap, _ expected: [(key: [UInt8], value: [UInt8])],
                              _ rng: inout SeededGenerator, seed: UInt64) {
        for _ in 0..<4 {
            let after: [UInt8]? = switch Int.random(in: 0..<3, using: &rng) {
            case 0: nil
            case 1: expected.randomElement(using: &rng)?.key
            default: smallKey(&rng)
            }
            let prefix: [UInt8] = switch Int.random(in: 0..<4, using: &rng) {
            case 0: []
            case 1: Array(smallKey(&rng).prefix(2))
            case 2: Array(structuredKey(&rng).prefix(Int.random(in: 1...7, using: &rng)))
            default: expected.randomElement(using: &rng).map { Array($0.key.prefix(Int.random(in: 0...$0.key.count, using: &rng))) } ?? []
            }
            let limit = [0, 1, 2, 7, 50, 10_000].randomElement(using: &rng)!
            let got = map.entries(after: after, prefix: prefix, limit: limit)
            let want = expected.filter { entry in
                entry.key.starts(with: prefix) && (after.map { precedes($0, entry.key) } ?? true)
            }.prefix(limit)
            #expect(same(got.map { ($0.key, $0.value) }, Array(want)), "seed \(seed): entries(after: \(String(describing: after)), prefix: \(prefix), limit: \(limit))")
        }
        // Group lookups give, in order, what one lookup at a time gives (groups of any size,
        // across several groups of walks, present and absent keys).
        let values = Dictionary(uniqueKeysWithValues: expected.map { ($0.key, $0.value) })
        let lookups = [0, 1, 2, 7, 8, 9, 17, 40].randomElement(using: &rng)!
        let keys = (0..<lookups).map { _ -> [UInt8] in
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: smallKey(&rng)
            case 1: structuredKey(&rng)
            default: expected.randomElement(using: &rng)?.key ?? []
            }
        }
        var found = [[UInt8]?](repeating: [0xFF], count: lookups)
        var order: [Int] = []
        map.values(forKeys: keys) { i, value in
            order.append(i)
            found[i] = value
        }
        #expect(order == Array(0..<lookups), "seed \(seed): values(forKeys:) order")
        #expect(found == keys.map { values[$0] }, "seed \(seed): values(forKeys: \(keys))")
        var fromSlices = [[UInt8]?](repeating: [0xFF], count: lookups)
        map.values(forKeys: keys.map { embedded($0, &rng) }) { i, value in fromSlices[i] = value }
        #expect(fromSlices == found, "seed \(seed): values(forKeys:) from slices")
        // forEach stops when asked.
        let stopAt = Int.random(in: 0...expected.count, using: &rng)
        var visited: [[UInt8]] = []
        map.forEach { key, _, _ in
            visited.append(key)
            return visited.count < stopAt
        }
        #expect(visited == expected.prefix(Swift.max(stopAt, expected.isEmpty ? 0 : 1)).map(\.key), "seed \(seed): forEach stop at \(stopAt)")
    }

    @Test func forEachRethrows() {
        struct Stop: Error {}
        var map = OrderedMap(leafCapacity: 4, branchCapacity: 4)
        for i in 0..<100 { map.updateValue([UInt8(i)], forKey: [UInt8(i)]) }
        var seen = 0
        #expect(throws: Stop.self) {
            try map.forEach { _, _, _ in
                seen += 1
                if seen == 37 { throw Stop() }
                return true
            }
        }
        #expect(seen == 37)
    }

    // MARK: Copy-on-write

    /// The bytes' address of the value stored for `key`.
    private func storage(_ map: OrderedMap, _ key: [UInt8]) -> UnsafeRawPointer? {
        map[key]!.withUnsafeBytes { $0.baseAddress }
    }

    @Test("a value copied in reuses the old value's storage only when nothing else holds it and the size fits")
    func copyingReusesStorageSafely() {
        var map = OrderedMap(leafCapacity: 4, branchCapacity: 4)
        for i in 0..<50 { map.updateValue(copying: value(i)[...], forKey: [UInt8(i)][...]) }
        let key: [UInt8] = [20]
        // The map shares the array it was given with the caller: copying in leaves that array alone.
        let first = [UInt8](repeating: 1, count: 100)
        map.updateValue(first, forKey: key)
        #expect(map.updateValue(copying: ([0] + [UInt8](repeating: 8, count: 100))[1...], forKey: key[...]) == 100)
        #expect(first == [UInt8](repeating: 1, count: 100))
        #expect(map[key] == [UInt8](repeating: 8, count: 100))

        // A slice that is a whole array is stored as that array, not copied (whatever its size).
        let whole = [UInt8](repeating: 6, count: 100)
        #expect(map.updateValue(copying: whole[...], forKey: key[...]) == 100)
        #expect(storage(map, key) == whole.withUnsafeBytes { $0.baseAddress })
        map.updateValue(copying: ([0] + [UInt8](repeating: 9, count: 100))[1...], forKey: key[...])
        #expect(whole == [UInt8](repeating: 6, count: 100))
        let address = storage(map, key)

        // Nothing else holds the old value: the same storage, the new bytes.
        let second = [UInt8](repeating: 2, count: 100)
        #expect(map.updateValue(copying: ([9, 9] + second)[2...], forKey: key[...]) == 100)
        #expect(map[key] == second)
        #expect(storage(map, key) == address)

        // A reader holds it (as a GET's reply does): the reader keeps the old bytes.
        let read = map[key]!
        #expect(map.updateValue(copying: ([0] + [UInt8](repeating: 3, count: 100))[1...], forKey: key[...]) == 100)
        #expect(read == second)
        #expect(map[key] == [UInt8](repeating: 3, count: 100))

        // A copy of the map (as a snapshot takes) keeps its contents.
        let frozen = map
        #expect(map.updateValue(copying: ([0] + [UInt8](repeating: 4, count: 100))[1...], forKey: key[...]) == 100)
        #expect(frozen[key] == [UInt8](repeating: 3, count: 100))
        #expect(map[key] == [UInt8](repeating: 4, count: 100))
        for i in 0..<50 where i != 20 { #expect(frozen[[UInt8(i)]] == value(i) && map[[UInt8(i)]] == value(i)) }

        // A much smaller value does not keep the big storage; a bigger one gets its own.
        map.updateValue(copying: [UInt8](repeating: 5, count: 10_000)[...], forKey: key[...])
        #expect(map.updateValue(copying: [5, 6][...], forKey: key[...]) == 10_000)
        #expect(map[key] == [5, 6])
        #expect(map[key]!.capacity < 100)
        #expect(map.updateValue(copying: [UInt8](repeating: 7, count: 500)[...], forKey: key[...]) == 2)
        #expect(map[key] == [UInt8](repeating: 7, count: 500))
    }

    @Test(arguments: [(4, 4), (64, 64)])
    func copiesAreIndependent(leafCapacity: Int, branchCapacity: Int) {
        var rng = SeededGenerator(seed: testSeed("copy-on-write \(leafCapacity)", 21))
        var original = OrderedMap(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
        var model = Model()
        for i in 0..<3000 {
            let key = randomKey(&rng, length: Int.random(in: 1...6, using: &rng))
            original.updateValue(value(i), forKey: key)
            _ = model.put(value(i), key)
        }
        let before = model.sorted

        // Mutate the original heavily; the copy keeps the old contents.
        let snapshot = original
        var changed = model
        for i in 0..<4000 {
            let key = Int.random(in: 0..<2, using: &rng) == 0
                ? before.randomElement(using: &rng)!.key : randomKey(&rng, length: Int.random(in: 1...6, using: &rng))
            if Int.random(in: 0..<2, using: &rng) == 0 {
                original.updateValue(value(-i), forKey: key)
                _ = changed.put(value(-i), key)
            } else {
                original.removeValue(forKey: key)
                _ = changed.delete(key)
            }
        }
        expectMap(snapshot, equals: before, "snapshot after the original changed")
        expectMap(original, equals: changed.sorted, "original")

        // And the other way round: mutate the copy, the original stays.
        var copy = original
        let originalContents = changed.sorted
        for (key, _) in originalContents.prefix(originalContents.count / 2) { copy.removeValue(forKey: key) }
        for i in 0..<500 { copy.updateValue([1], forKey: [0xEE] + randomKey(&rng, length: 3) + [UInt8(i & 0xFF)]) }
        expectMap(original, equals: originalContents, "original after the copy changed")
        expectMap(snapshot, equals: before, "first snapshot still")
        #expect(copy.count <= originalContents.count - originalContents.count / 2 + 500)
        #expect(throws: Never.self) { try copy.checkInvariants() }

        // Emptying a copy leaves the original whole.
        var emptied = snapshot
        for (key, _) in before { emptied.removeValue(forKey: key) }
        expectMap(emptied, equals: [])
        expectMap(snapshot, equals: before, "snapshot after its copy was emptied")
    }

    /// A write to a copy copies only the nodes on its path; an absent key copies nothing.
    @Test func writesCopyOnlyTheirPath() {
        var rng = SeededGenerator(seed: testSeed("path copy", 31))
        var map = OrderedMap(leafCapacity: 4, branchCapacity: 4)
        for _ in 0..<2000 { map.updateValue([1], forKey: randomKey(&rng, length: 4)) }
        let levels = height(map)
        #expect(levels >= 6)
        let shared = nodeIdentities(map)
        for _ in 0..<50 {
            var copy = map
            let key = randomKey(&rng, length: 4)
            copy.updateValue([2], forKey: key)
            let fresh = nodeIdentities(copy).subtracting(shared)
            // The path, plus at most one new sibling per level and a new root when splits run up.
            #expect(fresh.count <= 2 * levels + 1, "\(fresh.count) new nodes for one put in a tree of height \(levels)")
            #expect(nodeIdentities(map) == shared, "the original's nodes were replaced")

            var other = map
            #expect(other.removeValue(forKey: [9, 9, 9, 9, 9]) == nil)
            #expect(other.root === map.root, "removing an absent key copied the root")
        }
        var copy = map
        let victim = contents(map)[700].key
        copy.removeValue(forKey: victim)
        #expect(nodeIdentities(copy).subtracting(shared).count <= 2 * levels)
        #expect(map[victim] == [1] && copy[victim] == nil)
    }

    /// Keys arriving in ascending order (a bulk load) leave the nodes they fill without the
    /// headroom a split gives (a quarter of the fan-out): only the nodes on the rightmost path,
    /// which take the next keys, keep room. (Arrays may still round their capacity up to what
    /// malloc handed out: a slot or two, never a quarter of 64.)
    @Test func ascendingInsertsLeaveNoHeadroomBehind() throws {
        let headroom = OrderedMap.Layout.standard.leafCapacity / 4
        var map = OrderedMap()
        for i in 0..<20_000 { map.updateValue([1], forKey: Array("key:\(100_000 + i)".utf8)) }
        try map.checkInvariants()
        var rightmost = Set<ObjectIdentifier>()
        var node = map.root
        while let current = node { rightmost.insert(ObjectIdentifier(current)); node = current.children.last }
        var spare = 0, nodes = 0
        func walk(_ node: OrderedMap.Node) {
            node.children.forEach(walk)
            guard !rightmost.contains(ObjectIdentifier(node)) else { return }
            nodes += 1
            let room = node.isLeaf ? node.entries.capacity - node.entries.count : node.children.capacity - node.children.count
            if room >= headroom { spare += 1 }
        }
        walk(try #require(map.root))
        #expect(nodes > 300)
        #expect(spare == 0, "\(spare) of \(nodes) nodes off the rightmost path kept split headroom")
    }

    /// The engine's use: encode a snapshot on another thread while the actor keeps writing.
    @Test func snapshotReadConcurrentlyWithWrites() async {
        var map = OrderedMap(leafCapacity: 8, branchCapacity: 8)
        for i in 0..<5000 { map.updateValue(value(i), forKey: Array("key\(100_000 + i)".utf8)) }
        let snapshot = map
        let expected = contents(snapshot)
        let reader = Task.detached {
            var rounds: [Bool] = []
            for _ in 0..<3 { rounds.append(same(contents(snapshot), expected)) }
            return rounds
        }
        for i in 0..<5000 {
            map.removeValue(forKey: Array("key\(100_000 + i)".utf8))
            map.updateValue(value(i), forKey: Array("new\(i)".utf8))
        }
        #expect(await reader.value == [true, true, true])
        #expect(map.count == 5000 && map[Array("key100000".utf8)] == nil)
        #expect(throws: Never.self) { try map.checkInvariants() }
    }

    // MARK: Builder

    @Test(arguments: [(4, 4), (5, 4), (64, 64)])
    func builderMatchesInserts(leafCapacity: Int, branchCapacity: Int) {
        var rng = SeededGenerator(seed: testSeed("builder \(leafCapacity)/\(branchCapacity)", 41))
        let m = leafCapacity
        var counts = [0, 1, 2, 3, m - 1, m, m + 1, m + m / 2 - 1, 2 * m, 2 * m + 1, m * branchCapacity,
                      m * branchCapacity + 1, m * branchCapacity * branchCapacity + 1, 5000]
        counts += (0..<4).map { _ in Int.random(in: 0...2000, using: &rng) }
        counts = counts.filter { $0 <= 5000 }
        for n in counts {
            var keys = Set<[UInt8]>()
            while keys.count < n { keys.insert(randomKey(&rng, length: Int.random(in: 0...6, using: &rng))) }
            let sorted = keys.sorted(by: precedes)
            var builder = OrderedMap.Builder(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
            var inserted = OrderedMap(leafCapacity: leafCapacity, branchCapacity: branchCapacity)
            for (i, key) in sorted.enumerated() {
                do { let accepted = builder.append(key: key, value: value(i)); #expect(accepted) }
                inserted.updateValue(value(i), forKey: key)
            }
            var built = builder.build()
            let expected = sorted.enumerated().map { (key: $0.element, value: value($0.offset)) }
            expectMap(built, equals: expected, "built \(n)")
            expectMap(inserted, equals: expected, "inserted \(n)")
            // A built tree takes further writes like any other.
            for i in 0..<Swift.min(n, 300) {
                built.removeValue(forKey: sorted[(i * 7) % n])
                built.updateValue([0], forKey: randomKey(&rng, length: 7))
            }
            #expect(throws: Never.self, "built \(n) after writes") { try built.checkInvariants() }
        }
    }

    @Test func builderRejectsOutOfOrderKeys() {
        var builder = OrderedMap.Builder(leafCapacity: 4, branchCapacity: 4)
        do { let accepted = builder.append(key: [], value: [0]); #expect(accepted) }
        do { let accepted = builder.append(key: [], value: [1]); #expect(!accepted, "duplicate empty key") }
        do { let accepted = builder.append(key: [5], value: [5]); #expect(accepted) }
        do { let accepted = builder.append(key: [5], value: [6]); #expect(!accepted, "duplicate") }
        do { let accepted = builder.append(key: [4, 0xFF], value: [7]); #expect(!accepted, "smaller") }
        do { let accepted = builder.append(key: [], value: [7]); #expect(!accepted, "smaller") }
        do { let accepted = builder.append(key: [5, 0], value: [8]); #expect(accepted, "an extension of the last key is greater") }
        do { let accepted = builder.append(key: [5], value: [8]); #expect(!accepted, "a prefix of the last key is smaller") }
        do { let accepted = builder.append(key: [6], value: [9]); #expect(accepted) }
        let map = builder.build()
        expectMap(map, equals: [([], [0]), ([5], [5]), ([5, 0], [8]), ([6], [9])].map { (key: $0.0, value: $0.1) })
    }

    @Test func builderCopiesAreIndependent() {
        var first = OrderedMap.Builder(leafCapacity: 4, branchCapacity: 4)
        for i in 0..<10 { do { let accepted = first.append(key: [UInt8(i)], value: [1]); #expect(accepted) } }
        var second = first
        do { let accepted = first.append(key: [100], value: [1]); #expect(accepted) }
        do { let accepted = second.append(key: [50], value: [2]); #expect(accepted) }
        do { let accepted = second.append(key: [51], value: [2]); #expect(accepted) }
        let a = first.build()
        let b = second.build()
        expectMap(a, equals: ((0..<10).map { [UInt8($0)] } + [[100]]).map { (key: $0, value: [1]) })
        expectMap(b, equals: (0..<10).map { (key: [UInt8($0)], value: [1]) } + [([50], [2]), ([51], [2])].map { (key: $0.0, value: $0.1) })
    }

    // MARK: Pagination

    @Test func paginationVisitsEveryKeyOnce() {
        var rng = SeededGenerator(seed: testSeed("pagination", 51))
        var map = OrderedMap(leafCapacity: 4, branchCapacity: 4)
        for i in 0..<1500 { map.updateValue(value(i), forKey: randomKey(&rng, length: Int.random(in: 0...3, using: &rng))) }
        let all = contents(map).map(\.key)
        for pageSize in [1, 3, 4, 17, 2000] {
            var seen: [[UInt8]] = []
            var cursor: [UInt8]? = nil
            while true {
                let page = map.entries(after: cursor, prefix: [], limit: pageSize)
                #expect(page.count <= pageSize)
                seen += page.map(\.key)
                guard page.count == pageSize, let last = page.last else { break }
                cursor = last.key
            }
            #expect(seen == all, "page size \(pageSize)")
        }
        // With a prefix.
        let prefix: [UInt8] = all[all.count / 2].prefix(1).map { $0 }
        var seen: [[UInt8]] = []
        var cursor: [UInt8]? = nil
        repeat {
            let page = map.entries(after: cursor, prefix: prefix, limit: 5)
            seen += page.map(\.key)
            cursor = page.count == 5 ? page.last!.key : nil
        } while cursor != nil
        #expect(seen == all.filter { $0.starts(with: prefix) })
    }

    @Test func paginationWithWritesBetweenPages() {
        var rng = SeededGenerator(seed: testSeed("pagination with writes", 61))
        var map = OrderedMap(leafCapacity: 4, branchCapacity: 5)
        var stable = Set<[UInt8]>()
        var volatile = Set<[UInt8]>()
        for i in 0..<1200 {
            let key = randomKey(&rng, length: Int.random(in: 1...4, using: &rng))
            map.updateValue(value(i), forKey: key)
            if i % 2 == 0 { stable.insert(key); volatile.remove(key) } else if !stable.contains(key) { volatile.insert(key) }
        }
        for prefix in [[], [UInt8(0x80)]] {
            var seen: [[UInt8]] = []
            var cursor: [UInt8]? = nil
            while true {
                let page = map.entries(after: cursor, prefix: prefix, limit: 7)
                seen += page.map(\.key)
                guard page.count == 7 else { break }
                cursor = page.last!.key
                // Writes between pages: delete and insert keys that are not stable, all over the range.
                for _ in 0..<25 {
                    if Int.random(in: 0..<2, using: &rng) == 0, let victim = volatile.randomElement(using: &rng) {
                        map.removeValue(forKey: victim)
                        volatile.remove(victim)
                    } else {
                        let key = randomKey(&rng, length: Int.random(in: 1...4, using: &rng))
                        if !stable.contains(key) { map.updateValue([7], forKey: key); volatile.insert(key) }
                    }
                }
                #expect(throws: Never.self) { try map.checkInvariants() }
            }
            // Strictly increasing: no key twice, no going back.
            #expect(zip(seen, seen.dropFirst()).allSatisfy { precedes($0, $1) })
            let seenSet = Set(seen)
            let wanted = stable.filter { $0.starts(with: prefix) }
            #expect(wanted.isSubset(of: seenSet), "\(wanted.subtracting(seenSet).count) stable keys missed")
            #expect(seen.allSatisfy { $0.starts(with: prefix) })
        }
    }

    // MARK: Binary keys

    @Test func binaryKeys() {
        let keys: [[UInt8]] = [
            [], [0x00], [0x00, 0x00], [0x00, 0x00, 0x00], [0x00, 0xFF], [0x01], [0x7F], [0x80],
            [0xFF], [0xFF, 0x00], [0xFF, 0xFF], [0xFF, 0xFF, 0xFF],
            Array(repeating: 0xFF, count: 8), Array(repeating: 0xFF, count: 9), Array(repeating: 0x00, count: 9),
            Array(repeating: 0xFF, count: 8) + [0x00],
        ]
        let sorted = keys.sorted(by: precedes)
        for layout in [(3, 4), (64, 64)] {
            var map = OrderedMap(leafCapacity: layout.0, branchCapacity: layout.1)
            for key in keys.reversed() { map.updateValue(key + [0xAB], forKey: key) }
            expectMap(map, equals: sorted.map { (key: $0, value: $0 + [0xAB]) })
            for key in keys { #expect(map[key] == key + [0xAB]) }
            #expect(map[[0x00, 0x01]] == nil && map[[0xFF, 0xFF, 0xFF, 0xFF]] == nil)

            func keysOf(_ page: [KeyValue]) -> [[UInt8]] { page.map(\.key) }
            #expect(keysOf(map.entries(after: nil, prefix: [], limit: 100)) == sorted)
            #expect(keysOf(map.entries(after: [], prefix: [], limit: 100)) == Array(sorted.dropFirst()), "after the empty key")
            #expect(keysOf(map.entries(after: nil, prefix: [0x00], limit: 100)) == sorted.filter { $0.first == 0x00 })
            #expect(keysOf(map.entries(after: [0x00], prefix: [0x00], limit: 100)) == sorted.filter { $0.first == 0x00 && $0.count > 1 })
            #expect(keysOf(map.entries(after: nil, prefix: [0xFF], limit: 2)) == [[0xFF], [0xFF, 0x00]])
            #expect(keysOf(map.entries(after: [0xFF, 0x00], prefix: [0xFF, 0xFF], limit: 100)) == sorted.filter { $0.starts(with: [0xFF, 0xFF]) })
            #expect(keysOf(map.entries(after: [0xFF, 0xFF, 0xFF, 0xFF], prefix: [0xFF], limit: 100)) == sorted.filter { $0.starts(with: [0xFF, 0xFF, 0xFF, 0xFF]) && $0.count > 4 })
            #expect(map.entries(after: [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], prefix: [], limit: 100).isEmpty)
            #expect(map.entries(after: [0x01], prefix: [0x00], limit: 100).isEmpty, "after past the prefix")
            #expect(map.entries(after: nil, prefix: [0x02], limit: 100).isEmpty)

            for key in sorted where key.count % 2 == 1 { #expect(map.removeValue(forKey: key) == key + [0xAB]) }
            expectMap(map, equals: sorted.filter { $0.count % 2 == 0 }.map { (key: $0, value: $0 + [0xAB]) })
            #expect(map.removeValue(forKey: [0x00]) == nil)
        }
    }

    // MARK: The checker itself

    @Test func checkerCatchesBrokenTrees() {
        func sampleMap() -> OrderedMap {
            var map = OrderedMap(leafCapacity: 4, branchCapacity: 4)
            for i in 0..<200 { map.updateValue([1], forKey: [UInt8(i / 16), UInt8(i % 16)]) }
            return map
        }
        let healthy = sampleMap()
        #expect(throws: Never.self) { try healthy.checkInvariants() }

        var miscounted = sampleMap()
        miscounted.entryCount += 1
        #expect(throws: OrderedMap.InvariantViolation.self) { try miscounted.checkInvariants() }

        let unordered = sampleMap()
        var leaf = unordered.root!
        while !leaf.isLeaf { leaf = leaf.children[1] }
        leaf.keys.replace(at: 0, with: [0xFF, 0xFF])
        #expect(throws: OrderedMap.InvariantViolation.self) { try unordered.checkInvariants() }

        let underfull = sampleMap()
        leaf = underfull.root!
        while !leaf.isLeaf { leaf = leaf.children[0] }
        while leaf.keys.count > 1 { _ = leaf.removeEntry(at: 0) }
        #expect(throws: OrderedMap.InvariantViolation.self) { try underfull.checkInvariants() }

        let uneven = sampleMap()
        let branch = uneven.root!.children[0]
        branch.children[0] = branch.children[0].children.first ?? OrderedMap.Node(keys: OrderedMap.PackedKeys([0]), entries: [OrderedMap.Entry(value: [0], version: 1)])
        #expect(throws: OrderedMap.InvariantViolation.self) { try uneven.checkInvariants() }
    }
}
