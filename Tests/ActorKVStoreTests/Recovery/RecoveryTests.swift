import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// Recovery from hand-made namespace directories: which combinations of snapshot and log
/// segments open, and which are refused as corrupt.
@Suite("Recovery from hand-made files")
struct RecoveryTests {
    /// Creates `<data>/<ns>/` holding the given segments (number → records) and snapshot. The
    /// segments start with a ``LogSegmentHeader`` when `headers` is set, as this build writes
    /// them; without, they are in the headerless format 0 of earlier builds.
    static func layout(_ dir: TemporaryDirectory, _ ns: String = "n", segments: [UInt64: [LogRecord]],
                       snapshot: (lastSequence: UInt64, pairs: [([UInt8], [UInt8])])? = nil,
                       snapshotNamespace: String? = nil, headers: Bool = false) throws -> String {
        let nsDir = dir.data + "/" + ns
        try FileManager.default.createDirectory(atPath: nsDir, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        for (number, records) in segments {
            var bytes: [UInt8] = headers ? LogSegmentHeader.encoded : []
            for r in records { LogRecordCodec.encode(r, into: &bytes) }
            try writeFile(segmentPath(nsDir, number), bytes)
        }
        if let snapshot {
            var map = OrderedMap()
            // Entries' versions stay below the map's mark bit (an impossible sequence is the header's).
            for (k, v) in snapshot.pairs { map.updateValue(v, forKey: k, version: snapshot.lastSequence & (UInt64.max >> 1)) }
            try writeFile(nsDir + "/snapshot.json", SnapshotCodec.encode(map, header: SnapshotCodec.Header(
                namespace: snapshotNamespace ?? ns, lastSequence: snapshot.lastSequence, createdAt: 1)))
        }
        return nsDir
    }

    /// The path of segment `number` in `nsDir`.
    static func segmentPath(_ nsDir: String, _ number: UInt64) -> String {
        let digits = String(number)
        return nsDir + "/" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".log"
    }

    static func put(_ seq: UInt64, _ key: String, _ value: String) -> LogRecord {
        LogRecord(sequence: seq, mutations: [.put(key: b(key), value: b(value))])
    }

    @Test("segments replay in ascending order across files (with headers, and headerless as earlier builds wrote them)",
          arguments: [true, false])
    func segmentsInOrder(headers: Bool) async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        _ = try Self.layout(dir, segments: [
            3: [Self.put(5, "a", "5"), LogRecord(sequence: 6, mutations: [.delete(key: b("b"))])],
            1: [Self.put(1, "a", "1"), Self.put(2, "b", "2")],
            2: [Self.put(3, "a", "3"), Self.put(4, "c", "4")],
        ], headers: headers)
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
        let dir = TemporaryDirectory("rec")
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
        let dir = TemporaryDirectory("rec")
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

    @Test("sequence gaps and repeats are corruption, named by file and offset", arguments: Broken.allCases, [true, false])
    func brokenSequences(kind: Broken, headers: Bool) async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let start = headers ? LogSegmentHeader.length : 0
        let first = start + LogRecordCodec.encode(Self.put(1, "a", "1")).count
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
            (badFile, badOffset) = ("000002.log", start)
        case .gapAfterSnapshot:
            segments = [2: [Self.put(7, "a", "7")]]
            snapshot = (5, [(b("a"), b("5"))])
            (badFile, badOffset) = ("000002.log", start)
        case .zeroMutationKindInBody:
            // A checksum-valid record whose body does not parse (as only a bug could write).
            var body: [UInt8] = [2, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0]
            body += [0, 0, 0, 0]
            let n = UInt32(body.count)
            let lengthBytes: [UInt8] = [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), 0, 0]
            let crc = CRC32C.checksum(body, continuing: CRC32C.checksum(lengthBytes))
            let frame = lengthBytes + [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)] + body
            let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]], headers: headers)
            try appendFile(nsDir + "/000001.log", frame + LogRecordCodec.encode(Self.put(3, "a", "3")))
            segments = [:]
            (badFile, badOffset) = ("000001.log", first)
        }
        let nsDir = try Self.layout(dir, segments: segments, snapshot: snapshot, headers: headers)
        let before = try segmentFiles(nsDir).map { try readFile($0) }
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("n") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(nsDir + "/" + badFile), "\(error.message)")
            #expect(error.message.contains("byte offset \(badOffset)"), "\(error.message)")
        }
        #expect(try segmentFiles(nsDir).map { try readFile($0) } == before)
    }

    enum Gap: String, CaseIterable, Sendable {
        /// 000002.log (changes 3 and 4) gone between 000001.log and 000003.log; the snapshot covers it.
        case missingHistorySegment
        /// Two segments gone, none of their changes in a snapshot.
        case missingSegmentsAfterSnapshot
        /// The segment after the missing one holds no change (the active one after a compaction):
        /// the sequence numbers alone show no hole.
        case missingBeforeEmptySegment
        /// No segment number missing, but changes are (a history segment cut short).
        case missingChangesBetweenSegments
        /// A change missing inside a history segment.
        case missingChangeInHistory
    }

    @Test("a segment or changes missing between kept log segments are a gap: --check reports it, opening refuses it, nothing is changed",
          arguments: Gap.allCases)
    func gapBetweenSegments(kind: Gap) async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let (one, two) = (Self.put(1, "a", "1"), Self.put(2, "a", "2"))
        let snapshot = { (sequence: UInt64) in (sequence, [(b("a"), b(String(sequence)))]) }
        let nsDir = dir.data + "/n"
        let expected: [String]
        switch kind {
        case .missingHistorySegment:
            _ = try Self.layout(dir, segments: [1: [one, two], 3: [Self.put(5, "a", "5"), Self.put(6, "a", "6")], 4: [Self.put(7, "a", "7")]],
                                snapshot: snapshot(6), headers: true)
            expected = ["\(nsDir): the log has a gap between \(nsDir)/000001.log (its last change is sequence 2) and \(nsDir)/000003.log (its first is sequence 5): log segment 000002.log is missing, and changes 3 through 4 with it; the snapshot (through sequence 6) holds what the missing changes did, so the data is whole, but CHANGES … FROM cannot be served across the gap; the files were left untouched (restore what is missing, or, to give up the history before the gap, remove \(nsDir)/000001.log and the log segments before it)"]
        case .missingSegmentsAfterSnapshot:
            _ = try Self.layout(dir, segments: [1: [one, two], 4: [Self.put(7, "a", "7")]], headers: true)
            expected = ["log segments 000002.log through 000003.log are missing, and changes 3 through 6 with them; the snapshot reaches only sequence 0, so writes after it are missing; the files were left untouched (restore what is missing from a copy)"]
        case .missingBeforeEmptySegment:
            _ = try Self.layout(dir, segments: [1: [one, two], 3: []], snapshot: snapshot(4), headers: true)
            expected = ["(its last change is sequence 2) and \(nsDir)/000003.log (it holds no change): log segment 000002.log is missing; the segment after it holds no change, so how far the missing changes went is not known, and the snapshot reaches sequence 4: writes after it may be missing"]
        case .missingChangesBetweenSegments:
            _ = try Self.layout(dir, segments: [1: [one, two], 2: [Self.put(5, "a", "5"), Self.put(6, "a", "6")], 3: [Self.put(7, "a", "7")]],
                                snapshot: snapshot(6), headers: true)
            expected = ["changes 3 through 4 are missing (the end of one segment or the start of the next is gone); the snapshot (through sequence 6) holds what the missing changes did"]
        case .missingChangeInHistory:
            _ = try Self.layout(dir, segments: [1: [one, two, Self.put(4, "a", "4"), Self.put(5, "a", "5")], 2: [Self.put(6, "a", "6")]],
                                snapshot: snapshot(5), headers: true)
            let offset = LogSegmentHeader.length + LogRecordCodec.encode(one).count + LogRecordCodec.encode(two).count
            expected = ["\(nsDir)/000001.log is corrupt at byte offset \(offset): sequence gap: expected 3, found 4"]
        }
        let before = try Self.files(under: dir.data)
        let checked = try #require(try Store.check(directory: dir.data).first)
        #expect(checked.failure?.code == .corrupt, "\(checked.summary)")
        for text in expected { #expect(checked.summary.contains(text), "\(checked.summary)") }
        try await withStore(dir.data) { store in
            let error = await storeError { _ = try await store.namespace("n") }
            #expect(error == checked.failure, "opening refuses with the error the check reported")
        }
        #expect(try Self.files(under: dir.data) == before, "a file was changed")
        guard kind == .missingHistorySegment else { return }
        // The way out the message gives: without the history before the gap, the namespace opens whole.
        try FileManager.default.removeItem(atPath: Self.segmentPath(nsDir, 1))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("a")) == b("7"))
            #expect(await ns.currentStatistics().oldestSequence == 5)
        }
    }

    @Test("a first kept segment may be gone (compaction drops the oldest first), unless the snapshot needs it")
    func missingFirstSegment() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        // 000001.log (changes 1 and 2) dropped: the snapshot holds them, 000002.log goes on from it.
        _ = try Self.layout(dir, segments: [2: [Self.put(3, "a", "3"), Self.put(4, "a", "4")], 3: [Self.put(5, "a", "5")]],
                            snapshot: (4, [(b("a"), b("4"))]), headers: true)
        // The same with the snapshot through 2 only: changes 3 and 4, which it needs, are gone.
        _ = try Self.layout(dir, "behind", segments: [3: [Self.put(5, "a", "5")]], snapshot: (2, [(b("a"), b("2"))]), headers: true)
        let checked = try Store.check(directory: dir.data)
        #expect(checked.map(\.name) == ["behind", "n"])
        #expect(checked[1].isReadable && checked[1].lastSequence == 5, "\(checked[1].summary)")
        let behind = dir.data + "/behind/000003.log"
        #expect(checked[0].failure?.message == "\(behind) is corrupt at byte offset 8: sequence gap: expected 3, found 5; the file was left untouched")
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("a")) == b("5"))
            #expect(await storeError { _ = try await store.namespace("behind") } == checked[0].failure)
        }
    }

    @Test("a missing snapshot is named: a log that starts after the first change, with no snapshot, says snapshot.json is missing")
    func missingSnapshot() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        // Compacted through 10 (000001.log dropped), then snapshot.json removed by hand.
        let nsDir = try Self.layout(dir, segments: [2: [Self.put(11, "a", "11"), Self.put(12, "a", "12")]], headers: true)
        let checked = try Store.check(directory: dir.data)
        #expect(checked.first?.failure?.message == "\(nsDir)/000002.log is corrupt at byte offset 8: sequence gap: expected 1, found 11: the log starts at change 11, and snapshot.json, which would hold the changes before it, is missing (restore it, or the namespace, from a backup); the file was left untouched")
        // With the snapshot there but behind, the gap is the log's, and nothing is said of a missing one.
        _ = try Self.layout(dir, "behind", segments: [2: [Self.put(11, "a", "11")]], snapshot: (5, [(b("a"), b("5"))]), headers: true)
        #expect(try Store.check(directory: dir.data).first { $0.name == "behind" }?.failure?.message.contains("missing") == false)
    }

    @Test("a leftover snapshot.json.tmp is removed and ignored")
    func leftoverTemporarySnapshot() async throws {
        let dir = TemporaryDirectory("rec")
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
        let dir = TemporaryDirectory("rec")
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
        let dir = TemporaryDirectory("rec")
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

    @Test("a snapshot claiming an impossible last sequence number is refused (a write would overflow it)")
    func impossibleSnapshotSequence() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [2: []], snapshot: (UInt64.max, [(b("a"), b("1"))]))
        let before = try readFile(nsDir + "/snapshot.json")
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("n") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains("impossible lastSequence"), "\(error)")
        }
        #expect(try readFile(nsDir + "/snapshot.json") == before)
    }

    @Test("log file names this build does not write (extra leading zeros, numbers past the limit) are not segments")
    func foreignSegmentNames() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]], headers: true)
        try writeFile(nsDir + "/0000002.log", b("not ours"))
        try writeFile(nsDir + "/18446744073709551615.log", LogSegmentHeader.encoded)
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("a")) == b("1"))
            try await ns.put(b("b"), b("2"))
            try await ns.compact()  // the next segment is 000002.log, whatever else lies there
            #expect(await ns.get(b("b")) == b("2"))
        }
        #expect(try readFile(nsDir + "/0000002.log") == b("not ours"))
        #expect(try readFile(nsDir + "/18446744073709551615.log") == LogSegmentHeader.encoded)
        try await withStore(dir.data) { store in
            expectSameContents(await contents(try await store.namespace("n")), [b("a"): b("1"), b("b"): b("2")])
        }
    }

    // MARK: - The segment header

    @Test("every segment this build starts opens with its header: the first one and the one compaction starts")
    func segmentsStartWithTheHeader() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = dir.data + "/n"
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            try await ns.put(b("a"), b("1"))
            let first = try readFile(Self.segmentPath(nsDir, 1))
            #expect(first.starts(with: LogSegmentHeader.encoded))
            #expect(records(in: first).records.map(\.offset) == [LogSegmentHeader.length])
            try await ns.compact()
            try await ns.compact()
            #expect(segmentFiles(nsDir) == [Self.segmentPath(nsDir, 2)], "a segment holding only its header is not rotated away")
            try await ns.put(b("b"), b("2"))
        }
        let second = try readFile(Self.segmentPath(nsDir, 2))
        #expect(second.starts(with: LogSegmentHeader.encoded))
        let scanned = records(in: second)
        #expect(scanned.records.map(\.record.sequence) == [2])
        #expect(scanned.records.first?.offset == LogSegmentHeader.length)
    }

    @Test("a namespace written in log format 1 (Tests/Fixtures/log-v1) opens whole; records appended to its segment carry the end mark; after a compaction the new segment is format 2")
    func formatOneLogFixtureOpens() async throws {
        let dir = TemporaryDirectory("rec-v1")
        defer { dir.remove() }
        try copyFixture("log-v1", namespace: "config", into: dir.data)
        let segment = dir.data + "/config/000001.log"
        let original = try readFile(segment)
        #expect(original.starts(with: LogSegmentHeader.magic + [1, 0]), "a format-1 header")
        // Its records end as format 1 wrote them: the lifetime's record in zeros.
        let written = records(in: original)
        #expect(written.records.map(\.record.sequence) == Array(1...7))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("config")
            #expect(await ns.versioned(b("theme")) == VersionedValue(value: b("light"), version: 5))
            #expect(await ns.versioned(b("session:1")) == VersionedValue(value: b("tok"), version: 2))
            #expect(await ns.timeToLive(b("session:1")) > 0, "its deadline, 100 years away, is kept")
            #expect(await ns.versioned(b("hits")) == VersionedValue(value: b("41"), version: 3))
            #expect(await ns.versioned(b("b")) == VersionedValue(value: b("2"), version: 4))
            #expect(await ns.get(b("a")) == nil)
            #expect(await ns.versioned(b("blob")) == VersionedValue(value: [0, 0xFF, 0], version: 7))
            #expect(await ns.count() == 5)
            #expect(try await ns.increment(b("hits")) == 42)
        }
        let appended = try readFile(segment)
        #expect(appended.starts(with: original), "the format-1 records are left as they were")
        let tail = records(in: Array(appended[original.count...]))
        #expect(tail.records.map(\.record.sequence) == [8])
        if let last = tail.records.last {
            let start = original.count + last.offset
            let end = start + LogRecordCodec.headerLength + Int(appended[start]) + Int(appended[start + 1]) << 8
            #expect(appended[end - 1] == LogRecordCodec.endMark, "the appended record ends with the mark")
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("config")
            #expect(await ns.versioned(b("hits")) == VersionedValue(value: b("42"), version: 8))
            try await ns.compact()
            try await ns.put(b("after"), b("compaction"))
        }
        let newest = segmentFiles(dir.data + "/config").last!
        #expect(try readFile(newest).starts(with: LogSegmentHeader.magic + [2, 0]), "a new segment is format 2")
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("config")
            #expect(await ns.get(b("after")) == b("compaction"))
            #expect(await ns.versioned(b("theme")) == VersionedValue(value: b("light"), version: 5))
            #expect(await ns.count() == 6)
        }
    }

    @Test("a segment of an unknown format version is refused, named by file and offset, and left alone; other namespaces open")
    func unknownVersion() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")], 2: [Self.put(2, "a", "2")]], headers: true)
        _ = try Self.layout(dir, "other", segments: [1: [Self.put(1, "z", "9")]], headers: true)
        var newer = try readFile(Self.segmentPath(nsDir, 2))
        newer[LogSegmentHeader.magic.count] = UInt8(LogSegmentHeader.currentVersion + 1)
        try writeFile(Self.segmentPath(nsDir, 2), newer)
        let before = try segmentFiles(nsDir).map { try readFile($0) }
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("n") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(Self.segmentPath(nsDir, 2)), "\(error.message)")
            #expect(error.message.contains("byte offset 6"), "\(error.message)")
            #expect(error.message.contains("unknown log format version \(LogSegmentHeader.currentVersion + 1)"), "\(error.message)")
            let other = try await store.namespace("other")
            #expect(await other.get(b("z")) == b("9"))
        }
        #expect(try segmentFiles(nsDir).map { try readFile($0) } == before)
    }

    @Test("a torn header in the last segment is cut; the records before it open, and new ones go after a whole header",
          arguments: [1, 4, 7])
    func tornHeaderInLastSegment(kept: Int) async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1"), Self.put(2, "b", "2")]], headers: true)
        try writeFile(Self.segmentPath(nsDir, 2), Array(LogSegmentHeader.encoded.prefix(kept)))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("a"): b("1"), b("b"): b("2")])
            #expect(await ns.currentStatistics().tornBytesCut == kept)
            let rewritten = try readFile(Self.segmentPath(nsDir, 2))
            #expect(rewritten == LogSegmentHeader.encoded)
            try await ns.put(b("c"), b("3"))
        }
        let second = try readFile(Self.segmentPath(nsDir, 2))
        #expect(records(in: second).records.map(\.record.sequence) == [3])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("c")) == b("3"))
        }
    }

    @Test("a torn header in a segment that is not the last is corruption")
    func tornHeaderInOlderSegment() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [2: [Self.put(1, "a", "1")]], headers: true)
        try writeFile(Self.segmentPath(nsDir, 1), Array(LogSegmentHeader.encoded.prefix(5)))
        let before = try segmentFiles(nsDir).map { try readFile($0) }
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("n") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(Self.segmentPath(nsDir, 1) + " is corrupt at byte offset 0"), "\(error.message)")
            #expect(error.message.contains("incomplete header or record"), "\(error.message)")
        }
        #expect(try segmentFiles(nsDir).map { try readFile($0) } == before)
    }

    @Test("an empty last segment (a crash before its header reached the disk) gets a header before new records",
          arguments: [0, 4096])
    func emptyLastSegment(zeros: Int) async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]], headers: true)
        try writeFile(Self.segmentPath(nsDir, 2), [UInt8](repeating: 0, count: zeros))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("a")) == b("1"))
            try await ns.put(b("b"), b("2"))
        }
        let second = try readFile(Self.segmentPath(nsDir, 2))
        #expect(second.starts(with: LogSegmentHeader.encoded))
        #expect(records(in: second).records.map(\.record.sequence) == [2])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("b")) == b("2"))
        }
    }

    @Test("an empty last segment on a full disk: the namespace opens for reads, a write fails cleanly, and once there is space the header goes before the first record")
    func emptyLastSegmentOnAFullDisk() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]], headers: true)
        try writeFile(Self.segmentPath(nsDir, 2), [])
        let faults = FaultInjector()
        var options = testOptions(faults: faults)
        let logged = LoggedLines()
        options.log = { line in logged.append(line) }
        // The header's write at opening and the one before the first write find no space.
        faults.failSyscall(.write, pathContains: Self.segmentPath(nsDir, 2), errno: ENOSPC, count: 2)
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("n")
            #expect(await ns.get(b("a")) == b("1"), "the data is all in the files read")
            #expect(logged.lines.contains { $0.hasPrefix("namespace n: could not write the header of the empty log segment \(Self.segmentPath(nsDir, 2))") }, "\(logged.lines)")
            let refused = await storeError { try await ns.put(b("b"), b("2")) }
            #expect(refused?.code == .io, "\(String(describing: refused))")
            #expect(await ns.get(b("b")) == nil)
            try await ns.put(b("b"), b("2"))   // space again
            #expect(await ns.get(b("b")) == b("2"))
        }
        let second = try readFile(Self.segmentPath(nsDir, 2))
        #expect(second.starts(with: LogSegmentHeader.encoded))
        #expect(records(in: second).records.map(\.record.sequence) == [2])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("a"): b("1"), b("b"): b("2")])
        }
    }

    @Test("a headerless segment (format 0, from an earlier build) is appended to as it is and reads back")
    func headerlessSegmentKeepsItsFormat() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let nsDir = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]])
        try await withStore(dir.data) { store in
            try await store.namespace("n").put(b("b"), b("2"))
        }
        let bytes = try readFile(Self.segmentPath(nsDir, 1))
        #expect(!bytes.starts(with: LogSegmentHeader.magic))
        #expect(records(in: bytes).records.map(\.offset).first == 0)
        #expect(records(in: bytes).records.map(\.record.sequence) == [1, 2])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            expectSameContents(await contents(ns), [b("a"): b("1"), b("b"): b("2")])
        }
    }

    // MARK: - Offline check

    /// Every file under `directory` but the lock file, with its bytes.
    static func files(under directory: String) throws -> [String: [UInt8]] {
        var all: [String: [UInt8]] = [:]
        for path in try FileManager.default.subpathsOfDirectory(atPath: directory) where path != ".lock" {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                all[path] = try readFile(directory + "/" + path)
            }
        }
        return all
    }

    @Test("check reads every namespace as opening would, changes no file, and says what opening will do")
    func checkPredictsOpening() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        let two = [Self.put(1, "a", "1"), Self.put(2, "b", "2")]
        _ = try Self.layout(dir, "good", segments: [2: [Self.put(8, "c", "8")]], snapshot: (7, [(b("a"), b("1"))]), headers: true)
        let tornDir = try Self.layout(dir, "torn", segments: [1: two], headers: true)
        let badDir = try Self.layout(dir, "bad", segments: [1: two], headers: true)
        let leftoverDir = try Self.layout(dir, "leftover", segments: [1: two])
        let tornPath = Self.segmentPath(tornDir, 1), badPath = Self.segmentPath(badDir, 1)
        let whole = try readFile(tornPath).count
        // Cut after the first byte of the sequence number (3): the torn bytes end in a nonzero one.
        try appendFile(tornPath, Array(LogRecordCodec.encode(Self.put(3, "c", "3")).prefix(9)))
        var bad = try readFile(badPath)
        bad[LogSegmentHeader.length + 12] ^= 0x01
        try writeFile(badPath, bad)
        try writeFile(leftoverDir + "/snapshot.json.tmp", b("{\"format\""))
        let before = try Self.files(under: dir.data)

        let results = try Store.check(directory: dir.data)
        #expect(try Self.files(under: dir.data) == before, "the check changed a file")
        #expect(results.map(\.name) == ["bad", "good", "leftover", "torn"])
        let byName = Dictionary(uniqueKeysWithValues: results.map { ($0.name, $0) })
        let good = try #require(byName["good"]), torn = try #require(byName["torn"])
        let broken = try #require(byName["bad"]), leftover = try #require(byName["leftover"])
        #expect(good.isReadable && good.keys == 2 && good.lastSequence == 8 && good.snapshotSequence == 7 && good.recordsReplayed == 1)
        #expect(good.tornTail == nil && !good.temporarySnapshotLeft)
        #expect(torn.isReadable && torn.keys == 2)
        #expect(torn.tornTail?.path == tornPath && torn.tornTail?.offset == whole && torn.tornTail?.bytes == 9)
        #expect(torn.summary.contains("a torn tail of 9 bytes at offset \(whole) of \(tornPath) would be cut"))
        #expect(broken.failure?.code == .corrupt)
        #expect(broken.failure?.message.contains(badPath + " is corrupt at byte offset 8") == true, "\(broken.summary)")
        #expect(broken.summary.hasPrefix("namespace bad: UNAVAILABLE: "))
        #expect(leftover.isReadable && leftover.temporarySnapshotLeft)

        // Opening then does what the check said, and refuses with the same error.
        try await withStore(dir.data) { store in
            let opened = try await store.namespace("torn")
            #expect(await opened.currentStatistics().tornBytesCut == 9)
            #expect(fileSize(tornPath) == whole)
            let error = await storeError { _ = try await store.namespace("bad") }
            #expect(error == broken.failure)
            _ = try await store.namespace("leftover")
            #expect(!fileExists(leftoverDir + "/snapshot.json.tmp"))
        }
    }

    /// The error `Store.check` throws for `directory`, or nil.
    static func checkError(_ directory: String) -> StoreError? {
        do {
            _ = try Store.check(directory: directory)
            return nil
        } catch {
            return error
        }
    }

    @Test("check refuses a directory a store holds, and a missing one, and creates nothing")
    func checkNeedsAFreeExistingDirectory() async throws {
        let dir = TemporaryDirectory("rec")
        defer { dir.remove() }
        _ = try Self.layout(dir, segments: [1: [Self.put(1, "a", "1")]], headers: true)
        try await withStore(dir.data) { _ in
            #expect(Self.checkError(dir.data)?.code == .locked)
        }
        #expect(try Store.check(directory: dir.data).map(\.isReadable) == [true])
        let missing = dir.path + "/none"
        let error = Self.checkError(missing)
        #expect(error?.code == .io && error?.message.contains("no data directory at \(missing)") == true)
        #expect(!fileExists(missing))
    }
}
