import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

@Suite("Snapshot codec")
struct SnapshotCodecTests {
    static let pairs: [([UInt8], [UInt8])] = [
        (b("plain"), b("value")),
        (b("escapes"), b("quote\" backslash\\ slash/ nl\n cr\r tab\t nul\u{0} bell\u{7} del\u{7F}")),
        (b("unicode"), b("é € 😀 \u{2028}")),
        (b("empty"), []),
        ([0x00], [0x00]),
        ([0xFF, 0x00, 0x0D, 0x0A], [0xFF]),
        (b("binary-value"), [0xC0, 0x80, 0xED, 0xA0, 0x80, 0xF4, 0x90, 0x80, 0x80]),  // overlong, surrogate, > U+10FFFF
        (b("truncated-utf8"), [0x41, 0xE2, 0x82]),
        ([0xE2, 0x82, 0xAC], b("euro key")),
    ]

    static func map(_ pairs: [([UInt8], [UInt8])]) -> OrderedMap {
        var map = OrderedMap()
        for (k, v) in pairs { map.updateValue(v, forKey: k, version: 1) }
        return map
    }

    static func entries(_ map: OrderedMap) -> [[UInt8]: [UInt8]] {
        var all: [[UInt8]: [UInt8]] = [:]
        map.forEach { k, v, _ in all[k] = v; return true }
        return all
    }

    static let header = SnapshotCodec.Header(namespace: "config", lastSequence: 42, createdAt: 1_763_800_000)

    /// A document with its crc32c recomputed, so that only the change under test is wrong.
    static func resealed(_ document: [UInt8]) -> [UInt8] {
        let marker = b(",\"crc32c\":\"")
        let at = document.firstRange(of: marker)!.lowerBound
        let crc = String(CRC32C.checksum(Array(document[..<at])), radix: 16)
        return Array(document[..<at]) + marker + b(String(repeating: "0", count: 8 - crc.count) + crc) + b("\"}\n")
    }

