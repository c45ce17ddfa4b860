import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Compaction, corruption refusal, torn tails, fault injection and group commit.
///
/// Each test that injects faults gives its store a ``FaultInjector`` of its own, so the tests can
/// run in parallel with each other and with every other suite.
@Suite("Durability, corruption and fault injection")
struct DurabilityTests {
    /// Writes `count` keys `prefix<i>` = `value-<i>` and returns the model.
    static func fill(_ ns: Namespace, _ prefix: String, _ count: Int, into model: inout [[UInt8]: [UInt8]]) async throws {
        for i in 0..<count {
            let key = b("\(prefix)\(i)"), value = b("value-\(prefix)\(i)")
            try await ns.put(key, value)
            model[key] = value
        }
    }

    // MARK: - Compaction

    @Test("reopen after compaction: snapshot plus replay of later writes")
    func compactAndReopen() async throws {
        let dir = TemporaryDirectory("compact")
        defer { dir.remove() }
        let nsDir = dir.data + "/c"
        var model: [[UInt8]: [UInt8]] = [:]
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            try await Self.fill(ns, "k", 100, into: &model)
            try await ns.put([0xFF, 0x00], [0xC0, 0x80])  // binary, through the snapshot's base64
            model[[0xFF, 0x00]] = [0xC0, 0x80]
            try await ns.compact()
            let stats = await ns.currentStatistics()
            #expect(stats.snapshotSequence == 101)
            #expect(stats.compactions == 1)
            #expect(stats.logBytes == LogSegmentHeader.length, "the new segment holds its header and no records")
            #expect(fileExists(nsDir + "/snapshot.json"))
            #expect(!fileExists(nsDir + "/snapshot.json.tmp"))
            #expect(segmentFiles(nsDir) == [nsDir + "/000002.log"])
            // Later writes go to the log only.
            for i in 0..<10 {
                try await ns.put(b("k\(i)"), b("new-\(i)"))
                model[b("k\(i)")] = b("new-\(i)")
            }
            try await ns.delete((10..<20).map { b("k\($0)") })
            for i in 10..<20 { model[b("k\(i)")] = nil }
            try await ns.apply([.put(key: b("batch"), value: b("1")), .delete(key: b("k99"))])
            model[b("batch")] = b("1")
            model[b("k99")] = nil
            expectSameContents(await contents(ns), model)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            let found = await contents(ns)
            expectSameContents(found, model)
            let stats = await ns.currentStatistics()
            #expect(stats.snapshotSequence == 101)
            #expect(stats.recordsReplayed == 12)
            #expect(stats.lastSequence == 113)
            try await ns.compact()
            try await ns.compact()  // nothing new: still fine
            #expect(segmentFiles(nsDir).count == 1)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("c")
            expectSameContents(await contents(ns), model)
            #expect(await ns.currentStatistics().recordsReplayed == 0)
            #expect(await ns.currentStatistics().snapshotSequence == 113)
            // The snapshot is a valid document for this namespace.
            let (header, map) = try SnapshotCodec.decode(try readFile(nsDir + "/snapshot.json"))
            #expect(header.namespace == "c")
            #expect(header.lastSequence == 113)
            #expect(map.count == model.count)
        }
    }

    /// Options whose `--compact-ratio` (2, at least 1 KiB) a few writes outgrow, with `faults`.
    static func ratioOptions(_ faults: FaultInjector) -> StoreOptions {
        var options = testOptions(faults: faults)
        options.compaction = CompactionPolicy(logToLiveRatio: 2, minimumLogBytes: 1024, interval: 0)
        return options
    }

    /// Starts a compaction of `ns` and holds it at its snapshot's rename (the gate returned)
    /// while one key is rewritten 40 times, so that the log outgrows twice the live data (and
    /// 1 KiB) many times over; returns the gate, still closed, and the compaction.
    static func outgrowRatioDuringCompaction(_ ns: Namespace, _ faults: FaultInjector) async throws -> (FailpointGate, Task<Void, any Error>) {
        try await ns.put(b("k"), b("v0"))
        let gate = FailpointGate()
        faults.arm(failpoint: "compaction.afterRename", .hold(gate))
        let compaction = Task { try await ns.compact() }
        #expect(try await eventually { gate.reached }, "the compaction reached its snapshot's rename")
        for i in 1...40 { try await ns.put(b("k"), b("v\(i)-" + String(repeating: "x", count: 60))) }
        return (gate, compaction)
    }

    @Test("writes that outgrow --compact-ratio while a compaction runs start another when it ends, with no write after them")
    func compactionAfterCompactionWhenDue() async throws {
        let dir = TemporaryDirectory("compact-again")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, Self.ratioOptions(faults)) { store in
            let ns = try await store.namespace("r")
            let (gate, first) = try await Self.outgrowRatioDuringCompaction(ns, faults)
            let grown = await ns.currentStatistics()
            #expect(grown.compactions == 0 && grown.logBytes > 1024 && grown.logBytes > 2 * grown.liveBytes, "\(grown)")
            gate.open()
            try await first.value
            let again = try await Self.eventually { await ns.currentStatistics().compactions >= 2 }
            let after = await ns.currentStatistics()
            #expect(again, "a second compaction, with no write to start it: \(after)")
            #expect(after.snapshotSequence == 41 && after.logBytes < 1024, "\(after)")
        }
    }

    @Test("closing while a compaction runs that ends past --compact-ratio starts no other: no failed compaction is logged")
    func noCompactionAfterCloseBegan() async throws {
        let dir = TemporaryDirectory("compact-close")
        defer { dir.remove() }
        let faults = FaultInjector()
        var options = Self.ratioOptions(faults)
        let logged = LoggedLines()
        options.log = { line in logged.append(line) }
        let store = try await openStore(dir.data, options)
        let ns = try await store.namespace("c")
        let (gate, compaction) = try await Self.outgrowRatioDuringCompaction(ns, faults)
        let closing = Task { await ns.close() }
        let closingBegan = try await Self.eventually {
            do { try await ns.put(b("late"), b("x")) } catch let error as StoreError { return error.code == .closed } catch { return false }
            return false
        }
        #expect(closingBegan, "writes are refused: closing began")
        gate.open()
        try await compaction.value
        #expect(await closing.value == nil)
        await store.close()
        #expect(!logged.lines.contains { $0.contains("compaction failed") }, "\(logged.lines)")
        let statistics = await ns.currentStatistics()
        #expect(statistics.compactions == 1 && statistics.ioErrors == 0, "\(statistics)")
    }

    @Test("compactions running while writers write lose nothing")
    func compactionDuringWrites() async throws {
        let dir = TemporaryDirectory("compactw")
        defer { dir.remove() }
        // Small thresholds: writes trigger compactions by themselves too.
        var options = testOptions()
        options.compaction = CompactionPolicy(logToLiveRatio: 1, minimumLogBytes: 4096, interval: 0)
        let writers = 4, perWriter = 60
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("w")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<writers {
                    group.addTask {
                        for i in 0..<perWriter {
                            try await ns.put(b("w\(w)-\(i % 20)"), b("v\(i)-\(String(repeating: "x", count: 50))"))
                            if i % 15 == 0 { try await ns.delete([b("w\(w)-\((i + 5) % 20)")]) }
                        }
                    }
                }
                group.addTask {
                    for _ in 0..<3 {
                        try await ns.compact()
                        await Task.yield()
                    }
                }
                try await group.waitForAll()
            }
            #expect(await ns.currentStatistics().compactions >= 3)
        }
        var model: [[UInt8]: [UInt8]] = [:]
        for w in 0..<writers {
            for i in 0..<perWriter {
                model[b("w\(w)-\(i % 20)")] = b("v\(i)-\(String(repeating: "x", count: 50))")
                if i % 15 == 0 { model[b("w\(w)-\((i + 5) % 20)")] = nil }
            }
        }
        try await withStore(dir.data) { store in
            let found = await contents(try await store.namespace("w"))
            expectSameContents(found, model)
        }
    }

    // MARK: - Corruption refusal

    @Test("a damaged middle log record: the namespace refuses to open, names file and offset, and the file is untouched",
          arguments: ["body", "length past the end"])
    func corruptLogRecord(damage: String) async throws {
        let dir = TemporaryDirectory("corruptlog")
        defer { dir.remove() }
        let log = dir.data + "/bad/000001.log"
        var goodModel: [[UInt8]: [UInt8]] = [:]
        try await withStore(dir.data) { store in
            var model: [[UInt8]: [UInt8]] = [:]
            try await Self.fill(try await store.namespace("bad"), "k", 5, into: &model)
            try await Self.fill(try await store.namespace("good"), "g", 3, into: &goodModel)
        }
        var bytes = try readFile(log)
        let (found, end) = records(in: bytes)
        try #require(found.count == 5 && (end == .clean || end == .unused(validLength: found[4].offset + LogRecordCodec.encode(found[4].record).count)))
        let middle = found[2].offset
        if damage == "body" {
            bytes[middle + 8 + (found[3].offset - middle - 8) / 2] ^= 0x40
        } else {
            bytes[middle + 2] ^= 0x10  // the length field claims 1 MiB more: past the end of the file
        }
        try writeFile(log, bytes)

        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("bad") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(log), "\(error.message)")
            #expect(error.message.contains("byte offset \(middle)"), "\(error.message)")
            #expect(try readFile(log) == bytes, "recovery must not touch a corrupt log")
            // Stays unavailable: every later call gets the same error, so no write can land.
            #expect(await storeError { _ = try await store.namespace("bad") } == error)
            #expect(await storeError { _ = try await store.existingNamespace("bad") } == error)
            #expect(await store.unavailability(of: "bad") == error)
            // Other namespaces work.
            let good = try await store.namespace("good")
            expectSameContents(await contents(good), goodModel)
            try await good.put(b("more"), b("x"))
            #expect(await good.get(b("more")) == b("x"))
            let failures = await store.openAll()
            #expect(failures.keys.sorted() == ["bad"])
        }
        #expect(try readFile(log) == bytes)
        // A fresh store refuses it again.
        try await withStore(dir.data) { store in
            #expect(await storeError { _ = try await store.namespace("bad") }?.code == .corrupt)
        }
        #expect(try readFile(log) == bytes)
    }

    enum SnapshotDamage: String, CaseIterable, Sendable {
        case flippedByteInValue, truncated, emptyFile, unknownVersion, wrongNamespace, notJSON
    }

    @Test("a damaged snapshot: the namespace refuses to open and the snapshot and log stay unchanged",
          arguments: SnapshotDamage.allCases)
    func corruptSnapshot(damage: SnapshotDamage) async throws {
        let dir = TemporaryDirectory("corruptsnap")
        defer { dir.remove() }
        let nsDir = dir.data + "/s"
        let snapshot = nsDir + "/snapshot.json"
        try await withStore(dir.data) { store in
            var model: [[UInt8]: [UInt8]] = [:]
            let ns = try await store.namespace("s")
            try await Self.fill(ns, "k", 20, into: &model)
            try await ns.compact()
            try await Self.fill(ns, "later", 3, into: &model)
            try await store.namespace("other").put(b("x"), b("y"))
        }
        let original = try readFile(snapshot)
        var damaged = original
        var expectedOffset: Int?
        switch damage {
        case .flippedByteInValue:
            let at = try #require(original.firstRange(of: b("value-k13"))).lowerBound + 3
            damaged[at] ^= 0x01
        case .truncated:
            damaged = Array(original[..<(original.count / 2)])
        case .emptyFile:
            damaged = []
        case .unknownVersion:
            let range = try #require(original.firstRange(of: b("\"version\":3")))
            damaged[range.upperBound - 1] = UInt8(ascii: "7")
            damaged = SnapshotCodecTests.resealed(damaged)
            expectedOffset = range.upperBound - 1
        case .wrongNamespace:
            let (header, map) = try SnapshotCodec.decode(original)
            damaged = SnapshotCodec.encode(map, header: SnapshotCodec.Header(
                namespace: "other", lastSequence: header.lastSequence, createdAt: header.createdAt))
        case .notJSON:
            damaged = b("PK\u{3}\u{4} this is not a snapshot")
        }
        try writeFile(snapshot, damaged)
        let logs = try segmentFiles(nsDir).map { try readFile($0) }

        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("s") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(snapshot), "\(error.message)")
            #expect(error.message.contains("byte offset"), "\(error.message)")
            if let expectedOffset { #expect(error.message.contains("byte offset \(expectedOffset):"), "\(error.message)") }
            if damage == .wrongNamespace { #expect(error.message.contains("other")) }
            let opened = try await store.namespace("other")
            #expect(await opened.get(b("x")) == b("y"))
        }
        #expect(try readFile(snapshot) == damaged, "the snapshot must be left as it was")
        #expect(try segmentFiles(nsDir).map { try readFile($0) } == logs, "the log must be left as it was")
        // Restoring the original snapshot makes the namespace open again with everything.
        try writeFile(snapshot, original)
        try await withStore(dir.data) { store in
            let opened = try await store.namespace("s")
            #expect(await opened.count() == 23)
        }
    }

    @Test("a torn tail on the last segment is cut; data before it is intact",
          arguments: ["half record", "zero fill", "unfilled blocks"], [LogReservation.off, .standard(for: .always)])
    func tornTail(kind: String, reservation: LogReservation) async throws {
        let dir = TemporaryDirectory("torn")
        defer { dir.remove() }
        let log = dir.data + "/t/000001.log"
        var model: [[UInt8]: [UInt8]] = [:]
        var options = testOptions()
        options.reservation = reservation
        try await withStore(dir.data, options) { store in
            try await Self.fill(try await store.namespace("t"), "k", 3, into: &model)
        }
        let size = logLength(log)
        let reserved = fileSize(log) > size
        #expect(reserved == (reservation != .off))
        let tail: [UInt8]
        if kind == "half record" {
            let next = LogRecordCodec.encode(LogRecord(sequence: 4, mutations: [.put(key: b("torn"), value: b("never acknowledged"))]))
            tail = Array(next[..<(next.count / 2)])
        } else if kind == "zero fill" {
            tail = [UInt8](repeating: 0, count: 4096)
        } else {
            // Two records whose bytes reached the disk only up to the middle of the first one.
            var lastWrite: [UInt8] = []
            LogRecordCodec.encode(LogRecord(sequence: 4, mutations: [.put(key: b("lost1"), value: [UInt8](repeating: 7, count: 100))]), into: &lastWrite)
            LogRecordCodec.encode(LogRecord(sequence: 5, mutations: [.put(key: b("lost2"), value: b("x"))]), into: &lastWrite)
            for i in 60..<lastWrite.count { lastWrite[i] = 0 }
            tail = lastWrite
        }
        // Where the crash left it: after the records, over the zeros reserved there if any.
        try writeAtLogEnd(log, tail)
        let sizeBefore = fileSize(log)
        // Zeros after the last record are space for the next ones (reserved, or a file system's
        // unfilled extension): nothing to cut; the file stays as it is.
        let unchanged = kind == "zero fill"
        // The check and the recovery log tell both counts: the torn bytes (through the last
        // nonzero one, as INFO counts them), and all the bytes the cut removes, zeros included.
        let nonzero = (tail.lastIndex { $0 != 0 } ?? -1) + 1
        let cut = sizeBefore - size
        let told = "a torn tail of \(nonzero) bytes at offset \(size) of \(log)"
        let inAll = cut > nonzero ? ", \(cut) bytes in all with the zeros after it" : ""
        let checked = try #require(try Store.check(directory: dir.data).first)
        #expect(checked.summary.hasSuffix(unchanged ? "log records to replay" : "; \(told) would be cut\(inAll)"), "\(checked.summary)")
        let logged = LoggedLines()
        options.log = { line in logged.append(line) }
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("t")
            let stats = await ns.currentStatistics()
            let cutLine = logged.lines.filter { $0.contains("cut a torn tail") }
            #expect(cutLine == (unchanged ? [] : ["namespace t: cut \(told)\(inAll) (an append cut short, or writes never fsync'd)"]))
            #expect(stats.tornBytesCut == (unchanged ? 0 : nonzero), "INFO counts the torn bytes up to the last nonzero one")
            #expect(stats.recordsReplayed == 3)
            expectSameContents(await contents(ns), model)
            #expect(fileSize(log) == (unchanged ? sizeBefore : size), "the tail was cut off the file")
            try await ns.put(b("after"), b("cut"))
            model[b("after")] = b("cut")
        }
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("t")
            expectSameContents(await contents(ns), model)
            #expect(await ns.currentStatistics().tornBytesCut == 0)
            #expect(await ns.currentStatistics().lastSequence == 4)
        }
    }

    @Test("under always, zeros are reserved ahead of the log; a reopen keeps them and writes after the last record")
    func reservedSpaceSurvivesReopen() async throws {
        let dir = TemporaryDirectory("reserved")
        defer { dir.remove() }
        let log = dir.data + "/r/000001.log"
        var model: [[UInt8]: [UInt8]] = [:]
        try await withStore(dir.data) { store in
            try await Self.fill(try await store.namespace("r"), "k", 20, into: &model)
        }
        let length = logLength(log)
        let size = fileSize(log)
        #expect(size >= length + LogReservation.standard(for: .always).chunkBytes / 2, "zeros reserved after \(length) bytes of records")
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("r")
            let stats = await ns.currentStatistics()
            #expect(stats.tornBytesCut == 0)
            #expect(stats.logBytes == length, "INFO counts the records, not the reserved zeros")
            #expect(fileSize(log) == size, "recovery leaves reserved space alone")
            try await ns.put(b("next"), b("one"))
            model[b("next")] = b("one")
        }
        let (found, _) = records(in: try readFile(log))
        #expect(found.count == 21)
        #expect(found.last?.offset == length, "the next record went where the records ended")
        #expect(found.last?.record.durableThrough == 20, "and says everything before it was fsync'd")
        try await withStore(dir.data) { store in
            expectSameContents(await contents(try await store.namespace("r")), model)
        }
    }

    @Test("a torn tail in a segment that is not the last is corruption")
    func tornOlderSegment() async throws {
        let dir = TemporaryDirectory("tornold")
        defer { dir.remove() }
        let faults = FaultInjector()
        let nsDir = dir.data + "/o"
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            var model: [[UInt8]: [UInt8]] = [:]
            let ns = try await store.namespace("o")
            try await Self.fill(ns, "k", 3, into: &model)
            // A compaction that stops right after rotating leaves two segments.
            faults.arm(failpoint: "compaction.afterRotate", .fail)
            #expect(await storeError { try await ns.compact() }?.code == .io)
            faults.reset()
            try await ns.put(b("in-second"), b("x"))
        }
        let segments = segmentFiles(nsDir)
        try #require(segments.count == 2)
        let size = logLength(segments[0])
        try writeAtLogEnd(segments[0], [0x30, 0, 0, 0, 1, 2])
        let before = try readFile(segments[0])
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("o") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains(segments[0]))
            #expect(error.message.contains("byte offset \(size)"))
        }
        #expect(try readFile(segments[0]) == before)
    }

    // MARK: - Fault injection

    @Test("ENOSPC while reserving log space: the put still succeeds (appended), the error is counted, space is reserved later")
    func noSpaceWhileReserving() async throws {
        let dir = TemporaryDirectory("enospc-reserve")
        defer { dir.remove() }
        let faults = FaultInjector()
        let log = dir.data + "/r/000001.log"
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            let ns = try await store.namespace("r")
            // The first put reserves a chunk before it writes its record: fail that one write.
            faults.failSyscall(.write, pathContains: log, errno: ENOSPC, count: 1)
            try await ns.put(b("k"), b("v1"))
            #expect(await ns.currentStatistics().ioErrors == 1)
            #expect(fileSize(log) == logLength(log), "nothing reserved")
            try await ns.put(b("k"), b("v2"))
            #expect(fileSize(log) >= logLength(log) + LogReservation.standard(for: .always).chunkBytes, "reserved on the next write")
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("r")
            #expect(await contents(ns) == [b("k"): b("v2")])
        }
    }

    @Test("ENOSPC on a log append: the put fails with io, is not applied, and the next put works")
    func noSpaceOnAppend() async throws {
        let dir = TemporaryDirectory("enospc")
        defer { dir.remove() }
        let faults = FaultInjector()
        let log = dir.data + "/e/000001.log"
        // Appends only: with zeros reserved ahead, the first write a fault hits may be the
        // reservation's (see the next test).
        var options = testOptions(faults: faults)
        options.reservation = .off
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("e")
            try await ns.put(b("k"), b("old"))
            let size = logLength(log)
            faults.failSyscall(.write, pathContains: log, errno: ENOSPC, count: 1)
            let error = try #require(await storeError { try await ns.put(b("k"), b("new")) })
            #expect(error.code == .io)
            #expect(error.message.contains(String(cString: strerror(ENOSPC))), "\(error.message)")
            #expect(error.message.contains(log))
            #expect(await ns.get(b("k")) == b("old"))
            #expect(await ns.count() == 1)
            #expect(logLength(log) == size)
            // A pipeline with the fault armed again: the write fails, the reads around it work.
            faults.failSyscall(.write, pathContains: log, errno: ENOSPC, count: 1)
            let run = await ns.execute([.get(b("k")), .put(key: b("k2"), value: b("v")), .get(b("k2")), .count])
            try await run.durability.wait()
            #expect(run.outcomes[0] == .value(b("old")))
            guard case .failure(let e) = run.outcomes[1] else { Issue.record("put succeeded"); return }
            #expect(e.code == .io)
            #expect(run.outcomes[2] == .value(nil))
            #expect(run.outcomes[3] == .integer(1))
            #expect(await ns.currentStatistics().ioErrors == 2)
            #expect(await ns.currentStatistics().failure == nil)
            // The fault is used up: the next put works.
            try await ns.put(b("k"), b("newer"))
            #expect(await ns.get(b("k")) == b("newer"))
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("e")
            #expect(await contents(ns) == [b("k"): b("newer")])
            #expect(await ns.currentStatistics().lastSequence == 2)
        }
    }

    @Test("an append that fails and cannot be cut back stops every later write until reopened")
    func appendAndTruncateFail() async throws {
        let dir = TemporaryDirectory("trunc")
        defer { dir.remove() }
        let faults = FaultInjector()
        let log = dir.data + "/t/000001.log"
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            let ns = try await store.namespace("t")
            try await ns.put(b("a"), b("1"))
            faults.failSyscall(.write, pathContains: log, errno: EIO)
            faults.failSyscall(.truncate, pathContains: log, errno: EIO)
            #expect(await storeError { try await ns.put(b("a"), b("2")) }?.code == .io)
            faults.reset()
            let refused = await storeError { try await ns.put(b("b"), b("1")) }
            #expect(refused?.code == .durabilityLost)
            #expect(refused?.message.contains(log) == true)
            #expect(await ns.get(b("a")) == b("1"))
            #expect(await ns.currentStatistics().failure != nil)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("t")
            expectSameContents(await contents(ns), [b("a"): b("1")])
            try await ns.put(b("b"), b("1"))
        }
    }

    @Test("EIO on fsync under always: the waiting put gets durabilityLost and later writes are refused")
    func fsyncFailure() async throws {
        let dir = TemporaryDirectory("eio")
        defer { dir.remove() }
        let faults = FaultInjector()
        let log = dir.data + "/f/000001.log"
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            let ns = try await store.namespace("f")
            try await ns.put(b("a"), b("1"))
            faults.failSyscall(.fsync, pathContains: log, errno: EIO, count: 1)
            let error = try #require(await storeError { try await ns.put(b("a"), b("2")) })
            #expect(error.code == .durabilityLost)
            #expect(error.message.contains(log))
            // Refused from now on, even though the fault itself is gone.
            #expect(await storeError { try await ns.put(b("b"), b("1")) }?.code == .durabilityLost)
            #expect(await storeError { try await ns.delete([b("a")]) }?.code == .durabilityLost)
            #expect(await storeError { try await ns.apply([.put(key: b("c"), value: b("1"))]) }?.code == .durabilityLost)
            #expect(await storeError { try await ns.compact() }?.code == .durabilityLost)
            #expect(await ns.get(b("b")) == nil)
            #expect(await ns.get(b("a")) != nil)  // reads still work
            #expect(await ns.currentStatistics().failure != nil)
            // Other namespaces are not affected.
            try await store.namespace("g").put(b("x"), b("y"))
        }
        // After a restart the namespace recovers from disk and takes writes again.
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("f")
            let a = await ns.get(b("a"))
            #expect(a == b("1") || a == b("2"))
            #expect(await ns.get(b("b")) == nil)
            try await ns.put(b("b"), b("ok"))
            #expect(await ns.get(b("b")) == b("ok"))
        }
    }

    enum SnapshotFault: String, CaseIterable, Sendable {
        case failpointAfterRotate, failpointAfterTempWrite, failpointAfterTempSync, failpointAfterRename,
             failpointAfterDirectorySync, failpointAfterLogDrop,
             writeOfTemporary, fsyncOfTemporary, openOfTemporary, rename, createNextSegment, headerOfNextSegment, presyncOfLog

        var failpoint: String? {
            switch self {
            case .failpointAfterRotate: "compaction.afterRotate"
            case .failpointAfterTempWrite: "compaction.afterTempWrite"
            case .failpointAfterTempSync: "compaction.afterTempSync"
            case .failpointAfterRename: "compaction.afterRename"
            case .failpointAfterDirectorySync: "compaction.afterDirectorySync"
            case .failpointAfterLogDrop: "compaction.afterLogDrop"
            default: nil
            }
        }

        /// Whether the new snapshot is in place when the failure happens.
        var replacedSnapshot: Bool {
            [.failpointAfterRename, .failpointAfterDirectorySync, .failpointAfterLogDrop].contains(self)
        }
    }

    @Test("a failure while compacting: compact() throws, the old snapshot and the log stay, reopen has everything",
          arguments: SnapshotFault.allCases)
    func compactionFailure(fault: SnapshotFault) async throws {
        let dir = TemporaryDirectory("snapfail")
        defer { dir.remove() }
        let faults = FaultInjector()
        let nsDir = dir.data + "/n"
        var model: [[UInt8]: [UInt8]] = [:]
        var oldSnapshot: [UInt8] = []
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            let ns = try await store.namespace("n")
            try await Self.fill(ns, "first", 30, into: &model)
            try await ns.compact()
            oldSnapshot = try readFile(nsDir + "/snapshot.json")
            try await Self.fill(ns, "second", 30, into: &model)
            try await ns.delete([b("first0"), b("first1")])
            model[b("first0")] = nil
            model[b("first1")] = nil
            // Their records (a segment sealed by the compaction gives back the zeros after them).
            let logsBefore = try segmentFiles(nsDir).map { try readFile($0).prefix(logLength($0)) }

            if let name = fault.failpoint {
                faults.arm(failpoint: name, .fail)
            } else {
                switch fault {
                case .writeOfTemporary: faults.failSyscall(.write, pathContains: nsDir + "/snapshot.json.tmp", errno: ENOSPC)
                case .fsyncOfTemporary: faults.failSyscall(.fsync, pathContains: nsDir + "/snapshot.json.tmp", errno: EIO)
                case .openOfTemporary: faults.failSyscall(.open, pathContains: nsDir + "/snapshot.json.tmp", errno: EMFILE)
                case .rename: faults.failSyscall(.rename, pathContains: nsDir + "/snapshot.json", errno: EIO)
                case .createNextSegment: faults.failSyscall(.open, pathContains: nsDir + "/000003.log", errno: ENOSPC)
                case .headerOfNextSegment: faults.failSyscall(.write, pathContains: nsDir + "/000003.log", errno: ENOSPC)
                case .presyncOfLog: faults.failSyscall(.fsync, pathContains: nsDir + "/000002.log", errno: EIO)
                default: Issue.record("unhandled \(fault)")
                }
            }
            let error = try #require(await storeError { try await ns.compact() })
            // A failed fsync of the log itself means durability is lost (the page cache cannot be
            // trusted any more); any other step failing is a plain I/O error.
            #expect(error.code == (fault == .presyncOfLog ? .durabilityLost : .io), "\(error)")
            if let name = fault.failpoint { #expect(faults.hits(name) == 1) }
            faults.reset()

            #expect(!fileExists(nsDir + "/snapshot.json.tmp"), "the temporary snapshot is removed")
            if !fault.replacedSnapshot {
                #expect(try readFile(nsDir + "/snapshot.json") == oldSnapshot, "the old snapshot is untouched")
            }
            if fault != .failpointAfterLogDrop {
                // Every record written since the first snapshot is still in the log.
                let logsAfter = try segmentFiles(nsDir).map { try readFile($0).prefix(logLength($0)) }
                #expect(logsAfter.joined().starts(with: logsBefore.joined()))
            }
            if fault == .createNextSegment || fault == .headerOfNextSegment {
                // Left behind, an empty 000003.log would make a torn tail of 000002.log, where
                // the writes still go, look like damage in a segment that is not the last.
                #expect(!fileExists(nsDir + "/000003.log"), "the segment that could not be started is removed")
            }
            expectSameContents(await contents(ns), model)
            // Writes still work, except after a failed fsync of the log: like the syncer's own
            // fsync failure, it must stop all writes until the namespace is reopened.
            if fault == .presyncOfLog {
                #expect(await storeError { try await ns.put(b("after-failure"), b("1")) }?.code == .durabilityLost)
            } else {
                try await ns.put(b("after-failure"), b("1"))
                model[b("after-failure")] = b("1")
            }
        }
        // A crash in the middle of the next append leaves a torn tail on the segment written to
        // last: it is cut, never taken for damage.
        let last = try #require(segmentFiles(nsDir).last { try! readFile($0).count > 8 }, "a segment holds the records")
        try writeFile(last, try readFile(last) + [0x40, 0, 0, 0, 1, 2, 3])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            let found = await contents(ns)
            expectSameContents(found, model)
            // And a later compaction succeeds and keeps everything.
            try await ns.compact()
            #expect(segmentFiles(nsDir).count == 1)
        }
        try await withStore(dir.data) { store in
            let found = await contents(try await store.namespace("n"))
            expectSameContents(found, model)
        }
    }

    @Test("a data directory the store creates is made durable: its parent is fsync'd, and a failure says so")
    func dataDirectoryCreationIsDurable() async throws {
        let dir = TemporaryDirectory("mkdata")
        defer { dir.remove() }
        let faults = FaultInjector()
        faults.failSyscall(.fsync, pathContains: dir.path, errno: EIO)
        let error = #expect(throws: StoreError.self) { _ = try Store(directory: dir.data + "/inner", options: StoreOptions(faults: faults)) }
        #expect(error?.code == .io)
        #expect(error?.message.contains("creating directory") == true, "\(String(describing: error))")
        faults.reset()
        let store = try Store(directory: dir.data + "/inner")
        await store.close()
    }

    @Test("close() says which namespaces' logs may not be durable: a failed final fsync is not swallowed")
    func closeReportsFailedFinalFsync() async throws {
        let dir = TemporaryDirectory("closefsync")
        defer { dir.remove() }
        let faults = FaultInjector()
        let store = try await openStore(dir.data, testOptions(.everysec, faults: faults))
        try await store.namespace("fine").put(b("k"), b("v"))
        try await store.namespace("n").put(b("k"), b("v"))
        faults.failSyscall(.fsync, pathContains: dir.data + "/n/0000", errno: EIO)
        #expect(await store.close() == ["n"])
        faults.reset()
        let again = try await openStore(dir.data, testOptions(.everysec))
        #expect(await again.close() == [])
    }

    @Test("a namespace whose directory could not be created can be created later")
    func namespaceCreationRetried() async throws {
        let dir = TemporaryDirectory("mkdir")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            faults.failSyscall(.mkdir, pathContains: dir.data + "/fresh", errno: EACCES)
            #expect(await storeError { _ = try await store.namespace("fresh") }?.code == .io)
            faults.reset()
            let ns = try await store.namespace("fresh")
            try await ns.put(b("k"), b("v"))
            #expect(await store.namespaceNames() == ["fresh"])
        }
        try await withStore(dir.data) { store in
            let opened = try await store.namespace("fresh")
            #expect(await opened.get(b("k")) == b("v"))
        }
    }

    @Test("an I/O error while opening is not corruption: the namespace is reported unavailable with it, and opens once the error is gone",
          arguments: ["log", "snapshot"])
    func transientOpenError(file: String) async throws {
        let dir = TemporaryDirectory("readerr")
        defer { dir.remove() }
        let faults = FaultInjector()
        let log = dir.data + (file == "log" ? "/r/000001.log" : "/r/snapshot.json")
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("r")
            try await ns.put(b("k"), b("v"))
            if file == "snapshot" { try await ns.compact() }
        }
        let before = try readFile(log)
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            faults.failSyscall(.read, pathContains: log, errno: EIO)
            let error = try #require(await storeError { _ = try await store.namespace("r") })
            #expect(error.code == .io)
            #expect(await store.unavailability(of: "r") == error)
            faults.reset()
            let opened = try await store.namespace("r")
            #expect(await opened.get(b("k")) == b("v"))
            #expect(await store.unavailability(of: "r") == nil)
        }
        #expect(try readFile(log) == before)
    }

    /// Polls `condition` every 50 ms for up to `seconds`; true once it holds.
    /// Whether `condition` holds within `seconds` of wall-clock time (checked every 50 ms).
    static func eventually(_ seconds: Double = 20, _ condition: () async -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        return await condition()
    }

    @Test("EIO on the background fsync under everysec: logged once and counted as an I/O error; later writes are refused")
    func everysecFsyncFailure() async throws {
        let dir = TemporaryDirectory("everysec")
        defer { dir.remove() }
        let faults = FaultInjector()
        let log = dir.data + "/e/000001.log"
        var options = testOptions(.everysec, faults: faults)
        let logged = LoggedLines()
        options.log = { line in logged.append(line) }
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("e")
            faults.failSyscall(.fsync, pathContains: log, errno: EIO, count: 1)
            try await ns.put(b("a"), b("1"))  // returns before any fsync
            let failed = try await Self.eventually { await ns.currentStatistics().failure != nil }
            #expect(failed, "the once-a-second fsync ran and failed")
            #expect(await ns.currentStatistics().ioErrors == 1)
            let lines = logged.lines.filter { $0.hasPrefix("namespace e: fsync of \(log) failed") }
            #expect(lines.count == 1, "\(logged.lines)")
            #expect(await storeError { try await ns.put(b("b"), b("2")) }?.code == .durabilityLost)
            #expect(await ns.get(b("a")) == b("1"))
        }
    }

    @Test("under always, a segment kept for change history gives back the zeros reserved ahead of its records when compaction seals it")
    func sealedSegmentTrimmed() async throws {
        let dir = TemporaryDirectory("trim")
        defer { dir.remove() }
        var options = testOptions(.always)
        options.changesHistory = 1000
        options.segmentSealBytes = 0   // sealed by the compaction, though history needs all it holds
        let first = dir.data + "/h/000001.log"
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("h")
            try await ns.put(b("k"), b("v1"))
            #expect(fileSize(first) > logLength(first), "zeros reserved ahead while it is active")
            try await ns.compact()
            #expect(fileExists(first), "kept for change history")
            #expect(fileSize(first) == logLength(first), "sealed: \(fileSize(first)) bytes for \(logLength(first)) of records")
            let stats = await ns.currentStatistics()
            #expect(stats.historyBytes == logLength(first) && stats.logBytes == LogSegmentHeader.length, "\(stats)")
            try await ns.put(b("k"), b("v2"))
        }
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("h")
            #expect(await ns.get(b("k")) == b("v2"))
            #expect(await ns.currentStatistics().oldestSequence == 1, "the history still begins at the first change")
        }
    }

    @Test("the periodic compaction snapshots a namespace that changed, and reopening gives the same data")
    func periodicCompaction() async throws {
        let dir = TemporaryDirectory("periodic")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.compaction = CompactionPolicy(interval: 1)
        var model: [[UInt8]: [UInt8]] = [:]
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("p")
            try await Self.fill(ns, "k", 50, into: &model)
            // The store's 1-second ticks run on the shared cooperative pool: a loaded 2-core CI run
            // can hold them back for seconds, so allow 30 (a quiet machine compacts within 2).
            let compacted = try await Self.eventually(30) { await ns.currentStatistics().compactions >= 1 }
            #expect(compacted)
            #expect(fileExists(dir.data + "/p/snapshot.json"))
            try await ns.put(b("after"), b("snapshot"))
            model[b("after")] = b("snapshot")
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("p")
            expectSameContents(await contents(ns), model)
            #expect(await ns.currentStatistics().snapshotSequence >= 50)
        }
    }

    // MARK: - Group commit

    @Test("group commit: 50 concurrent puts under always all succeed and all survive reopen")
    func groupCommit() async throws {
        let dir = TemporaryDirectory("group")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("g")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<50 {
                    group.addTask { try await ns.put(b("key\(i)"), b("value\(i)")) }
                }
                try await group.waitForAll()
            }
            #expect(await ns.count() == 50)
            #expect(await ns.currentStatistics().lastSequence == 50)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("g")
            let found = await contents(ns)
            #expect(found.count == 50)
            for i in 0..<50 { #expect(found[b("key\(i)")] == b("value\(i)")) }
            #expect(await ns.currentStatistics().recordsReplayed == 50)
        }
    }
}

/// The lines a store logged, for a test to look at.
final class LoggedLines: Sendable {
    private let stored = Mutex<[String]>([])

    func append(_ line: String) { stored.withLock { $0.append(line) } }

    var lines: [String] { stored.withLock { $0 } }
}
