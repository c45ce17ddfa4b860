import ActorKVProtocol
import Foundation
import Testing

/// The bytes of `text`, one per character, each character's code point (at most U+00FF) being
/// the byte: `latin1("a\u{E9}")` is `[0x61, 0xE9]`, so that tests can write any byte.
func latin1(_ text: String) -> [UInt8] {
    text.unicodeScalars.map { scalar in
        precondition(scalar.value <= 0xFF, "not a byte: \(scalar)")
        return UInt8(scalar.value)
    }
}

/// One pattern against one string, and whether Redis's `stringmatchlen` says it matches.
struct GlobCase: CustomTestStringConvertible, Sendable {
    let pattern: String
    let string: String
    let matches: Bool

    init(_ pattern: String, _ string: String, _ matches: Bool) {
        (self.pattern, self.string, self.matches) = (pattern, string, matches)
    }

    var testDescription: String { "\(show(latin1(pattern))) against \(show(latin1(string))): \(matches)" }
}

/// RedisGlob: Redis's `stringmatchlen`, feature by feature and edge case by edge case.
/// ``RedisGlobAgainstRedisTests`` asks a real redis-server every case here too (``allCases``),
/// and many more patterns.
@Suite("RedisGlob: Redis's glob patterns")
struct RedisGlobTests {
    /// Every case below, for ``RedisGlobAgainstRedisTests`` to ask a real redis-server too.
    static var allCases: [GlobCase] {
        literalCases + emptyStringCases + starCases + questionMarkCases + setCases + emptySetCases
            + rangeToBracketCases + unclosedSetCases + escapeCases + signedRangeCases
    }

    static let literalCases = [
        GlobCase("abc", "abc", true), GlobCase("abc", "abd", false), GlobCase("abc", "ab", false),
        GlobCase("abc", "abcd", false), GlobCase("ABC", "abc", false), GlobCase("a\u{0}b", "a\u{0}b", true),
        GlobCase("\u{E9}\u{FF}", "\u{E9}\u{FF}", true), GlobCase("\u{E9}", "\u{C9}", false),
    ]

    static let emptyStringCases = [
        GlobCase("", "", true), GlobCase("", "a", false), GlobCase("*", "", false), GlobCase("**", "", false),
        GlobCase("?", "", false), GlobCase("[^]", "", false), GlobCase("a", "", false),
    ]

    static let starCases = [
        GlobCase("*", "anything", true), GlobCase("a*", "a", true), GlobCase("a*", "abc", true),
        GlobCase("a*", "ba", false), GlobCase("*c", "abc", true), GlobCase("*c", "abd", false),
        GlobCase("a*c", "ac", true), GlobCase("a*c", "abbbc", true), GlobCase("a*c", "abcd", false),
        GlobCase("**", "x", true), GlobCase("a**b", "ab", true), GlobCase("*a*", "bab", true),
        GlobCase("*a*", "bbb", false), GlobCase("a*b*c", "axxbyyc", true), GlobCase("a*b*c", "acb", false),
        GlobCase("*ab*ab", "abab", true), GlobCase("*ab*ab", "aab", false), GlobCase("a*b*", "ab", true),
        GlobCase("*aa*aa*", "aaaa", true), GlobCase("*aa*aa*", "aaa", false), GlobCase("*\u{0}*", "x\u{0}y", true),
    ]

    static let questionMarkCases = [
        GlobCase("?", "a", true), GlobCase("?", "ab", false), GlobCase("a?c", "abc", true),
        GlobCase("a?c", "ac", false), GlobCase("??", "\u{FF}\u{0}", true), GlobCase("*?", "a", true),
        GlobCase("?*?", "a", false),
    ]

