import ActorKVProtocol
import ActorKVTestSupport
import Testing
@testable import ActorKVStore

/// ``Operation/packedEntries(_:within:)``, HGETALL's read: every live key and value in key
/// order, packed; a page of them past its byte limit; none where no namespace is.
@Suite("Packed entries")
struct PackedEntriesTests {
    @Test("keys, values or both of every live entry in key order, across many leaves, never a key whose deadline passed (not yet swept); the same as a scan's page")
    func packsLiveEntries() async throws {
        let dir = TemporaryDirectory("packed-entries")
        defer { dir.remove() }
        // The sweeper never runs: the expired keys stay in the map, where the walk meets them.
        var options = testOptions()
        options.backgroundExecutor = ParkedExecutor.shared
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("h")
            let writes: [ActorKVStore.Operation] = (0..<3000).map { i in
                let key = Array("k\(i)".utf8), value = Array(repeating: UInt8(ascii: "v"), count: i % 40)
                // Every seventh key expires at once; every eleventh has a deadline an hour off.
                if i % 7 == 0 { return .lifetimePut(LifetimePut(key: key, value: value, milliseconds: 1)) }
                if i % 11 == 0 { return .lifetimePut(LifetimePut(key: key, value: value, milliseconds: 3_600_000)) }
                return .put(key: key, value: value)
            }
            _ = await ns.execute(writes)
            try await Task.sleep(nanoseconds: 20_000_000)
            let live = (0..<3000).filter { $0 % 7 != 0 }.map { Array("k\($0)".utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
            let entries = live.map { key in
                KeyValue(key: key, value: Array(repeating: UInt8(ascii: "v"), count: Int(String(decoding: key.dropFirst(), as: UTF8.self))! % 40))
            }
            for parts in [EntryParts.keys, .values, .both] {
                let outcome = await ns.execute([.packedEntries(parts, within: .none)]).outcomes[0]
                guard case .strings(let strings) = outcome else { Issue.record("\(parts): \(outcome)"); continue }
                let expected: [[UInt8]] = entries.flatMap { entry -> [[UInt8]] in
                    switch parts {
                    case .keys: return [entry.key]
                    case .values: return [entry.value]
                    case .both: return [entry.key, entry.value]
                    }
                }
                #expect(strings.count == expected.count && (0..<strings.count).allSatisfy { Array(strings[$0]) == expected[$0] }, "\(parts)")
            }
            guard case .page(let page) = await ns.execute([.scan(.start, prefix: [], limit: .max)]).outcomes[0] else { Issue.record("no page"); return }
            #expect(page.entries == entries)
        }
    }

    @Test("past the bound (in all or per key, of the namespace's keys and values), a page of every entry instead; a namespace that does not exist packs nothing")
    func pageBeyondTheBound() async throws {
        let dir = TemporaryDirectory("packed-limit")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            _ = await ns.execute([.put(key: b("a"), value: b("123")), .put(key: b("b"), value: b("45"))])  // 7 bytes
            let entries = [KeyValue(key: b("a"), value: b("123")), KeyValue(key: b("b"), value: b("45"))]
            let outcomes = await ns.execute([.packedEntries(.both, within: PackingBound(totalBytes: 7, bytesPerKey: 4)),
                                             .packedEntries(.keys, within: PackingBound(totalBytes: 6, bytesPerKey: 4)),
                                             .packedEntries(.values, within: PackingBound(totalBytes: 7, bytesPerKey: 3))]).outcomes
            let page = Outcome.page(ScanPage(entries: entries, next: .start))
            #expect(outcomes == [.strings(BulkStrings([b("a"), b("123"), b("b"), b("45")])), page, page])
            #expect(PackingBound(totalBytes: 10, bytesPerKey: .max).allows(bytes: 10, keys: 2) && PackingBound.none.allows(bytes: .max, keys: 1))
            #expect(!PackingBound(totalBytes: 10, bytesPerKey: 4).allows(bytes: 9, keys: 2) && !PackingBound(totalBytes: 8, bytesPerKey: 5).allows(bytes: 9, keys: 2))
            let absent = await store.execute([.packedEntries(.both, within: .none)], inNamespace: "nothing")
            #expect(absent.outcomes == [.strings(BulkStrings())])
        }
    }
}