    static func failure(_ bytes: [UInt8]) -> SnapshotCodec.Failure? {
        do {
            _ = try SnapshotCodec.decode(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test("binary and text keys and values round-trip")
    func roundTrip() throws {
        let map = Self.map(Self.pairs)
        let document = SnapshotCodec.encode(map, header: Self.header)
        let (header, decoded) = try SnapshotCodec.decode(document)
        #expect(header == Self.header)
        #expect(decoded.count == Self.pairs.count)
        #expect(Self.entries(decoded) == Self.entries(map))
        // Not UTF-8: the base64 marker. UTF-8: a JSON string.
        let text = String(decoding: document, as: UTF8.self)
        #expect(text.contains("[\"binary-value\",{\"base64\":\"wIDtoID0kICA\"},1]"))
        #expect(text.contains("[{\"base64\":\"AA==\"},{\"base64\":\"AA==\"},1]") == false)  // NUL is valid UTF-8
        #expect(text.contains("[\"\\u0000\",\"\\u0000\",1]"))
        #expect(text.contains("[\"plain\",\"value\",1]"))
        #expect(text.hasPrefix("{\"format\":\"actorkv-snapshot\",\"version\":3,\"namespace\":\"config\""))
    }

    @Test("random keys and values round-trip: runs of plain bytes between escapes, UTF-8 and not")
    func randomRoundTrip() throws {
        var rng = SeededGenerator(seed: 11)
        let special: [UInt8] = [0x22, 0x5C, 0x0A, 0x0D, 0x09, 0x00, 0x1F, 0x7F, 0xC3, 0xA9, 0xE2, 0x82, 0xAC, 0xFF]
        let draw = { (rng: inout SeededGenerator) -> [UInt8] in
            (0..<Int.random(in: 0..<60, using: &rng)).map { _ in
                Int.random(in: 0..<6, using: &rng) == 0 ? special.randomElement(using: &rng)! : UInt8.random(in: 0x20...0x7E, using: &rng)
            }
        }
        var expected: [[UInt8]: [UInt8]] = [:]
        for _ in 0..<500 {
            var key = draw(&rng)
            if key.isEmpty { key = [0x6B] }
            expected[key] = draw(&rng)
        }
        var map = OrderedMap()
        for (key, value) in expected { map.updateValue(value, forKey: key, version: 1) }
        let document = SnapshotCodec.encode(map, header: Self.header)
        _ = try JSONSerialization.jsonObject(with: Data(document))
        var decoded: [[UInt8]: [UInt8]] = [:]
        try SnapshotCodec.decode(document).map.forEach { key, value, _ in decoded[key] = value; return true }
        #expect(decoded == expected)
    }

    @Test("an empty map and one large value round-trip; chunked output equals one-shot output")
    func emptyAndChunked() throws {
        let empty = SnapshotCodec.encode(OrderedMap(), header: Self.header)
        let (h, m) = try SnapshotCodec.decode(empty)
        #expect(h == Self.header)
        #expect(m.count == 0)

        var rng = SeededGenerator(seed: 11)
        var pairs = Self.pairs
        for i in 0..<200 { pairs.append((b("k\(i)"), rng.bytes(Int.random(in: 0..<90, using: &rng)))) }
        pairs.append((b("big"), rng.bytes(200_000)))
        let map = Self.map(pairs)
        let whole = SnapshotCodec.encode(map, header: Self.header)
        for chunkSize in [1, 7, 4096] {
            var chunked: [UInt8] = []
            var calls = 0
            SnapshotCodec.encode(map, header: Self.header, chunkSize: chunkSize) { (chunk: UnsafeRawBufferPointer) throws(Never) in
                chunked.append(contentsOf: chunk)
                calls += 1
            }
            #expect(chunked == whole, "chunk size \(chunkSize)")
            #expect(calls > 1)
        }
        #expect(Self.entries(try SnapshotCodec.decode(whole).map) == Self.entries(map))
    }

    @Test("the document is real JSON: JSONSerialization reads the same strings and base64 bytes")
    func isRealJSON() throws {
        let document = SnapshotCodec.encode(Self.map(Self.pairs), header: Self.header)
        let object = try JSONSerialization.jsonObject(with: Data(document))
        let root = try #require(object as? [String: Any])
        #expect(root["format"] as? String == "actorkv-snapshot")
        #expect((root["version"] as? NSNumber)?.intValue == 3)
        #expect(root["namespace"] as? String == "config")
        #expect((root["lastSequence"] as? NSNumber)?.intValue == 42)
        #expect((root["count"] as? NSNumber)?.intValue == Self.pairs.count)
        #expect((root["crc32c"] as? String)?.count == 8)
        let entries = try #require(root["entries"] as? [[Any]])
        #expect(entries.count == Self.pairs.count)
        func bytes(_ item: Any) -> [UInt8]? {
            if let s = item as? String { return Array(s.utf8) }
            if let d = item as? [String: String], let text = d["base64"], let data = Data(base64Encoded: text) { return Array(data) }
            return nil
        }
        var seen: [[UInt8]: [UInt8]] = [:]
        var previous: [UInt8]?
        for entry in entries {
            let key = try #require(bytes(entry[0]))
            let value = try #require(bytes(entry[1]))
            if let previous { #expect(previous.lexicographicallyPrecedes(key), "keys ascend") }
            previous = key
            seen[key] = value
        }
        #expect(seen == Self.entries(Self.map(Self.pairs)))
    }

    @Test("a changed byte inside a value fails the checksum")
    func checksumMismatch() throws {
        let document = SnapshotCodec.encode(Self.map(Self.pairs), header: Self.header)
        let at = try #require(document.firstRange(of: b("\"value\""))).lowerBound + 2  // the 'a' of "value"
        var damaged = document
        damaged[at] = UInt8(ascii: "b")
        let failure = try #require(Self.failure(damaged))
        #expect(failure.reason.contains("checksum mismatch"))
        #expect(failure.offset == damaged.firstRange(of: b("\"crc32c\":"))!.upperBound)
        // The checksum text itself damaged.
        var badCRC = document
        badCRC[badCRC.count - 5] = badCRC[badCRC.count - 5] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
        #expect(Self.failure(badCRC)?.reason.contains("checksum mismatch") == true)
    }

    @Test("an unknown version is refused with the offset of the version number")
    func unknownVersion() throws {
        let document = SnapshotCodec.encode(Self.map(Self.pairs), header: Self.header)
        let range = try #require(document.firstRange(of: b("\"version\":3")))
        var v4 = document
        v4[range.upperBound - 1] = UInt8(ascii: "4")
        let failure = try #require(Self.failure(Self.resealed(v4)))
        #expect(failure.offset == range.upperBound - 1)
        #expect(failure.reason.contains("version 4"))
    }

    @Test("keys out of order or duplicated are refused at the entry")
    func keysOutOfOrder() throws {
        let body = "{\"format\":\"actorkv-snapshot\",\"version\":1,\"namespace\":\"config\",\"lastSequence\":3,\"createdAt\":0,\"count\":2,\"entries\":[\n"
        for entries in ["[\"b\",\"1\"],\n[\"a\",\"2\"]", "[\"a\",\"1\"],\n[\"a\",\"2\"]"] {
            let document = Self.resealed(b(body + entries + "\n],\"crc32c\":\"00000000\"}\n"))
            let failure = try #require(Self.failure(document))
            #expect(failure.reason.contains("out of order"))
            let second = body.utf8.count + entries.utf8.count - 9  // the second entry's '['
            #expect(failure.offset >= second - 1 && failure.offset <= second, "offset \(failure.offset), entry at \(second)")
        }
        // The same document in order is accepted (so the refusal above is about order).
        let ordered = Self.resealed(b(body + "[\"a\",\"1\"],\n[\"b\",\"2\"]\n],\"crc32c\":\"00000000\"}\n"))
        #expect(try SnapshotCodec.decode(ordered).map.count == 2)
    }

    @Test("the namespace in the header is the one written")
    func namespaceInHeader() throws {
        let document = SnapshotCodec.encode(Self.map(Self.pairs), header: SnapshotCodec.Header(namespace: "other", lastSequence: 1, createdAt: 2))
        #expect(try SnapshotCodec.decode(document).header.namespace == "other")
    }

    @Test("where a namespace's life began empty is written only when not 0, and read back")
    func startedEmptyAtInHeader() throws {
        let header = SnapshotCodec.Header(namespace: "fresh", lastSequence: 9, createdAt: 2, startedEmptyAt: 7)
        let document = SnapshotCodec.encode(Self.map(Self.pairs), header: header)
        #expect(document.firstRange(of: b(",\"startedEmptyAt\":7,")) != nil)
        #expect(try SnapshotCodec.decode(document).header == header)
        let plain = SnapshotCodec.encode(Self.map(Self.pairs), header: Self.header)
        #expect(plain.firstRange(of: b("startedEmptyAt")) == nil, "a snapshot as earlier builds wrote it")
        #expect(try SnapshotCodec.decode(plain).header.startedEmptyAt == 0)
    }

    @Test("truncated documents, wrong counts, missing checksums and data after the end are refused")
    func malformedDocuments() throws {
        let document = SnapshotCodec.encode(Self.map(Self.pairs), header: Self.header)
        for cut in stride(from: 0, to: document.count - 1, by: 7) {
            #expect(Self.failure(Array(document[..<cut])) != nil, "cut at \(cut)")
        }
        let wrongCount = String(decoding: document, as: UTF8.self)
            .replacingOccurrences(of: "\"count\":\(Self.pairs.count)", with: "\"count\":\(Self.pairs.count + 1)")
        #expect(Self.failure(Self.resealed(b(wrongCount)))?.reason.contains("count") == true)
        let noCRC = Array(document[..<document.firstRange(of: b(",\"crc32c\""))!.lowerBound]) + b("}")
        #expect(Self.failure(noCRC)?.reason.contains("crc32c") == true)
        #expect(Self.failure(document + b("{}")) != nil)
        let notOurs = String(decoding: document, as: UTF8.self).replacingOccurrences(of: "actorkv-snapshot", with: "something-else")
        #expect(Self.failure(Self.resealed(b(notOurs)))?.reason.contains("not an actorkv snapshot") == true)
        let badBase64 = String(decoding: document, as: UTF8.self).replacingOccurrences(of: "wIDtoID0kICA", with: "wIDtoID0kIC!")
        #expect(Self.failure(Self.resealed(b(badBase64)))?.reason.contains("base64") == true)
    }
}
