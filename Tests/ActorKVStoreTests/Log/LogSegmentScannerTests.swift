import Foundation
import Testing
@testable import ActorKVStore
import ActorKVTestSupport

/// The windowed scan of a segment file must reach exactly the verdict, records and torn-byte
/// count of one scan over the whole file, whatever the window size.
@Suite("Log segment scanner (windowed reads)")
struct LogSegmentScannerTests {
    /// What a whole-file scan finds: the reference.
    private static func reference(_ bytes: [UInt8]) -> (records: [UInt64: Int], order: [UInt64], outcome: LogSegmentScanner.Outcome) {
        var records: [UInt64: Int] = [:]
        var order: [UInt64] = []
        let (end, reading) = bytes.withUnsafeBytes { raw in
            let end = LogScanner.scanSegment(raw) { record, offset in
                records[record.sequence] = offset
                order.append(record.sequence)
            }
            return (end, LogSegmentHeader.read(raw))
        }
        var torn = 0
        if case .torn(let valid) = end { torn = max(0, (bytes.lastIndex { $0 != 0 } ?? valid) + 1 - valid) }
        var recordsStart = 0
        if case .records(let from) = reading { recordsStart = from }
        return (records, order, LogSegmentScanner.Outcome(end: end, recordsStart: recordsStart, fileSize: bytes.count, tornBytes: torn))
    }

    /// A log of `count` records of mixed sizes, some far longer than the small windows tried.
    private static func log(count: Int, firstSequence: UInt64 = 1) -> [UInt8] {
        var bytes: [UInt8] = []
        for i in 0..<count {
            let sequence = firstSequence + UInt64(i)
            let size = [3, 90, 700, 5000, 20][i % 5]
            let mutations: [Mutation] = i % 7 == 6
                ? [.put(key: b("a\(i)"), value: [UInt8](repeating: UInt8(i & 0xFF), count: size)), .delete(key: b("gone"))]
                : [.put(key: b("k\(i)"), value: [UInt8](repeating: UInt8(truncatingIfNeeded: i * 7), count: size))]
            LogRecordCodec.encode(LogRecord(sequence: sequence, mutations: mutations, durableThrough: sequence - 1), into: &bytes)
        }
        return bytes
    }

    /// Named segment contents covering every way a scan can end.
    private static func cases() -> [(String, [UInt8])] {
        let clean = log(count: 40)
        var flipped = clean
        flipped[clean.count / 2] ^= 0x10
        var cases: [(String, [UInt8])] = [
            ("empty", []),
            ("only zeros", [UInt8](repeating: 0, count: 3000)),
            ("clean", clean),
            ("clean then reserved zeros", clean + [UInt8](repeating: 0, count: 4096)),
            ("a flipped bit in the middle", flipped),
        ]
        for cut in [1, 9, 40, 300] {
            cases.append(("torn: the last \(cut) bytes missing", Array(clean.dropLast(cut))))
            cases.append(("torn, then zeros", Array(clean.dropLast(cut)) + [UInt8](repeating: 0, count: 700)))
        }
        for lost in 0...3 {
            cases.append(("writeback hole, \(lost) sectors lost", LogCodecTests.writebackHole(lostSectors: lost, claim: 1).bytes))
        }
        let probe = LogCodecTests.writebackHole(lostSectors: 1, claim: 1).bytes
        let firstLost = reference(probe).order.last! + 1
        for lost in 0...2 {
            cases.append(("hole before a durable claim, \(lost) sectors lost", LogCodecTests.writebackHole(lostSectors: lost, claim: firstLost).bytes))
        }
        // The same behind a header (this build's segments), and endings the header alone decides.
        let header = LogSegmentHeader.encoded
        cases += cases.map { ("with a header: " + $0.0, header + $0.1) }
        for cut in 1..<header.count { cases.append(("a header torn after \(cut) bytes", Array(header.prefix(cut)))) }
        cases.append(("a header then a torn record", header + Array(clean.prefix(30))))
        var newer = header
        newer[LogSegmentHeader.magic.count] = 3
        cases.append(("an unknown version", newer + clean))
        var older = header
        older[LogSegmentHeader.magic.count] = 1
        cases.append(("a format-1 header", older + clean))
        return cases
    }

