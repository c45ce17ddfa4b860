import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// Reply encoding, ReplyDecoder tables, and random round trips in every chunking.
@Suite("Replies")
struct ReplyTests {
    static let seed = TestEnvironment.seed(for: "ReplyTests")

    struct Row: Sendable, CustomTestStringConvertible {
        let reply: Reply
        let wire: String
        var testDescription: String { show(Array(wire.utf8)) }
    }

    static let encodings: [Row] = [
        Row(reply: .simple("OK"), wire: "+OK\r\n"),
        Row(reply: .simple(""), wire: "+\r\n"),
        Row(reply: .error("ERR unknown command"), wire: "-ERR unknown command\r\n"),
        Row(reply: .integer(0), wire: ":0\r\n"),
        Row(reply: .integer(-5), wire: ":-5\r\n"),
        Row(reply: .integer(1234567890), wire: ":1234567890\r\n"),
        Row(reply: .integer(.max), wire: ":9223372036854775807\r\n"),
        Row(reply: .integer(.min), wire: ":-9223372036854775808\r\n"),
        Row(reply: .bulk(Array("abc".utf8)), wire: "$3\r\nabc\r\n"),
        Row(reply: .bulk([]), wire: "$0\r\n\r\n"),
        Row(reply: .bulk(Array("a\r\nb".utf8)), wire: "$4\r\na\r\nb\r\n"),
        Row(reply: .null, wire: "$-1\r\n"),
        Row(reply: .array([]), wire: "*0\r\n"),
        Row(reply: .array([.integer(1), .bulk(Array("x".utf8)), .null, .array([.simple("OK")])]),
            wire: "*4\r\n:1\r\n$1\r\nx\r\n$-1\r\n*1\r\n+OK\r\n"),
    ]

    @Test("replies encode to the RESP2 bytes", arguments: encodings)
    func encodes(_ row: Row) {
        #expect(row.reply.encoded == Array(row.wire.utf8))
        var buffer = Array("prefix".utf8)
        row.reply.encode(into: &buffer)
        #expect(buffer == Array(("prefix" + row.wire).utf8))
    }

    @Test("RESP2 bytes decode to the replies in every chunking", arguments: encodings)
    func decodes(_ row: Row) {
        expectReplies(Array(row.wire.utf8), [row.reply])
    }

    @Test("CR and LF in status and error lines are sent as spaces")
    func lineBreaksBecomeSpaces() {
        #expect(Reply.error("ERR a\r\nb\nc").encoded == Array("-ERR a  b c\r\n".utf8))
        #expect(Reply.simple("x\ry").encoded == Array("+x y\r\n".utf8))
        // Longer than a small string's 15 bytes: kept in a buffer of its own, read in place too.
        let long = String(repeating: "abcdefgh", count: 8)
        #expect(Reply.error("ERR \(long)\n\(long)").encoded == Array("-ERR \(long) \(long)\r\n".utf8))
        #expect(Reply.simple("h\u{e9}llo\r\n\(long)").encoded == Array("+h\u{e9}llo  \(long)\r\n".utf8))
    }

    @Test("*-1 decodes as null, and a UTF-8 status line keeps its text")
    func decodeSpecials() {
        expectReplies(Array("*-1\r\n+h\u{e9}llo \u{1F600}\r\n".utf8), [.null, .simple("h\u{e9}llo \u{1F600}")])
    }

    struct ErrorRow: Sendable, CustomTestStringConvertible {
        let wire: String
        let message: String
        var limits = ProtocolLimits()
        var testDescription: String { show(Array(wire.utf8)) }
    }

    static let errors: [ErrorRow] = [
        ErrorRow(wire: "?x\r\n", message: "unexpected reply type '?'"),
        ErrorRow(wire: ":abc\r\n", message: "invalid integer reply"),
        ErrorRow(wire: ":\r\n", message: "invalid integer reply"),
        ErrorRow(wire: ":9223372036854775808\r\n", message: "invalid integer reply"),
        ErrorRow(wire: "$-2\r\n", message: "invalid bulk length"),
        ErrorRow(wire: "$x\r\n", message: "invalid bulk length"),
        ErrorRow(wire: "$5\r\n", message: "invalid bulk length: 5 bytes, over the limit of 4", limits: ProtocolLimits(maxBulkLength: 4)),
        ErrorRow(wire: "*-2\r\n", message: "invalid multibulk length"),
        ErrorRow(wire: "*3\r\n", message: "invalid multibulk length: 3 arguments, over the limit of 2", limits: ProtocolLimits(maxArguments: 2)),
        ErrorRow(wire: "$1\r\nab\r\n", message: "expected '\\r\\n' after bulk data"),
        ErrorRow(wire: "+OK\n", message: "invalid reply line"),
        ErrorRow(wire: "+" + String(repeating: "a", count: 9) + "\r\n", message: "too big reply line",
                 limits: ProtocolLimits(maxInlineLength: 8)),
        ErrorRow(wire: "-" + String(repeating: "a", count: 40), message: "too big reply line",
                 limits: ProtocolLimits(maxInlineLength: 8)),
        ErrorRow(wire: String(repeating: "*1\r\n", count: ReplyDecoder.maxNestingDepth + 1) + ":1\r\n",
                 message: "too deeply nested reply"),
    ]

    @Test("invalid replies fail the same in every chunking", arguments: errors)
    func fails(_ row: ErrorRow) {
        for chunking in Chunking.all(seed: Self.seed) {
            let outcome = Feeder.replies(Array(row.wire.utf8), chunking, limits: row.limits)
            #expect(outcome == DecodeOutcome(error: ProtocolError(row.message)), "fed \(chunking)")
        }
    }

    @Test("a status line at maxInlineLength and nesting at maxNestingDepth are accepted")
    func atTheLimits() {
        let text = String(repeating: "a", count: 8)
        expectReplies(Array("+\(text)\r\n".utf8), [.simple(text)], limits: ProtocolLimits(maxInlineLength: 8))
        var nested = Reply.integer(1)
        for _ in 0..<ReplyDecoder.maxNestingDepth { nested = .array([nested]) }
        expectReplies(nested.encoded, [nested])
    }

    @Test("random replies round-trip in every chunking")
    func randomRoundTrip() {
        var rng = SeededGenerator(seed: Self.seed)
        var tried = 0
        for _ in 0..<200 {
            let replies = (0..<Int.random(in: 1...6, using: &rng)).map { _ in ReplyGenerator.reply(depth: 3, using: &rng) }
            var wire: [UInt8] = []
            for reply in replies { reply.encode(into: &wire) }
            expectReplies(wire, replies)
            tried += 1
        }
        print("[ReplyTests] round-tripped \(tried) random reply batches")
    }

    /// Checks that `wire` decodes to `expected`, nothing left over, in every chunking.
    private func expectReplies(
        _ wire: [UInt8], _ expected: [Reply], limits: ProtocolLimits = ProtocolLimits(),
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for chunking in Chunking.all(seed: Self.seed) {
            let outcome = Feeder.replies(wire, chunking, limits: limits)
            #expect(outcome == DecodeOutcome(outputs: expected), "\(show(wire)) fed \(chunking)", sourceLocation: sourceLocation)
        }
    }
}
