import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Namespace and Store behaviour in temporary directories. Nothing here compacts or arms faults,
/// so these tests run in parallel with each other.
@Suite("Store and namespace behaviour")
struct StoreTests {
    @Test("put, get, delete, count, exists")
    func basicOperations() async throws {
        let dir = TemporaryDirectory("basic")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("main")
            #expect(await ns.get(b("a")) == nil)
            #expect(await ns.count() == 0)
            try await ns.put(b("a"), b("1"))
            try await ns.put(b("b"), b("2"))
            try await ns.put(b("a"), b("3"))
            #expect(await ns.get(b("a")) == b("3"))
            #expect(await ns.count() == 2)
            #expect(await ns.execute([.exists([b("a"), b("b"), b("zz"), b("a")])]).outcomes == [.integer(3)])
            #expect(try await ns.delete([b("a"), b("zz")]) == 1)
            #expect(try await ns.delete([b("a")]) == 0)
            #expect(await ns.get(b("a")) == nil)
            #expect(await ns.count() == 1)
            try await ns.put(b("empty"), [])
            #expect(await ns.get(b("empty")) == [])
            // Namespaces are separate.
            let other = try await store.namespace("other")
            #expect(await other.get(b("b")) == nil)
            try await other.put(b("b"), b("other"))
            #expect(await ns.get(b("b")) == b("2"))
            #expect(await store.namespaceNames() == ["main", "other"])
            let missing = try await store.existingNamespace("missing")
            #expect(missing == nil)
            #expect(await store.namespaceNames() == ["main", "other"])
        }
    }

    @Test("invalid keys, values and namespace names are refused and change nothing")
    func validation() async throws {
        let dir = TemporaryDirectory("valid")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(limits: StoreLimits(maxKeyBytes: 8, maxValueBytes: 16))) { store in
            let ns = try await store.namespace("v")
            #expect(await storeError { try await ns.put([], b("x")) }?.code == .invalidKey)
            #expect(await storeError { try await ns.put(b("123456789"), b("x")) }?.code == .invalidKey)
            #expect(await storeError { try await ns.put(b("k"), [UInt8](repeating: 1, count: 17)) }?.code == .valueTooLarge)
            // Deleting no keys is refused or a no-op; either way nothing changes (checked after reopen too).
            do {
                #expect(try await ns.delete([]) == 0)
            } catch let error as StoreError {
                #expect(error.code == .invalidArgument)
            }
            #expect(await storeError { try await ns.apply([]) }?.code == .invalidArgument)
            try await ns.put(b("12345678"), [UInt8](repeating: 1, count: 16))
            #expect(await ns.count() == 1)
            // A run of reads only: each GET's key is held to the limits as a write's is.
            let reads = await ns.execute([.get(b("12345678")), .get([]), .get(b("123456789")), .exists([b("k"), []]), .count])
            #expect(reads.outcomes[0] == .value([UInt8](repeating: 1, count: 16)))
            for index in 1...3 {
                guard case .failure(let error) = reads.outcomes[index] else { Issue.record("read \(index) accepted"); continue }
                #expect(error.code == .invalidKey)
            }
            #expect(reads.outcomes[4] == .integer(1))
            for name in ["..", ".x", "a/b", "", String(repeating: "n", count: 65), "é"] {
                #expect(await storeError { _ = try await store.namespace(name) }?.code == .invalidNamespace, "\(name)")
            }
            #expect(await store.namespaceNames() == ["v"])
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("v")
            expectSameContents(await contents(ns), [b("12345678"): [UInt8](repeating: 1, count: 16)])
        }
    }

    @Test("GETs in a row are looked up together and each still sees exactly the writes before it")
    func runsOfGets() async throws {
        let dir = TemporaryDirectory("gets")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("g")
            for i in 0..<300 { try await ns.put(b("k\(i)"), b("v\(i)")) }
            var operations: [ActorKVStore.Operation] = (0..<20).map { .get(b("k\($0 * 15)")) }
            operations += [.get(b("missing")), .get([]), .put(key: b("k0"), value: b("new")), .get(b("k0")), .get(b("k15")),
                           .delete([b("k15")]), .get(b("k15")), .get(b("k0"))]
            let run = await ns.execute(operations)
            try await run.durability.wait()
            let expected: [Outcome] = (0..<20).map { .value(b("v\($0 * 15)")) }
            #expect(Array(run.outcomes[0..<21]) == expected + [.value(nil)])
            guard case .failure(let error) = run.outcomes[21] else { Issue.record("empty key accepted"); return }
            #expect(error.code == .invalidKey)
            #expect(Array(run.outcomes[22...]) == [.stored, .value(b("new")), .value(b("v15")), .integer(1), .value(nil), .value(b("new"))])
        }
    }

    @Test("long runs of PUTs (prefetched in groups) mixed with GETs, DELs and a refused PUT act one at a time, and reopen the same")
    func longPipelinesOfPutsOnFewKeys() async throws {
        // Runs of PUTs are prefetched in groups before they are applied one at a time; groups
        // that contain writes to the same key, deletes, GETs and a refused PUT must still give
        // exactly what one operation at a time gives.
        let dir = TemporaryDirectory("putruns")
        defer { dir.remove() }
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next(_ n: Int) -> Int {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            return Int(state % UInt64(n))
        }
        var model: [[UInt8]: [UInt8]] = [:]
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("runs")
            for round in 0..<20 {
                var operations: [ActorKVStore.Operation] = []
                var expected: [Outcome] = []
                for i in 0..<(20 + next(60)) {
                    let key = b("key\(next(12))")
                    switch next(10) {
                    case 0:
                        operations.append(.get(key))
                        expected.append(.value(model[key]))
                    case 1:
                        operations.append(.delete([key]))
                        expected.append(.integer(model.removeValue(forKey: key) == nil ? 0 : 1))
                    case 2:
                        operations.append(.put(key: [], value: b("refused")))
                        expected.append(.failure(StoreError(.invalidKey, "key is 0 bytes; keys are 1 to 65536 bytes")))
                    default:
                        let value = b("r\(round)i\(i)") + [UInt8](repeating: UInt8(i), count: next(3) * 40)
                        operations.append(.put(key: key, value: value))
                        model[key] = value
                        expected.append(.stored)
                    }
                }
                let run = await ns.execute(operations)
                try await run.durability.wait()
                #expect(run.outcomes == expected, "round \(round)")
            }
            for (key, value) in model { #expect(await ns.get(key) == value) }
            #expect(await ns.count() == model.count)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("runs")
            for (key, value) in model { #expect(await ns.get(key) == value) }
            #expect(await ns.count() == model.count)
        }
    }

    @Test("a pipeline runs in order: a GET after a PUT in the same run sees it")
    func pipelines() async throws {
        let dir = TemporaryDirectory("pipe")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("p")
            let run = await ns.execute([
                .get(b("k")),
                .put(key: b("k"), value: b("v1")),
                .get(b("k")),
                .put(key: [], value: b("bad")),                 // fails alone
                .batch([.put(key: b("x"), value: b("1")), .delete(key: b("k")), .delete(key: b("nope"))]),
                .get(b("k")),
                .exists([b("x"), b("k")]),
                .count,
                .delete([b("x"), b("y")]),
                .scan(.start, prefix: [], limit: 10),
            ])
            try await run.durability.wait()
            #expect(run.outcomes.count == 10)
            #expect(run.outcomes[0] == .value(nil))
            #expect(run.outcomes[1] == .stored)
            #expect(run.outcomes[2] == .value(b("v1")))
            guard case .failure(let e) = run.outcomes[3] else { Issue.record("empty key accepted"); return }
            #expect(e.code == .invalidKey)
            #expect(run.outcomes[4] == .batch([.stored, .integer(1), .integer(0)]))
            #expect(run.outcomes[5] == .value(nil))
            #expect(run.outcomes[6] == .integer(1))
            #expect(run.outcomes[7] == .integer(1))
            #expect(run.outcomes[8] == .integer(1))
            #expect(run.outcomes[9] == .page(ScanPage(entries: [], next: .start)))
            let stats = await ns.currentStatistics()
            #expect(stats.lastSequence == 3)  // put, batch, delete: the failed put used no sequence number
        }
        // The pipeline's writes are durable and reopen the same.
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("p")
            #expect(await contents(ns).isEmpty)
            #expect(await ns.currentStatistics().recordsReplayed == 3)
        }
    }

    @Test("a batch with one invalid mutation applies nothing and does not grow the log")
    func batchAllOrNothing() async throws {
        let dir = TemporaryDirectory("batch")
        defer { dir.remove() }
        let log = dir.data + "/b/000001.log"
        try await withStore(dir.data, testOptions(limits: StoreLimits(maxKeyBytes: 16, maxValueBytes: 64))) { store in
            let ns = try await store.namespace("b")
            try await ns.put(b("keep"), b("old"))
            let size = logLength(log)
            #expect(size > 0)
            let bad: [[Mutation]] = [
                [.put(key: b("a"), value: b("1")), .delete(key: b("keep")), .put(key: [], value: b("x"))],
                [.put(key: b("a"), value: b("1")), .put(key: b("keep"), value: [UInt8](repeating: 0, count: 65))],
                [.delete(key: b("keep")), .delete(key: [UInt8](repeating: 1, count: 17))],
            ]
            for mutations in bad {
                #expect(await storeError { try await ns.apply(mutations) } != nil)
                #expect(await ns.get(b("a")) == nil)
                #expect(await ns.get(b("keep")) == b("old"))
                #expect(logLength(log) == size)
            }
            #expect(await ns.currentStatistics().lastSequence == 1)
            // Nothing to change: no record and no sequence number either.
            #expect(try await ns.delete([]) == 0)
            #expect(await storeError { try await ns.apply([]) }?.code == .invalidArgument)
            #expect(logLength(log) == size)
            #expect(await ns.currentStatistics().lastSequence == 1)
            let results = try await ns.apply([.put(key: b("a"), value: b("1")), .delete(key: b("keep")), .delete(key: b("keep"))])
            #expect(results == [nil, true, false])
            #expect(logLength(log) > size)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("b")
            #expect(await contents(ns) == [b("a"): b("1")])
        }
    }

    @Test("a write too large for one log record is refused up front, not written as a record recovery would refuse")
    func oversizedRecord() async throws {
        let dir = TemporaryDirectory("huge")
        defer { dir.remove() }
        let log = dir.data + "/h/000001.log"
        let value = [UInt8](repeating: 0x61, count: 64 << 20)  // the largest value allowed; shared, not copied
        let batch = (0..<17).map { Mutation.put(key: b("k\($0)"), value: value) }  // > 1 GiB in one record
        try await withStore(dir.data, testOptions(.no)) { store in
            let ns = try await store.namespace("h")
            try await ns.put(b("small"), b("1"))
            let size = logLength(log)
            let error = await storeError { try await ns.apply(batch) }
            #expect(error?.code == .valueTooLarge)
            #expect(await ns.count() == 1)
            #expect(logLength(log) == size)
            let run = await ns.execute([.batch(batch.map(BatchStep.init)), .put(key: b("small"), value: b("2"))])
            guard case .failure = run.outcomes[0] else { Issue.record("oversized batch accepted"); return }
            #expect(run.outcomes[1] == .stored)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            expectSameContents(await contents(ns), [b("small"): b("2")])
        }
    }

    @Test("reopening gives the same data, binary keys and values included", arguments: DurabilityPolicy.allCases)
    func reopen(durability: DurabilityPolicy) async throws {
        let dir = TemporaryDirectory("reopen")
        defer { dir.remove() }
        var rng = SeededGenerator(seed: 77)
        var model: [[UInt8]: [UInt8]] = [:]
        var pool: [[UInt8]] = [[0x00], [0xFF], b("\r\n"), [0xC0, 0x80], b("é")]
        for i in 0..<40 { pool.append(b("key\(i)")) }
        let writes = 300
        var records = 0  // a delete that finds none of its keys writes none
        try await withStore(dir.data, testOptions(durability)) { store in
            let ns = try await store.namespace("r")
            for _ in 0..<writes {
                let key = pool.randomElement(using: &rng)!
                records += 1
                switch Int.random(in: 0..<10, using: &rng) {
                case 0..<6:
                    let value = rng.bytes(Int.random(in: 0..<40, using: &rng))
                    try await ns.put(key, value)
                    model[key] = value
                case 6..<8:
                    let keys = [key, pool.randomElement(using: &rng)!]
                    try await ns.delete(keys)
                    if keys.allSatisfy({ model[$0] == nil }) { records -= 1 }
                    for k in keys { model[k] = nil }
                default:
                    let value = rng.bytes(3)
                    let other = pool.randomElement(using: &rng)!
                    try await ns.apply([.put(key: key, value: value), .delete(key: other)])
                    model[key] = value
                    model[other] = nil
                }
            }
            expectSameContents(await contents(ns), model)
        }
        try await withStore(dir.data, testOptions(durability)) { store in
            let ns = try await store.namespace("r")
            let found = await contents(ns)
            expectSameContents(found, model)
            let stats = await ns.currentStatistics()
            #expect(stats.recordsReplayed == records && records < writes)
            #expect(stats.lastSequence == UInt64(records))
            #expect(stats.tornBytesCut == 0)
            #expect(stats.keys == model.count)
            // Sequence numbers continue after the reopen.
            try await ns.put(b("after"), b("reopen"))
            #expect(await ns.currentStatistics().lastSequence == UInt64(records + 1))
        }
        try await withStore(dir.data) { store in
            let ns = try #require(try await store.existingNamespace("r"))
            model[b("after")] = b("reopen")
            expectSameContents(await contents(ns), model)
        }
    }

    @Test("scan pagination returns every key exactly once while other keys are written between and during pages")
    func scanUnderConcurrentWrites() async throws {
        let dir = TemporaryDirectory("scan")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.no)) { store in
            let ns = try await store.namespace("s")
            let stable = (0..<300).map { b(String(format: "m%04d", $0 * 2)) }
            for chunk in stride(from: 0, to: stable.count, by: 50) {
                try await ns.apply(stable[chunk..<min(chunk + 50, stable.count)].map { .put(key: $0, value: $0) })
            }
            // A writer that keeps inserting and deleting keys between the stable ones while we scan.
            let writer = Task {
                var rng = SeededGenerator(seed: 1)
                var inserted: [[UInt8]] = []
                var n = 0
                while !Task.isCancelled || n < 50 {
                    let key = b(String(format: "m%04d", Int.random(in: 0..<300, using: &rng) * 2 + 1))
                    try await ns.put(key, b("transient"))
                    inserted.append(key)
                    if inserted.count > 20 { try await ns.delete([inserted.removeFirst()]) }
                    n += 1
                    if n % 8 == 0 { await Task.yield() }
                }
                return n
            }
            func isStable(_ key: [UInt8]) -> Bool { key.first == UInt8(ascii: "m") && key.last! % 2 == 0 }
            var rng = SeededGenerator(seed: 2)
            var seen: [[UInt8]] = []
            var all: [[UInt8]] = []
            var cursor = ScanCursor.start
            var pages = 0
            repeat {
                let page = await ns.scan(from: cursor, limit: 7)
                pages += 1
                #expect(page.entries.count <= 7)
                all += page.entries.map(\.key)
                seen += page.entries.map(\.key).filter(isStable)
                for e in page.entries where isStable(e.key) { #expect(e.value == e.key) }
                // Between pages: insert and delete other keys, before, at and after the cursor.
                for _ in 0..<3 {
                    let odd = b(String(format: "m%04d", Int.random(in: 0..<300, using: &rng) * 2 + 1))
                    try await ns.put(odd, b("between"))
                    if Bool.random(using: &rng) { try await ns.delete([odd]) }
                }
                try await ns.put(b("a-before"), b("x"))
                try await ns.put(b("z-after-\(pages)"), b("x"))
                cursor = page.next
                await Task.yield()  // let the concurrent writer in between pages too
            } while cursor != .start
            writer.cancel()
            let writes = try await writer.value
            #expect(writes >= 50)
            #expect(seen == stable, "every stable key once, in order (saw \(seen.count) of \(stable.count))")
            for i in 1..<all.count { #expect(all[i - 1].lexicographicallyPrecedes(all[i]), "keys strictly ascend across pages") }
            #expect(pages >= 300 / 7)
        }
    }

    @Test("prefix scans return exactly the keys with the prefix, page by page")
    func prefixScans() async throws {
        let dir = TemporaryDirectory("prefix")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.no)) { store in
            let ns = try await store.namespace("p")
            let keys: [[UInt8]] = [b("use"), b("user:1"), b("user:10"), b("user:2"), b("usera"), b("user;"), b("v"),
                                   [0xFE], [0xFF], [0xFF, 0x00], [0xFF, 0xFF], [0xFF, 0xFF, 0x01], b("a")]
            try await ns.apply(keys.map { .put(key: $0, value: $0) })
            func scanAll(prefix: [UInt8], limit: Int, from start: ScanCursor = .start) async -> [[UInt8]] {
                var out: [[UInt8]] = []
                var cursor = start
                repeat {
                    let page = await ns.scan(from: cursor, prefix: prefix, limit: limit)
                    #expect(page.entries.count <= max(1, limit))
                    out += page.entries.map(\.key)
                    cursor = page.next
                } while cursor != .start
                return out
            }
            let sorted = keys.sorted { $0.lexicographicallyPrecedes($1) }
            for prefix in [b("user:"), b("use"), b("user"), [0xFF], [0xFF, 0xFF], b("v"), b("nothing"), [], [0x00]] {
                let expected = sorted.filter { $0.starts(with: prefix) }
                for limit in [1, 2, 3, 100] {
                    #expect(await scanAll(prefix: prefix, limit: limit) == expected, "prefix \(prefix) limit \(limit)")
                }
            }
            // A cursor outside the prefix range: before it starts at the prefix, after it is empty.
            #expect(await scanAll(prefix: b("user:"), limit: 2, from: .after(b("a"))) == [b("user:1"), b("user:10"), b("user:2")])
            #expect(await scanAll(prefix: b("user:"), limit: 2, from: .after(b("user:10"))) == [b("user:2")])
            #expect(await scanAll(prefix: b("user:"), limit: 2, from: .after(b("zzz"))) == [])
            // A cursor key that no longer exists still continues right after it.
            #expect(await scanAll(prefix: [], limit: 4, from: .after(b("user:15"))) == sorted.filter { !$0.lexicographicallyPrecedes(b("user:2")) })
            // Zero, negative and huge limits.
            #expect(await ns.scan(limit: 0).entries.count == 1)
            #expect(await ns.scan(limit: -5).entries.count == 1)
            let everything = await ns.scan(limit: Int.max)
            #expect(everything.entries.map(\.key) == sorted)
            #expect(everything.next == .start)
            // An exactly full last page ends the scan.
            let full = await ns.scan(prefix: b("user:"), limit: 3)
            #expect(full.entries.count == 3)
            #expect(full.next == .start)
        }
    }

    @Test("a second Store on the same directory fails with locked until the first is gone")
    func directoryLock() async throws {
        let dir = TemporaryDirectory("lock")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("x")
            try await ns.put(b("k"), b("v"))
            let error = storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }
            #expect(error?.code == .locked)
            #expect(error?.message.contains("\(getpid())") == true)
            #expect(error?.message.contains(dir.data) == true)
        }
        // Released with the first store: opening works again and sees the data.
        try await withStore(dir.data) { store in
            let opened = try await store.namespace("x")
            #expect(await opened.get(b("k")) == b("v"))
        }
    }

    @Test("a data directory writable by others is refused unless allowed")
    func unsafeDirectory() async throws {
        let dir = TemporaryDirectory("mode")
        defer { dir.remove() }
        #expect(mkdir(dir.data, 0o700) == 0)
        #expect(chmod(dir.data, 0o777) == 0)
        let error = storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }
        #expect(error?.code == .unsafeDirectory)
        #expect(error?.message.contains("777") == true)
        #expect(chmod(dir.data, 0o770) == 0)
        #expect(storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }?.code == .unsafeDirectory)
        try await withStore(dir.data, testOptions(allowShared: true)) { store in
            try await store.namespace("ok").put(b("k"), b("v"))
        }
        #expect(chmod(dir.data, 0o750) == 0)
        try await withStore(dir.data) { store in
            let opened = try await store.namespace("ok")
            #expect(await opened.get(b("k")) == b("v"))
        }
    }

    @Test("the data directory is created with mode 0700, even when nested")
    func directoryCreation() async throws {
        let dir = TemporaryDirectory("create")
        defer { dir.remove() }
        let nested = dir.path + "/a/b/c"
        try await withStore(nested) { store in try await store.namespace("n").put(b("k"), b("v")) }
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: nested)[.posixPermissions] as? NSNumber)
        #expect(mode.intValue & 0o077 == 0)
        #expect(fileExists(nested + "/n/000001.log"))
        #expect(fileExists(nested + "/.lock"))
    }

    @Test("after close, the store and its namespaces refuse writes but still serve reads")
    func closedStore() async throws {
        let dir = TemporaryDirectory("closed")
        defer { dir.remove() }
        let store = try await openStore(dir.data)
        let ns = try await store.namespace("c")
        try await ns.put(b("k"), b("v"))
        await store.close()
        #expect(await storeError { try await ns.put(b("k"), b("w")) }?.code == .closed)
        #expect(await ns.get(b("k")) == b("v"))
        #expect(await storeError { _ = try await store.namespace("c") }?.code == .closed)
    }

    @Test("many namespaces open concurrently, once each")
    func concurrentOpens() async throws {
        let dir = TemporaryDirectory("opens")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let opened = try await withThrowingTaskGroup(of: (Int, ObjectIdentifier).self) { group in
                for i in 0..<40 {
                    group.addTask { (i % 5, ObjectIdentifier(try await store.namespace("ns\(i % 5)"))) }
                }
                var ids: [Int: Set<ObjectIdentifier>] = [:]
                for try await (n, id) in group { ids[n, default: []].insert(id) }
                return ids
            }
            #expect(opened.count == 5)
            #expect(opened.values.allSatisfy { $0.count == 1 }, "one actor per namespace")
        }
    }

    @Test("a namespace kept after its store is dropped (not closed) keeps the directory locked; the lock goes with the last of them")
    func namespaceOutlivesItsStore() async throws {
        let dir = TemporaryDirectory("life")
        defer { dir.remove() }
        // Only the namespace leaves this closure: the Store object is freed without close().
        var ns: Namespace? = try await { () async throws -> Namespace in
            let store = try Store(directory: dir.data, options: testOptions(.always))
            return try await store.namespace("n")
        }()
        try await ns?.put(b("a"), b("1"))
        // A second store on the directory would append to the same log with the same sequence
        // numbers: it must be refused while the first store's namespace is in use.
        #expect(storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }?.code == .locked)
        try await ns?.put(b("b"), b("2"))
        ns = nil
        try await withStore(dir.data) { store in
            let reopened = try await store.namespace("n")
            #expect(await contents(reopened) == [b("a"): b("1"), b("b"): b("2")])
        }
    }
}
