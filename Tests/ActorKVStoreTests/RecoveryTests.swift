import ActorKVStore
import Foundation
import Testing

/// Recovery from hand-made namespace directories: which combinations of snapshot and log
/// segments open, and which are refused as corrupt.
@Suite("Recovery from hand-made files")
struct RecoveryTests {
    /// Creates `<data>/<ns>/` holding the given segments (number → records) and snapshot.
    static func layout(_ dir: TempDir, _ ns: String = "n", segments: [UInt64: [LogRecord]],
                       snapshot: (lastSequence: UInt64, pairs: [([UInt8], [UInt8])])? = nil,
                       snapshotNamespace: String? = nil) throws -> String {
        let nsDir = dir.data + "/" + ns
        try FileManager.default.createDirectory(atPath: nsDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        for (number, records) in segments {
            var bytes: [UInt8] = []
            for r in records { LogRecordCodec.encode(r, into: &bytes) }
            let digits = String(number)
            try writeFile(nsDir + "/" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".log", bytes)
        }
        if let snapshot {
            var map = OrderedMap()
            for (k, v) in snapshot.pairs { map.updateValue(v, forKey: k) }
            try writeFile(nsDir + "/snapshot.json", SnapshotCodec.encode(map, header: SnapshotCodec.Header(
                namespace: snapshotNamespace ?? ns, lastSequence: snapshot.lastSequence, createdAt: 1)))
        }
        return nsDir
    }

    static func put(_ seq: UInt64, _ key: String, _ value: String) -> LogRecord {
        LogRecord(sequence: seq, mutations: [.put(key: b(key), value: b(value))])
    }

    @Test("segments replay in ascending order across files")
    func segmentsInOrder() async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        _ = try Self.layout(dir, segments: [
            3: [Self.put(5, "a", "5"), LogRecord(sequence: 6, mutations: [.delete(key: b("b"))])],
            1: [Self.put(1, "a", "1"), Self.put(2, "b", "2")],
            2: [Self.put(3, "a", "3"), Self.put(4, "c", "4")],
        ])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("a"): b("5"), b("c"): b("4")])
            let stats = await ns.currentStatistics()
            #expect(stats.recordsReplayed == 6)
            #expect(stats.lastSequence == 6)
            try await ns.put(b("d"), b("7"))
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("d")) == b("7"))
            #expect(await ns.currentStatistics().lastSequence == 7)
        }
    }

    @Test("a snapshot plus segments it already covers (a crash before the log was dropped) replays only newer records")
    func snapshotOverlapsLog() async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        _ = try Self.layout(dir, segments: [
            1: [Self.put(1, "a", "1"), Self.put(2, "b", "2"), Self.put(3, "a", "3")],
            2: [Self.put(4, "c", "4"), Self.put(5, "a", "5")],
        ], snapshot: (3, [(b("a"), b("3")), (b("b"), b("2"))]))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("a"): b("5"), b("b"): b("2"), b("c"): b("4")])
            let stats = await ns.currentStatistics()
            #expect(stats.recordsReplayed == 2)
            #expect(stats.snapshotSequence == 3)
            #expect(stats.lastSequence == 5)
        }
    }

    @Test("a snapshot with an empty active segment (a crash right after compaction) opens")
    func snapshotAndEmptySegment() async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        _ = try Self.layout(dir, segments: [4: []], snapshot: (9, [(b("x"), [0xFF, 0x00])]))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("x"): [0xFF, 0x00]])
            #expect(await ns.currentStatistics().lastSequence == 9)
            try await ns.put(b("y"), b("10"))
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("y")) == b("10"))
            #expect(await ns.currentStatistics().lastSequence == 10)
        }
    }

    enum Broken: String, CaseIterable, Sendable {
        case gap, repeatedSequence, decreasingAcrossSegments, gapAfterSnapshot, zeroMutationKindInBody
    }

    @Test("sequence gaps and repeats are corruption, named by file and offset", arguments: Broken.allCases)
    func brokenSequences(kind: Broken) async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        let first = LogRecordCodec.encode(Self.put(1, "a", "1")).count
        var snapshot: (lastSequence: UInt64, pairs: [([UInt8], [UInt8])])?
        let segments: [UInt64: [LogRecord]]
        let badFile: String
        let badOffset: Int
        switch kind {
        case .gap:
            segments = [1: [Self.put(1, "a", "1"), Self.put(3, "a", "3")]]
            (badFile, badOffset) = ("000001.log", first)
        case .repeatedSequence:
            segments = [1: [Self.put(1, "a", "1"), Self.put(1, "a", "1")]]
            (badFile, badOffset) = ("000001.log", first)
        case .decreasingAcrossSegments:
            segments = [1: [Self.put(1, "a", "1"), Self.put(2, "a", "2")], 2: [Self.put(1, "a", "9")]]
            (badFile, badOffset) = ("000002.log", 0)
        case .gapAfterSnapshot:
            segments = [2: [Self.put(7, "a", "7")]]
            snapshot = (5, [(b("a"), b("5"))])
            (badFile, badOffset) = ("000002.log", 0)
        case .zeroMutationKindInBody:
            // A checksum-valid record whose body does not parse (as only a bug could write).
            var body: [UInt8] = [2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
            body += [0, 0, 0, 0]
            let n = UInt32(body.count)
            let lengthBytes: [UInt8] = [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), 0, 0]
            let crc = CRC32C.checksum(body, continuing: CRC32C.checksum(lengthBytes))
            let frame = lengthBytes + [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)] + body
            let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]])
            try appendFile(nsDir + "/000001.log", frame + LogRecordCodec.encode(Self.put(3, "a", "3")))
            segments = [:]
            (badFile, badOffset) = ("000001.log", first)
        }
        let nsDir = try Self.layout(dir, segments: segments, snapshot: snapshot)
        let before = try segmentFiles(nsDir).map { try readFile($0) }
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("n") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(nsDir + "/" + badFile), "\(error.message)")
            #expect(error.message.contains("byte offset \(badOffset)"), "\(error.message)")
        }
        #expect(try segmentFiles(nsDir).map { try readFile($0) } == before)
    }

    @Test("a leftover snapshot.json.tmp is removed and ignored")
    func leftoverTemporarySnapshot() async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]])
        try writeFile(nsDir + "/snapshot.json.tmp", b("{\"format\":\"actorkv-snapshot\",\"vers"))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("a"): b("1")])
        }
        #expect(!fileExists(nsDir + "/snapshot.json.tmp"))
    }

    @Test("a snapshot of another namespace is refused")
    func snapshotOfAnotherNamespace() async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [2: []], snapshot: (1, [(b("a"), b("1"))]), snapshotNamespace: "other")
        let before = try readFile(nsDir + "/snapshot.json")
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("n") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(nsDir + "/snapshot.json"))
            #expect(error.message.contains("'other'"))
        }
        #expect(try readFile(nsDir + "/snapshot.json") == before)
    }

    @Test("files that are not namespaces or segments are ignored")
    func strayFiles() async throws {
        let dir = TempDir("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]])
        try writeFile(nsDir + "/notes.txt", b("hello"))
        try writeFile(nsDir + "/x.log.bak", b("junk"))
        try writeFile(dir.data + "/README", b("not a namespace"))
        try FileManager.default.createDirectory(atPath: dir.data + "/.hidden", withIntermediateDirectories: true)
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["n"])
            #expect(await store.openAll().isEmpty)
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("a")) == b("1"))
        }
    }
}
