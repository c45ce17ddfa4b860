import Foundation
import Testing
@testable import ActorKVStore
import ActorKVTestSupport

/// Loading a snapshot through a sliding window must give exactly what decoding the whole file
/// gives, or hand the verdict to the whole-file decoder; never a different map, never a damaged
/// snapshot accepted.
@Suite("Snapshot window (decoding a file a window at a time)")
struct SnapshotWindowTests {
    /// `count` entries with text and binary keys and values, some far longer than small windows.
    static func map(count: Int) -> OrderedMap {
        var map = OrderedMap()
        for i in 0..<count {
            let size = [1, 40, 300, 1500][i % 4]
            let value: [UInt8] = i % 3 == 0 ? (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ i) } : b(String(repeating: "v\(i % 10)", count: size / 2))
            let key: [UInt8] = i % 5 == 0 ? [0xFF, UInt8(i >> 8 & 0xFF), UInt8(i & 0xFF)] : b("key:\(String(i + 100_000))")
            map.updateValue(value, forKey: key, version: UInt64(i % 7 + 1))
        }
        return map
    }

    static func write(_ bytes: [UInt8], in dir: TemporaryDirectory) throws -> String {
        let path = dir.path + "/snapshot.json"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func entries(_ map: OrderedMap) -> [[UInt8]: [UInt8]] { SnapshotCodecTests.entries(map) }

    @Test("a window smaller than the file but larger than every entry slides through and decodes the same",
          arguments: [(8192, 4096), (20_000, 3100), (3100, 3100)])
    func slidesAndMatches(capacity: Int, reserve: Int) throws {
        let dir = TemporaryDirectory("snapwin")
        defer { dir.remove() }
        for count in [0, 1, 7, 400] {
            let original = Self.map(count: count)
            let document = SnapshotCodec.encode(original, header: SnapshotCodecTests.header)
            let path = try Self.write(document, in: dir)
            let window = try FileWindow(path: path, capacity: capacity, system: .plain)
            guard case .decoded(let contents) = try SnapshotCodec.decode(window: window, reserve: reserve) else {
                Issue.record("\(count) entries, window \(capacity)/\(reserve): fell back to the whole file"); continue
            }
            let (header, decoded) = (contents.header, contents.map)
            #expect(header == SnapshotCodecTests.header)
            #expect(Self.entries(decoded) == Self.entries(original), "\(count) entries")
            try decoded.checkInvariants()
            if document.count > capacity {
                #expect(window.start > 0, "\(count) entries: the window never slid")
            }
        }
    }

    @Test("an entry longer than the reserve hands the file to the whole-file decoder")
    func longEntryFallsBack() throws {
        let dir = TemporaryDirectory("snapwin-long")
        defer { dir.remove() }
        let path = try Self.write(SnapshotCodec.encode(Self.map(count: 400), header: SnapshotCodecTests.header), in: dir)
        let outcome = try SnapshotCodec.decode(window: FileWindow(path: path, capacity: 1024, system: .plain), reserve: 512)
        guard case .needsWholeFile = outcome else { Issue.record("a 1.5 KB entry decoded through a 512-byte reserve"); return }
    }

    @Test("data after the end of the document, past the window, is not missed")
    func trailingDataBeyondTheWindow() throws {
        let dir = TemporaryDirectory("snapwin-tail")
        defer { dir.remove() }
        let document = SnapshotCodec.encode(Self.map(count: 40), header: SnapshotCodecTests.header)
        let padded = document + [UInt8](repeating: 0x20, count: 20_000) + b("x")
        #expect(SnapshotCodecTests.failure(padded)?.reason == "data after the end of the document")
        let path = try Self.write(padded, in: dir)
        let outcome = try SnapshotCodec.decode(window: FileWindow(path: path, capacity: 8192, system: .plain), reserve: 4096)
        guard case .needsWholeFile = outcome else { Issue.record("trailing data accepted"); return }
    }

    @Test("no damaged snapshot decodes through the window: every changed byte falls back or decodes what the whole file does")
    func damageNeverDecodesDifferently() throws {
        let dir = TemporaryDirectory("snapwin-damage")
        defer { dir.remove() }
        let original = SnapshotCodec.encode(Self.map(count: 60), header: SnapshotCodecTests.header)
        var checked = 0, fellBack = 0
        for position in stride(from: 0, to: original.count, by: 7) {
            var damaged = original
            damaged[position] ^= 0x04
            let path = try Self.write(damaged, in: dir)
            let whole = Result { () throws(SnapshotCodec.Failure) in try SnapshotCodec.decode(damaged) }
            let windowed = try SnapshotCodec.decode(window: FileWindow(path: path, capacity: 4096, system: .plain), reserve: 2048)
            switch (windowed, whole) {
            case (.needsWholeFile, _):
                fellBack += 1
            case (.decoded(let contents), .success(let expected)):
                #expect(contents.header == expected.header && Self.entries(contents.map) == Self.entries(expected.map), "byte \(position)")
            case (.decoded, .failure(let failure)):
                Issue.record("byte \(position): the window decoded a snapshot the whole-file decoder refuses (\(failure.reason))")
            }
            checked += 1
        }
        #expect(checked > 100 && fellBack > checked * 9 / 10, "\(fellBack) of \(checked) changes fell back")
    }

    @Test("a namespace opens from a snapshot larger than the window")
    func recoveryUsesTheWindow() async throws {
        let dir = TemporaryDirectory("snapwin-open")
        defer { dir.remove() }
        var expected: [[UInt8]: [UInt8]] = [:]
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("big")
            for chunk in 0..<30 {
                var batch: [Mutation] = []
                for i in chunk * 100..<(chunk + 1) * 100 {
                    let value = [UInt8](repeating: UInt8(i & 0xFF), count: 9000)  // 27 MB: more than one 16 MiB window
                    batch.append(.put(key: b("k\(i)"), value: value))
                    expected[b("k\(i)")] = value
                }
                try await ns.apply(batch)
            }
            try await ns.compact()
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("big")
            let count = await ns.count()
            #expect(count == 3000)
            for key in [b("k0"), b("k1499"), b("k2999")] {
                let value = await ns.get(key)
                #expect(value == expected[key])
            }
        }
    }
}