    static let setCases = [
        GlobCase("[abc]", "b", true), GlobCase("[abc]", "d", false), GlobCase("[abc]", "ab", false),
        GlobCase("[a-c]", "b", true), GlobCase("[a-c]", "d", false), GlobCase("[c-a]", "b", true),
        GlobCase("[c-a]", "d", false), GlobCase("[^abc]", "d", true), GlobCase("[^abc]", "a", false),
        GlobCase("[^a-c]", "b", false), GlobCase("[^c-a]", "z", true), GlobCase("[*]", "*", true),
        GlobCase("[*]", "a", false), GlobCase("[?]", "?", true), GlobCase("[?]", "a", false),
        GlobCase("[a-c-e]", "-", true), GlobCase("[a-c-e]", "e", true), GlobCase("[a-c-e]", "d", false),
        GlobCase("[--/]", ".", true), GlobCase("[^^]", "^", false), GlobCase("[^^]", "a", true),
        GlobCase("[a^]", "^", true), GlobCase("x[0-9]*", "x7yz", true), GlobCase("[[]", "[", true),
    ]

    static let emptySetCases = [
        GlobCase("[]", "a", false), GlobCase("[]", "]", false), GlobCase("[]a]", "]a]", false),
        GlobCase("[]a]", "a", false), GlobCase("[^]", "x", true), GlobCase("[^]a]", "xa]", true),
        GlobCase("[^]a]", "x", false),
    ]

    static let rangeToBracketCases = [
        GlobCase("[a-]", "a", true), GlobCase("[a-]", "_", true), GlobCase("[a-]", "]", true),
        GlobCase("[a-]", "-", false), GlobCase("[a-]", "b", false), GlobCase("[a-]b]", "b", true),
        GlobCase("[a-]b]", "_", true), GlobCase("[a-]b]", "b]", false), GlobCase("[a-", "-", true),
        GlobCase("[a-", "a", true), GlobCase("[a-", "b", false),
    ]

    static let unclosedSetCases = [
        GlobCase("[abc", "b", true), GlobCase("[abc", "[", false), GlobCase("[abc", "ab", false),
        GlobCase("[", "[", false), GlobCase("[", "", false), GlobCase("x[", "x[", false),
        GlobCase("x[", "x", false), GlobCase("[^", "x", true), GlobCase("[^", "xy", false),
        GlobCase("[^a", "a", false), GlobCase("[^a", "b", true), GlobCase("[\\", "\\", true),
        GlobCase("*[ab", "zzb", true),
    ]

    static let escapeCases = [
        GlobCase("\\*", "*", true), GlobCase("\\*", "a", false), GlobCase("\\?", "?", true),
        GlobCase("\\?", "a", false), GlobCase("\\[a]", "[a]", true), GlobCase("\\[a]", "a", false),
        GlobCase("\\a", "a", true), GlobCase("\\\\", "\\", true), GlobCase("a\\", "a\\", true),
        GlobCase("a\\", "a", false), GlobCase("\\", "\\", true), GlobCase("[\\]]", "]", true),
        GlobCase("[\\]]", "\\", false), GlobCase("[a\\-z]", "-", true), GlobCase("[a\\-z]", "b", false),
        GlobCase("[\\^a]", "^", true), GlobCase("[\\\\]", "\\", true), GlobCase("*\\*", "ab*", true),
        GlobCase("*\\*", "ab", false), GlobCase("[a-\\]", "\\", true), GlobCase("[a-\\]", "_", true),
    ]

    static let signedRangeCases = [
        GlobCase("[a-\u{E9}]", "\u{F0}", true), GlobCase("[a-\u{E9}]", "\u{01}", true),
        GlobCase("[a-\u{E9}]", "a", true), GlobCase("[a-\u{E9}]", "b", false), GlobCase("[a-\u{E9}]", "\u{80}", false),
        GlobCase("[\u{80}-\u{FF}]", "\u{90}", true), GlobCase("[\u{80}-\u{FF}]", "a", false),
        GlobCase("[\u{FF}-\u{1}]", "\u{0}", true), GlobCase("[\u{FF}-\u{1}]", "\u{2}", false),
    ]

    @Test("literal bytes match themselves, case-sensitively, and the whole string", arguments: Self.literalCases)
    func literals(_ test: GlobCase) { check(test) }

    @Test("the empty string matches only the empty pattern, not even *", arguments: Self.emptyStringCases)
    func emptyString(_ test: GlobCase) { check(test) }

    @Test("* matches any run of bytes, also none", arguments: Self.starCases)
    func star(_ test: GlobCase) { check(test) }

