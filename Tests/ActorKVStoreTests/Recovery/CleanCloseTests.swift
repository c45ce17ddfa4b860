@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// After a clean close, a namespace's files must reach the sequence it closed at: damage that
/// looks like a torn append (a flipped bit in the last record's length) or a missing last segment
/// is refused, not cut or passed over. Both were found by an operator audit: the first cut an
/// fsync'd, acknowledged write as a torn tail; the second opened without the last ten writes.
@Suite("Clean close: what the files must still hold")
struct CleanCloseTests {
    /// Each record's offset in a segment.
    static func recordOffsets(_ path: String) throws -> [Int] {
        var offsets: [Int] = []
        _ = try LogSegmentScanner.scan(path, after: nil, system: .plain) { _, offset in offsets.append(offset) }
        return offsets
    }

    static func markerPath(_ data: String, _ ns: String) -> String { data + "/" + ns + "/" + CleanCloseMarker.fileName }

    static func puts(_ data: String, _ ns: String, _ range: ClosedRange<Int>) async throws {
        try await withStore(data) { store in
            let namespace = try await store.namespace(ns)
            for i in range { try await namespace.put(b("k\(i)"), b("v\(i)")) }
        }
    }

    @Test("a clean-close marker that cannot be written (a full disk at shutdown) leaves no closed-cleanly.tmp; one left by an older build is removed at the next opening")
    func failedMarkerLeavesNothing() async throws {
        let dir = TemporaryDirectory("cleanfull")
        defer { dir.remove() }
        let faults = FaultInjector()
        var options = testOptions()
        options.faults = faults
        try await withStore(dir.data, options) { store in
            try await store.namespace("ns").put(b("k"), b("v"))
            faults.failSyscall(.write, pathContains: CleanCloseMarker.fileName + ".tmp", errno: ENOSPC)
        }
        let temporary = Self.markerPath(dir.data, "ns") + ".tmp"
        #expect(!fileExists(temporary), "the failed marker's temporary file stays")
        #expect(!fileExists(Self.markerPath(dir.data, "ns")), "no marker was written")
        try writeFile(temporary, [])
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("ns")
            #expect(await ns.get(b("k")) == b("v"))
            #expect(!fileExists(temporary), "opening removes a leftover temporary marker")
        }
    }

    @Test("a flipped bit in the last record's length, after a clean close, is refused and the file left alone")
    func flippedLengthBitRefused() async throws {
        let dir = TemporaryDirectory("cleanflip")
        defer { dir.remove() }
        try await Self.puts(dir.data, "ns", 1...5)
        #expect(try String(contentsOfFile: Self.markerPath(dir.data, "ns"), encoding: .utf8) == CleanCloseMarker.text(through: 5))
        let log = dir.data + "/ns/000001.log"
        var bytes = try readFile(log)
        let last = try #require(try Self.recordOffsets(log).last)
        bytes[last] ^= 0x40  // the length now runs past the file's end: what an append cut short looks like
        try writeFile(log, bytes)
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("ns") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains("closed cleanly through sequence 5"), "\(error.message)")
            #expect(error.message.contains("end at sequence 4"), "\(error.message)")
        }
        #expect(try readFile(log) == bytes, "nothing was cut")
    }

    @Test("a last segment removed after a clean close is refused; the snapshot alone does not pass for the whole")
    func missingLastSegmentRefused() async throws {
        let dir = TemporaryDirectory("cleangone")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("ns")
            for i in 1...20 { try await ns.put(b("k\(i)"), b("v\(i)")) }
            try await ns.compact()
            for i in 21...30 { try await ns.put(b("k\(i)"), b("v\(i)")) }
        }
        let segments = try FileManager.default.contentsOfDirectory(atPath: dir.data + "/ns").filter { $0.hasSuffix(".log") }.sorted()
        let active = try #require(segments.last)
        try FileManager.default.removeItem(atPath: dir.data + "/ns/" + active)
        try await withStore(dir.data) { store in
            let error = try #require(await storeError { _ = try await store.namespace("ns") })
            #expect(error.code == .corrupt)
            #expect(error.message.contains("closed cleanly through sequence 30"), "\(error.message)")
            #expect(error.message.contains("end at sequence 20"), "\(error.message)")
        }
    }

    @Test("a marker older than the log (a crash after later writes) claims only what it saw: a torn tail after it is still cut")
    func olderMarkerAllowsLaterTornTail() async throws {
        let dir = TemporaryDirectory("cleanold")
        defer { dir.remove() }
        try await Self.puts(dir.data, "ns", 1...3)
        let marker = Self.markerPath(dir.data, "ns")
        let old = try readFile(marker)
        try await Self.puts(dir.data, "ns", 4...5)
        try writeFile(marker, old)  // as if the run that wrote 4 and 5 had crashed
        let log = dir.data + "/ns/000001.log"
        let last = try #require(try Self.recordOffsets(log).last)
        let bytes = try readFile(log)
        try writeFile(log, Array(bytes[..<(last + 5)]))  // record 5 cut short
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("ns")
            #expect(await ns.get(b("k4")) == b("v4"))
            #expect(await ns.get(b("k5")) == nil)
        }
    }

    @Test("a marker cut short or unreadable is ignored: the namespace opens as after a crash")
    func damagedMarkerIgnored() async throws {
        let dir = TemporaryDirectory("cleandamaged")
        defer { dir.remove() }
        try await Self.puts(dir.data, "ns", 1...3)
        let marker = Self.markerPath(dir.data, "ns")
        let log = dir.data + "/ns/000001.log"
        let last = try #require(try Self.recordOffsets(log).last)
        try writeFile(log, Array(try readFile(log)[..<(last + 5)]))
        try writeFile(marker, Array(CleanCloseMarker.text(through: 3).utf8.dropLast()))  // no newline: cut short
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("ns")
            #expect(await ns.get(b("k2")) == b("v2"))
            #expect(await ns.get(b("k3")) == nil)
        }
    }

    @Test("a marker with garbage in it is ignored as before, and one line says so; a marker that reads says nothing")
    func garbledMarkerLogged() async throws {
        let dir = TemporaryDirectory("cleangarbled")
        defer { dir.remove() }
        try await Self.puts(dir.data, "ns", 1...2)
        let marker = Self.markerPath(dir.data, "ns")
        /// The lines opening `ns` logs about its marker.
        func markerLines() async throws -> [String] {
            let logged = LoggedLines()
            var options = testOptions()
            options.log = { logged.append($0) }
            try await withStore(dir.data, options) { store in
                let ns = try await store.namespace("ns")
                #expect(await ns.get(b("k2")) == b("v2"))
            }
            return logged.lines.filter { $0.contains(CleanCloseMarker.fileName) }
        }
        #expect(try await markerLines() == [])
        let garbage = "actorkv closed this namespace cleanly through sequence 2x\n"
        try writeFile(marker, Array(garbage.utf8))
        #expect(try await markerLines() == [
            "namespace ns: \(marker) is unreadable (\(garbage.debugDescription)), so it was ignored: the namespace opens as after a crash",
        ])
    }

    /// The fsyncs of `segment` that opening namespace `ns` in `data` makes, and the value of k5 it
    /// then reads.
    static func syncsWhileOpening(_ data: String, _ ns: String, _ segment: String) async throws -> (syncs: Int, k5: [UInt8]?) {
        let recorder = FileOperationRecorder()
        return try await withStore(data, testOptions(faults: FaultInjector(recording: recorder))) { store in
            let namespace = try await store.namespace(ns)
            let syncs = recorder.operations.filter { $0 == .sync(path: segment) }.count
            return (syncs, await namespace.get(b("k5")))
        }
    }

    @Test("after a clean close through its last sequence, opening does not fsync the log again; after a crash it does")
    func cleanCloseSkipsTheOpeningFsync() async throws {
        let dir = TemporaryDirectory("cleansync")
        defer { dir.remove() }
        let log = dir.data + "/ns/000001.log"
        try await Self.puts(dir.data, "ns", 1...3)
        let marker = Self.markerPath(dir.data, "ns")
        let closedAtThree = try readFile(marker)
        try await Self.puts(dir.data, "ns", 4...5)
        let clean = try await Self.syncsWhileOpening(dir.data, "ns", log)
        #expect(clean.syncs == 0, "everything read was fsync'd before the marker through 5 was written")
        #expect(clean.k5 == b("v5"))
        try writeFile(marker, closedAtThree)  // as if the run that wrote 4 and 5 had crashed: they may be in the page cache only
        let crashed = try await Self.syncsWhileOpening(dir.data, "ns", log)
        #expect(crashed.syncs == 1, "records after the marker's sequence are fsync'd before new ones claim them durable")
        #expect(crashed.k5 == b("v5"))
        try FileManager.default.removeItem(atPath: marker)
        #expect(try await Self.syncsWhileOpening(dir.data, "ns", log).syncs == 1, "no marker: fsync'd as after a crash")
    }

    @Test("the marker's text is read back exactly, and nothing else is taken for one")
    func markerText() {
        for n: UInt64 in [0, 1, 42, .max] {
            #expect(CleanCloseMarker.sequence(in: Array(CleanCloseMarker.text(through: n).utf8)) == n)
        }
        let prefix = "actorkv closed this namespace cleanly through sequence "
        for text in ["", "\n", prefix + "\n", prefix + "12", prefix + "1 2\n", prefix + "-1\n", prefix + "+1\n",
                     prefix + "18446744073709551616\n", prefix + "12\n\n", "x" + prefix + "12\n", prefix + "١٢\n"] {
            #expect(CleanCloseMarker.sequence(in: Array(text.utf8)) == nil, "\(text.debugDescription)")
        }
    }
}
