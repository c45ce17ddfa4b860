import ActorKVProtocol
import Testing

/// Inline requests: Redis's sdssplitargs rules, line endings, empty lines, the length limit.
@Suite("Inline requests")
struct InlineParsingTests {
    static let seed = TestEnvironment.seed(for: "InlineParsingTests")

    static let valid: [RequestCase] = [
        RequestCase("CRLF", "PING\r\n", args("PING")),
        RequestCase("LF only", "PING\n", args("PING")),
        RequestCase("several words", "SET key value\r\n", args("SET", "key", "value")),
        RequestCase("runs of spaces and tabs", "  SET \t key\t\tvalue   \r\n", args("SET", "key", "value")),
        RequestCase("a lone \\r separates words", "a\rb\r\n", args("a", "b")),
        // Redis ends an unquoted word only at space, \t, \n, \r: `ECHO a\vb` echoes `a\vb`.
        RequestCase("\\v and \\f inside a word are part of it", "ECHO a\u{0B}b c\u{0C}d\u{0B}\r\n",
                    args("ECHO", "a\u{0B}b", "c\u{0C}d\u{0B}")),
        RequestCase("\\v and \\f before a word are skipped", "\u{0B}ECHO \u{0C}\u{0B}a\u{0C}\n", args("ECHO", "a\u{0C}")),
        RequestCase("a word may open a quote after \\v", "a\u{0B}\"b c\"\n", args("a\u{0B}b c")),
        RequestCase("closing quote followed by \\v or \\f", "\"a\"\u{0B}'b'\u{0C}c\n", args("a", "b", "c")),
        RequestCase("empty lines are skipped", "\r\n\n   \r\n\t\nPING\n\n", args("PING")),
        RequestCase("only empty lines", "\r\n\n \t \r\n"),
        RequestCase("pipelined lines", "PING\r\nECHO hi\nGET k\r\n", args("PING"), args("ECHO", "hi"), args("GET", "k")),
        RequestCase("double and single quotes", "SET \"a b\" 'c d'\n", args("SET", "a b", "c d")),
        RequestCase("empty quoted words", "SET \"\" ''\r\n", args("SET", "", "")),
        RequestCase("escapes in double quotes", #""\n\r\t\b\a\\\"" x"# + "\n",
                    [[10, 13, 9, 8, 7, 92, 34], bytes("x")]),
        RequestCase("hex escapes either case", #""\x41\x4a\x4A\x00\xff""# + "\n", [[0x41, 0x4A, 0x4A, 0, 0xFF]]),
        RequestCase("\\x without two hex digits is x", #""\x4" "\xZZ" "\x""# + "\n", args("x4", "xZZ", "x")),
        RequestCase("any other escaped character is itself", #""\q\'\ \$""# + "\n", args("q' $")),
        RequestCase("single quotes are literal but for \\'", #"'it\'s' 'a\nb\"'"# + "\n", args("it's", #"a\nb\""#)),
        RequestCase("quotes of the other kind inside", #"'a"b' "a'b""# + "\n", args(#"a"b"#, "a'b")),
        RequestCase("a quote may open mid-word", #"ab"c d" x'y z'"# + "\n", args("abc d", "xy z")),
        RequestCase("closing quote followed by a tab", "\"a\"\t'b'\r\n", args("a", "b")),
        RequestCase("quoted CR is kept", "\"a\rb\"\r\n", args("a\rb")),
        RequestCase("quoted separators are kept", "\"a b\tc\"\n", args("a b\tc")),
        RequestCase("NUL is an ordinary byte", "a\u{0}b\n", args("a\u{0}b")),
        RequestCase("backslash outside quotes is literal", #"a\nb"# + "\n", args(#"a\nb"#)),
        RequestCase("UTF-8 words", "SET ключ 値\r\n", args("SET", "ключ", "値")),
        RequestCase("leading space then * is inline", " *1\r\n", args("*1")),
        RequestCase("$ and digits inline", "$4\r\nPING\r\n", args("$4"), args("PING")),
        RequestCase("words at maxArguments", "a b\t'c'\r\n", limits: ProtocolLimits(maxArguments: 3), args("a", "b", "c")),
        RequestCase("words at maxBulkLength, counted after unquoting", #"abcd 'wxyz' "\x00\x01\\\"""# + "\n",
                    limits: ProtocolLimits(maxBulkLength: 4), args("abcd", "wxyz", "\u{0}\u{1}\\\"")),
        RequestCase("inline and multibulk mixed", "PING\r\n*1\r\n$4\r\nPING\r\nECHO x\n", args("PING"), args("PING"), args("ECHO", "x")),
    ]

    @Test("valid inline input decodes the same in every chunking", arguments: valid)
    func decodesValid(_ row: RequestCase) {
        expectDecodes(row.input, row.expected, limits: row.limits, seed: Self.seed)
    }

    static let unbalanced = "unbalanced quotes in request"
    static let tooBig = "too big inline request: over the limit of 16 bytes"
    static let small = ProtocolLimits(maxInlineLength: 16)
    static let tooMany = "too many inline arguments: over the limit of 3"
    static func wordTooBig(_ length: Int) -> String { "too big inline argument: \(length) bytes, over the limit of 10" }
    static let threeArguments = ProtocolLimits(maxArguments: 3)
    static let tenByteWords = ProtocolLimits(maxBulkLength: 10)

    static let invalid: [RequestErrorCase] = [
        RequestErrorCase("unterminated double quote", "GET \"abc\r\n", unbalanced),
        RequestErrorCase("unterminated single quote", "GET 'abc\n", unbalanced),
        RequestErrorCase("double quote closed then a letter", "GET \"abc\"def\n", unbalanced),
        RequestErrorCase("single quote closed then a letter", "GET 'a'b\n", unbalanced),
        RequestErrorCase("closing quote followed by a quote", "\"a\"\"b\"\n", unbalanced),
        RequestErrorCase("escaped closing quote", #"GET "a\""# + "\n", unbalanced),
        RequestErrorCase("trailing backslash in quotes", #"GET "abc\"# + "\r\n", unbalanced),
        RequestErrorCase("error after good requests", "PING\r\nGET \"x\n", unbalanced, before: [args("PING")]),
        RequestErrorCase("line one byte over the limit", String(repeating: "a", count: 17) + "\n", tooBig, limits: small),
        RequestErrorCase("line plus CR over the limit", String(repeating: "a", count: 17) + "\r\n", tooBig, limits: small),
        RequestErrorCase("endless line", String(repeating: "x", count: 40), tooBig, limits: small),
        RequestErrorCase("CR not followed by LF at the limit", String(repeating: "a", count: 16) + "\rab", tooBig, limits: small),
        RequestErrorCase("endless line with default limit", String(repeating: "x ", count: 40_000),
                         "too big inline request: over the limit of 65536 bytes"),
        // The request limits hold for inline requests as for multibulk ones.
        RequestErrorCase("more words than maxArguments", "EXISTS ns a b c d e\r\n", tooMany, limits: threeArguments),
        RequestErrorCase("one word over maxArguments, after good lines", "a b c\nPING\r\na b c d\n", tooMany,
                         before: [args("a", "b", "c"), args("PING")], limits: threeArguments),
        RequestErrorCase("a quoted word over maxArguments", "a b c ''\n", tooMany, limits: threeArguments),
        RequestErrorCase("word over maxBulkLength", "ECHO " + String(repeating: "w", count: 43) + "\r\n", wordTooBig(43),
                         limits: tenByteWords),
        RequestErrorCase("quoted word over maxBulkLength after unquoting", #"ECHO "abc\x00def\nghi""# + "\n", wordTooBig(11),
                         limits: tenByteWords),
        RequestErrorCase("word over maxBulkLength after a quote opened mid-word", "ECHO abcdef'ghijk'\n", wordTooBig(11),
                         limits: tenByteWords),
        RequestErrorCase("the first problem from the left is reported", "a 'b c d\n", unbalanced, limits: threeArguments),
    ]

    @Test("invalid inline input fails the same in every chunking", arguments: invalid)
    func failsInvalid(_ row: RequestErrorCase) {
        expectFails(row.input, row.message, before: row.before, limits: row.limits, seed: Self.seed)
    }

    @Test("a line of exactly maxInlineLength bytes is accepted, with LF or CRLF")
    func lineAtTheLimit() {
        let word = String(repeating: "a", count: 16)
        expectDecodes(bytes(word + "\n" + word + "\r\n"), [args(word), args(word)], limits: Self.small, seed: Self.seed)
    }

    @Test("a partial line up to the limit waits for more bytes")
    func partialLineWaits() throws {
        var decoder = RequestDecoder(limits: Self.small)
        decoder.append(bytes(String(repeating: "a", count: 16) + "\r"))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 17)
        #expect(decoder.hasPartialRequest)
        decoder.append(bytes("\n"))
        #expect(try decoder.next() == args(String(repeating: "a", count: 16)))
        #expect(decoder.bufferedByteCount == 0)
        #expect(!decoder.hasPartialRequest)
    }
}
