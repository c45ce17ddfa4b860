import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// BulkStrings: strings packed in one buffer encode as the bulk strings they stand for, and a
/// reply of them is the array or map of bulks it is sent as.
@Suite("Packed bulk strings")
struct BulkStringsTests {
    static let seed = TestEnvironment.seed(for: "BulkStringsTests")

    @Test("each string, of every length where the length's digits change, encodes as Reply.bulk does; encodedSize is exact; any range encodes as its strings")
    func encodesAsBulks() {
        var rng = SeededGenerator(seed: Self.seed)
        let lengths = [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1001, 9999, 10_000, 70_000]
        for _ in 0..<50 {
            let strings = (0..<Int.random(in: 0...30, using: &rng)).map { _ in
                (0..<lengths.randomElement(using: &rng)!).map { _ in UInt8.random(in: 0...255, using: &rng) }
            }
            let packed = BulkStrings(strings)
            #expect(packed.count == strings.count && packed.isEmpty == strings.isEmpty)
            #expect((0..<packed.count).allSatisfy { Array(packed[$0]) == strings[$0] })
            var expected: [UInt8] = []
            for string in strings { Reply.bulk(string).encode(into: &expected) }
            var encoded: [UInt8] = [7]  // appended after what the buffer holds
            packed.encode(0..<packed.count, into: &encoded)
            #expect(encoded == [7] + expected)
            #expect(packed.encodedSize == expected.count)
            let lower = Int.random(in: 0...packed.count, using: &rng), upper = Int.random(in: lower...packed.count, using: &rng)
            var part: [UInt8] = []
            packed.encode(lower..<upper, into: &part)
            var partExpected: [UInt8] = []
            for string in strings[lower..<upper] { Reply.bulk(string).encode(into: &partExpected) }
            #expect(part == partExpected, "strings \(lower)..<\(upper) of \(packed.count)")
        }
    }

    @Test("a reply of packed strings equals the array or map of bulks it stands for, and nothing else; unpacked gives that form")
    func equality() {
        let strings = [Array("a".utf8), Array("1".utf8)]
        let bulks = strings.map(Reply.bulk)
        #expect(Reply.bulks(BulkStrings(strings), asMap: true) == .map(bulks))
        #expect(Reply.map(bulks) == .bulks(BulkStrings(strings), asMap: true))
        #expect(Reply.bulks(BulkStrings(strings), asMap: false) == .array(bulks))
        #expect(Reply.bulks(BulkStrings(strings), asMap: false) != .map(bulks))
        #expect(Reply.bulks(BulkStrings(strings), asMap: true) != .bulks(BulkStrings(strings), asMap: false))
        #expect(Reply.bulks(BulkStrings(strings), asMap: false) != .array([.bulk(strings[0])]))
        #expect(Reply.array([.integer(1), .bulks(BulkStrings(strings), asMap: false)]) == .array([.integer(1), .array(bulks)]))
        #expect(Reply.bulks(BulkStrings(strings), asMap: true).unpacked == .map(bulks))
        guard case .map(let elements) = Reply.bulks(BulkStrings(strings), asMap: true).unpacked else { Issue.record("not a map"); return }
        #expect(elements == bulks)
        #expect(Reply.integer(3).unpacked == .integer(3))
        #expect(Reply.null != .nullArray && Reply.nullArray == .nullArray)
    }
}
