import Foundation
import Testing
@testable import ActorKVStore

/// The windowed scan of a segment file must reach exactly the verdict, records and torn-byte
/// count of one scan over the whole file, whatever the window size.
@Suite("Log segment scanner (windowed reads)")
struct LogSegmentScannerTests {
    /// What a whole-file scan finds: the reference.
    private static func reference(_ bytes: [UInt8]) -> (records: [UInt64: Int], order: [UInt64], outcome: LogSegmentScanner.Outcome) {
        var records: [UInt64: Int] = [:]
        var order: [UInt64] = []
        let end = bytes.withUnsafeBytes { raw in
            LogScanner.scan(raw) { record, offset in
                records[record.sequence] = offset
                order.append(record.sequence)
            }
        }
        var torn = 0
        if case .torn(let valid) = end { torn = max(0, (bytes.lastIndex { $0 != 0 } ?? valid) + 1 - valid) }
        return (records, order, LogSegmentScanner.Outcome(end: end, fileSize: bytes.count, tornBytes: torn))
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
        return cases
    }

    @Test("any window size gives the whole-file verdict, records and torn bytes",
          arguments: [1, 7, 64, 100, 511, 512, 513, 1000, 4096, 1 << 20])
    func windowsAgreeWithWholeScan(window: Int) throws {
        let dir = TempDir("segscan")
        defer { dir.remove() }
        for (name, bytes) in Self.cases() {
            let path = dir.path + "/segment.log"
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            let expected = Self.reference(bytes)
            var order: [UInt64] = []
            var offsets: [UInt64: Int] = [:]
            let got = try LogSegmentScanner.scan(path, after: nil, window: window) { record, offset in
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
    }

    @Test("an error thrown for a record stops the scan and is rethrown")
    func bodyErrorStops() throws {
        let dir = TempDir("segscan-err")
        defer { dir.remove() }
        let path = dir.path + "/segment.log"
        try Data(Self.log(count: 30)).write(to: URL(fileURLWithPath: path))
        var seen = 0
        #expect(throws: StoreError.self) {
            _ = try LogSegmentScanner.scan(path, after: nil, window: 100) { (record, _) throws(StoreError) in
                seen += 1
                if record.sequence == 12 { throw StoreError(.corrupt, "stop") }
            }
        }
        #expect(seen == 12)
    }
}
