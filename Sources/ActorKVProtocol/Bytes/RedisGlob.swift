/// A glob-style pattern, matched against byte strings exactly as Redis's `stringmatchlen` does
/// it (case-sensitive, as `KEYS`, `SCAN … MATCH` and `HSCAN … MATCH` use it): the `MATCH`
/// filter of HSCAN. Compile a pattern once, then ask ``matches(_:)`` of every field of a page.
///
/// The pattern language, with Redis's edge cases:
/// - `*` matches any run of bytes, also none; `**` is the same as `*`.
/// - `?` matches any one byte.
/// - `[…]` matches one byte from a set: bytes, ranges `a-z` (a reversed range `z-a` is the same
///   range), `\x` for the byte `x` itself; `[^…]` matches one byte not in the set. A set ends at
///   the first `]` that is neither escaped nor the end of a range (`[a-]` is the range from `]`
///   to `a`, still open). `[]` matches nothing and `[^]` any byte; a set left open runs to the end
///   of the pattern (`[ab` is `[ab]`, and `[` alone matches nothing). Range ends compare as C's
///   signed `char` does on x86-64, so `[a-\xE9]` holds 0x00…0x61 and 0xE9…0xFF.
/// - `\x` matches the byte `x`; a `\` at the very end matches a `\`.
/// - The empty string matches only the empty pattern (not even `*`); Redis's SCAN family and
///   KEYS skip the matcher when the pattern is exactly `*` (see ``isMatchAll``).
/// - A pattern with more than ``nestingLimit`` runs of `*` before its last byte matches nothing,
///   as Redis refuses to nest its matcher deeper than that (CVE-2024-31228).
///
/// Matching never backtracks exponentially (Redis needed two CVE fixes for `a*a*a*…b`): the
/// pieces between runs of `*` each match a fixed number of bytes, so placing each piece at its
/// leftmost fit after the previous one is the only placement worth trying. A match costs at
/// most the pattern's length times the string's, and usually about the string's length.
public struct RedisGlob: Sendable {
    /// How deep Redis nests its matcher: a pattern needing more runs of `*` than this before its
    /// last byte matches no non-empty string.
    public static let nestingLimit = 1000

    /// The byte sets of the pattern's one-byte pieces (literal, `?`, `[…]`), in order.
    private let sets: [ByteSet]
    /// The ranges of `sets` between runs of `*`: one range if there is no `*`, else one more
    /// than the runs of `*` (the first before the first run, the last after the last run).
    private let pieces: [Range<Int>]
    /// Whether the pattern is empty (the only pattern the empty string matches).
    private let isEmptyPattern: Bool
    /// Whether the pattern has more than ``nestingLimit`` runs of `*` before its last byte.
    private let nestsTooDeep: Bool

    /// Whether the pattern is exactly `*`, which Redis's SCAN family and KEYS treat as "no
    /// filter" without calling the matcher: they return the empty key or field too, which
    /// ``matches(_:)``, like `stringmatchlen`, does not match. HSCAN should do the same.
    public let isMatchAll: Bool

    /// Compiles `pattern`. Every byte string is a pattern: there is no syntax error.
    public init(_ pattern: some Collection<UInt8>) {
        let bytes = Array(pattern)
        var parser = Parser(bytes)
        parser.parseAll()
        sets = parser.sets
        pieces = parser.pieces
        isEmptyPattern = bytes.isEmpty
        isMatchAll = bytes == [UInt8(ascii: "*")]
        nestsTooDeep = parser.nestingRuns > Self.nestingLimit
    }

    /// Whether `pattern` matches `string`, as `stringmatchlen(pattern, string, nocase: 0)` says.
    /// Compiles the pattern on every call: keep a ``RedisGlob`` to match many strings.
    public static func matches(_ pattern: some Collection<UInt8>, _ string: some Collection<UInt8>) -> Bool {
        RedisGlob(pattern).matches(string)
    }

    /// Whether the pattern matches the whole of `string`.
    public func matches(_ string: some Collection<UInt8>) -> Bool {
        if let answer = string.withContiguousStorageIfAvailable({ matches(buffer: $0) }) { return answer }
        return Array(string).withUnsafeBufferPointer { matches(buffer: $0) }
    }

    /// ``matches(_:)`` on contiguous bytes.
    private func matches(buffer string: UnsafeBufferPointer<UInt8>) -> Bool {
        if string.isEmpty { return isEmptyPattern }
        guard pieces.count > 1 else { return string.count == sets.count && fits(pieces[0], string, at: 0) }
        if nestsTooDeep { return false }
        let head = pieces[0], tail = pieces[pieces.count - 1]
        let end = string.count - tail.count
        guard head.count <= end, fits(head, string, at: 0), fits(tail, string, at: end) else { return false }
        var start = head.count
        for piece in pieces[1..<(pieces.count - 1)] {
            guard let found = firstFit(piece, string, from: start, before: end) else { return false }
            start = found + piece.count
        }
        return true
    }