    @Test("any window size gives the whole-file verdict, records and torn bytes",
          arguments: [1, 7, 64, 100, 511, 512, 513, 1000, 4096, 1 << 20])
    func windowsAgreeWithWholeScan(window: Int) throws {
        let dir = TemporaryDirectory("segscan")
        defer { dir.remove() }
        for (name, bytes) in Self.cases() {
            let path = dir.path + "/segment.log"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let expected = Self.reference(bytes)
            var order: [UInt64] = []
            var offsets: [UInt64: Int] = [:]
            let got = try LogSegmentScanner.scan(path, after: nil, window: window, system: .plain) { record, offset in
                order.append(record.sequence)
                offsets[record.sequence] = offset
            }
            #expect(got == expected.outcome, "\(name), window \(window)")
            #expect(order == expected.order, "\(name), window \(window): records")
            #expect(offsets == expected.records, "\(name), window \(window): offsets")
        }
    }

    @Test("the cases cover every verdict")
    func casesAreNotTrivial() {
        // The cases must exercise every verdict, or the comparison above proves little.
        let ends = Self.cases().map { Self.reference($0.1).outcome.end }
        #expect(ends.contains(.clean))
        #expect(ends.contains { if case .unused = $0 { true } else { false } })
        #expect(ends.contains { if case .torn = $0 { true } else { false } })
        #expect(ends.filter { if case .corrupt = $0 { true } else { false } }.count >= 2)
        #expect(ends.contains { if case .corrupt(let offset, let reason) = $0 { offset == 6 && reason.contains("version 3") } else { false } })
        #expect(ends.contains(.torn(validLength: 0)))
    }

    @Test("a segment's header: this version or format 1, none, torn, or unknown")
    func headerReading() {
        func read(_ bytes: [UInt8]) -> LogSegmentHeader.Reading { bytes.withUnsafeBytes(LogSegmentHeader.read) }
        let header = LogSegmentHeader.encoded
        #expect(header == Array("AKVLOG".utf8) + [2, 0])
        #expect(read(header) == .records(from: 8))
        #expect(read(Array("AKVLOG".utf8) + [1, 0] + Self.log(count: 3)) == .records(from: 8), "format 1, before the end mark")
        #expect(read(header + Self.log(count: 3)) == .records(from: 8))
        #expect(read([]) == .records(from: 0), "an empty segment")
        #expect(read(Self.log(count: 3)) == .records(from: 0), "a segment written before the header existed")
        #expect(read([0x41, 0x4B, 0x56, 0x4C, 0x4F, 0x48, 1, 0]) == .records(from: 0), "a magic that differs in one byte is no header")
        for cut in 1..<header.count {
            #expect(read(Array(header.prefix(cut))) == .ends(.torn(validLength: 0)), "cut after \(cut) bytes")
        }
        for version: UInt16 in [0, 3, 0x0100, 0xFFFF] {
            let bytes = Array("AKVLOG".utf8) + [UInt8(version & 0xFF), UInt8(version >> 8)]
            guard case .ends(.corrupt(offset: 6, let reason)) = read(bytes) else {
                Issue.record("version \(version) was not refused")
                continue
            }
            #expect(reason.contains("unknown log format version \(version)"))
        }
    }

    @Test("a headerless segment can never start with the magic: read as a record, it has an impossible length")
    func magicIsNoRecord() {
        let decoded = (LogSegmentHeader.encoded + Self.log(count: 2)).withUnsafeBytes { LogRecordCodec.decode($0, at: 0) }
        #expect(decoded == .invalidLength(0x4C56_4B41))
    }

    @Test("an error thrown for a record stops the scan and is rethrown")
    func bodyErrorStops() throws {
        let dir = TemporaryDirectory("segscan-err")
        defer { dir.remove() }
        let path = dir.path + "/segment.log"
        try Data(Self.log(count: 30)).write(to: URL(fileURLWithPath: path))
        var seen = 0
        #expect(throws: StoreError.self) {
            _ = try LogSegmentScanner.scan(path, after: nil, window: 100, system: .plain) { (record, _) throws(StoreError) in
                seen += 1
                if record.sequence == 12 { throw StoreError(.corrupt, "stop") }
            }
        }
        #expect(seen == 12)
    }

    @Test("allZero: true only when every byte from the offset on is zero, wherever the one that is not lies")
    func allZeroFindsEveryNonZeroByte() {
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 64, 67] {
            let zeros = [UInt8](repeating: 0, count: length)
            for offset in 0...length {
                #expect(zeros.withUnsafeBytes { LogScanner.allZero($0, from: offset) })
                for position in 0..<length {
                    var bytes = zeros
                    bytes[position] = position % 2 == 0 ? 1 : 0x80
                    let found = bytes.withUnsafeBytes { LogScanner.allZero($0, from: offset) }
                    #expect(found == (position < offset), "length \(length), offset \(offset), byte at \(position)")
                }
            }
        }
    }
}