    @Test("? matches exactly one byte, whatever it is", arguments: Self.questionMarkCases)
    func questionMark(_ test: GlobCase) { check(test) }

    @Test("[...] matches one byte of a set of bytes and ranges; [^...] one byte outside it", arguments: Self.setCases)
    func sets(_ test: GlobCase) { check(test) }

    @Test("[] matches nothing, [^] any byte, and a ] right after [ closes the set", arguments: Self.emptySetCases)
    func emptySets(_ test: GlobCase) { check(test) }

    @Test("a - before the closing ] makes a range ending in ], and the set goes on", arguments: Self.rangeToBracketCases)
    func rangeToBracket(_ test: GlobCase) { check(test) }

    @Test("an unclosed [ runs to the end of the pattern; [ alone matches nothing", arguments: Self.unclosedSetCases)
    func unclosedSets(_ test: GlobCase) { check(test) }

    @Test("\\ makes the next byte literal, also inside a set; a trailing \\ is itself", arguments: Self.escapeCases)
    func escapes(_ test: GlobCase) { check(test) }

    @Test("range ends compare as C's signed char: bytes from 0x80 on sort below 0x00", arguments: Self.signedRangeCases)
    func signedRanges(_ test: GlobCase) { check(test) }

    @Test("a pattern needing more than 1000 nested runs of * matches nothing, as in Redis")
    func nestingLimit() {
        let thousand = String(repeating: "*a", count: RedisGlob.nestingLimit)
        let string = String(repeating: "a", count: RedisGlob.nestingLimit + 1)
        #expect(RedisGlob.matches(latin1(thousand), latin1(string)))
        #expect(RedisGlob.matches(latin1(thousand + "*"), latin1(string)), "a run of * at the end does not nest")
        #expect(RedisGlob.matches(latin1(thousand + "**"), latin1(string)))
        #expect(!RedisGlob.matches(latin1(thousand + "*a"), latin1(string)))
        #expect(!RedisGlob.matches(latin1(thousand + "*?"), latin1(string)))
    }

    @Test("pathological patterns take time linear in the string, not exponential")
    func noExponentialBacktracking() {
        let string = [UInt8](repeating: UInt8(ascii: "a"), count: 200_000)
        let patterns = ["a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b*",
                        String(repeating: "*?", count: 40) + "b", "*aaaaaaaaaaaaaaaaaaaab*"]
        let clock = ContinuousClock()
        for pattern in patterns {
            let glob = RedisGlob(latin1(pattern))
            let elapsed = clock.measure { #expect(!glob.matches(string), "\(pattern)") }
            // Backtracking would take longer than the age of the universe; linear takes milliseconds.
            #expect(elapsed < .seconds(5), "\(pattern) took \(elapsed)")
        }
    }

    @Test("only the pattern * is match-all, which Redis's SCAN and KEYS do not run the matcher for",
          arguments: [("*", true), ("**", false), ("", false), ("\\*", false), ("a*", false), ("[*]", false)])
    func matchAll(_ pattern: String, _ isMatchAll: Bool) {
        #expect(RedisGlob(latin1(pattern)).isMatchAll == isMatchAll)
    }

    @Test("a compiled pattern gives the same answers on arrays, slices and non-contiguous collections")
    func inputKinds() {
        let glob = RedisGlob(latin1("x[a-c]*z"))
        let array = latin1("--xbyyz--")
        #expect(glob.matches(array[2..<7]))
        #expect(!glob.matches(array[1..<7]))
        #expect(glob.matches(array[2..<7].lazy.map { $0 }))
        #expect(!glob.matches(array.lazy.map { $0 }))
        #expect(RedisGlob.matches(latin1("x[a-c]*z").lazy.map { $0 }, latin1("xbz")))
    }

    /// Checks one case, through both the compiled and the one-off entry point.
    private func check(_ test: GlobCase, sourceLocation: SourceLocation = #_sourceLocation) {
        let pattern = latin1(test.pattern), string = latin1(test.string)
        #expect(RedisGlob(pattern).matches(string) == test.matches, sourceLocation: sourceLocation)
        #expect(RedisGlob.matches(pattern, string) == test.matches, sourceLocation: sourceLocation)
    }
}