    /// Whether `piece` matches the bytes of `string` from `offset` on (which must be enough).
    @inline(__always)
    private func fits(_ piece: Range<Int>, _ string: UnsafeBufferPointer<UInt8>, at offset: Int) -> Bool {
        var index = offset
        for set in piece {
            guard sets[set].contains(string[index]) else { return false }
            index += 1
        }
        return true
    }

    /// The first offset at or after `start` where `piece` matches and ends by `end`, or nil.
    private func firstFit(_ piece: Range<Int>, _ string: UnsafeBufferPointer<UInt8>, from start: Int,
                          before end: Int) -> Int? {
        let last = end - piece.count
        guard start <= last else { return nil }
        let first = sets[piece.lowerBound]
        for offset in start...last where first.contains(string[offset]) && fits(piece, string, at: offset) {
            return offset
        }
        return nil
    }
}

extension RedisGlob {
    /// A set of bytes, as 256 bits.
    struct ByteSet: Sendable, Equatable {
        private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

        /// The set holding only `byte`.
        init(_ byte: UInt8) { insert(byte) }

        /// The empty set.
        init() {}

        /// Every byte.
        static let all: ByteSet = {
            var set = ByteSet()
            set.words = (.max, .max, .max, .max)
            return set
        }()

        /// Whether `byte` is in the set.
        @inline(__always)
        func contains(_ byte: UInt8) -> Bool {
            let bit = UInt64(1) << (byte & 63)
            switch byte >> 6 {
            case 0: return words.0 & bit != 0
            case 1: return words.1 & bit != 0
            case 2: return words.2 & bit != 0
            default: return words.3 & bit != 0
            }
        }

        /// Adds `byte`.
        mutating func insert(_ byte: UInt8) {
            let bit = UInt64(1) << (byte & 63)
            switch byte >> 6 {
            case 0: words.0 |= bit
            case 1: words.1 |= bit
            case 2: words.2 |= bit
            default: words.3 |= bit
            }
        }

        /// Adds the bytes between `a` and `b`, both included, in either order, compared as C's
        /// signed `char` (so a range may wrap from 0xFF round to 0x00).
        mutating func insertRange(_ a: UInt8, _ b: UInt8) {
            let (x, y) = (Int(Int8(bitPattern: a)), Int(Int8(bitPattern: b)))
            for value in min(x, y)...max(x, y) { insert(UInt8(bitPattern: Int8(value))) }
        }

        /// Keeps exactly the bytes that were not in the set.
        mutating func invert() {
            words = (~words.0, ~words.1, ~words.2, ~words.3)
        }

        static func == (lhs: ByteSet, rhs: ByteSet) -> Bool {
            lhs.words == rhs.words
        }
    }

    /// Reads a pattern into byte sets and the pieces between runs of `*`, taking the same steps
    /// through the pattern as `stringmatchlen` does.
    private struct Parser {
        let pattern: [UInt8]
        var index = 0
        var sets: [ByteSet] = []
        var pieces: [Range<Int>] = []
        var pieceStart = 0
        /// Runs of `*` with something after them (each one a level of Redis's recursion).
        var nestingRuns = 0

        init(_ pattern: [UInt8]) { self.pattern = pattern }

        mutating func parseAll() {
            while index < pattern.count {
                switch pattern[index] {
                case UInt8(ascii: "*"): parseStars()
                case UInt8(ascii: "?"): sets.append(.all); index += 1
                case UInt8(ascii: "["): parseSet()
                case UInt8(ascii: "\\"): parseEscape()
                default: sets.append(ByteSet(pattern[index])); index += 1
                }
            }
            pieces.append(pieceStart..<sets.count)
        }

        /// A run of `*`: ends the current piece.
        mutating func parseStars() {
            while index < pattern.count && pattern[index] == UInt8(ascii: "*") { index += 1 }
            pieces.append(pieceStart..<sets.count)
            pieceStart = sets.count
            if index < pattern.count { nestingRuns += 1 }
        }

        /// `\x` is the byte `x`; a `\` that ends the pattern is itself.
        mutating func parseEscape() {
            if index + 1 < pattern.count { index += 1 }
            sets.append(ByteSet(pattern[index]))
            index += 1
        }

        /// `[…]` or `[^…]`, from the `[`; an unclosed one runs to the end of the pattern.
        mutating func parseSet() {
            index += 1
            let negated = index < pattern.count && pattern[index] == UInt8(ascii: "^")
            if negated { index += 1 }
            var set = ByteSet()
            while parseSetMember(into: &set) {}
            if negated { set.invert() }
            sets.append(set)
        }

        /// Reads one member of a set into `set`; false once the set has ended (past its `]`, or
        /// at the end of the pattern).
        mutating func parseSetMember(into set: inout ByteSet) -> Bool {
            let left = pattern.count - index
            if left >= 2 && pattern[index] == UInt8(ascii: "\\") {
                set.insert(pattern[index + 1])
                index += 2
            } else if left == 0 {
                return false
            } else if pattern[index] == UInt8(ascii: "]") {
                index += 1
                return false
            } else if left >= 3 && pattern[index + 1] == UInt8(ascii: "-") {
                set.insertRange(pattern[index], pattern[index + 2])
                index += 3
            } else {
                set.insert(pattern[index])
                index += 1
            }
            return true
        }
    }
}
