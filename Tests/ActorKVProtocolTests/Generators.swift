import ActorKVProtocol
import ActorKVTestSupport

/// Random replies whose encoding decodes back to themselves.
enum ReplyGenerator {
    static func reply(depth: Int, using rng: inout SeededGenerator) -> Reply {
        switch Int.random(in: 0..<(depth > 0 ? 6 : 5), using: &rng) {
        case 0: return .simple(text(using: &rng))
        case 1: return .error("ERR " + text(using: &rng))
        case 2: return .integer(Int64.random(in: .min ... .max, using: &rng) >> Int64.random(in: 0...63, using: &rng))
        case 3: return .bulk((0..<Int.random(in: 0...40, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
        case 4: return .null
        default:
            let count = Int.random(in: 0...5, using: &rng)
            return .array((0..<count).map { _ in reply(depth: depth - 1, using: &rng) })
        }
    }

    /// Text without CR or LF (those are sent as spaces, so they would not round-trip).
    static func text(using rng: inout SeededGenerator) -> String {
        let alphabet = Array("abcXYZ 019-_:*$+\t\u{e9}\u{4e16}\u{1F600}")
        let characters: [Character] = (0..<Int.random(in: 0...12, using: &rng)).map { _ in
            alphabet.randomElement(using: &rng)!
        }
        return String(characters)
    }
}

/// Random commands, their multibulk and inline encodings, and garbage.
enum CommandGenerator {
    private static let words = ["SET", "GET", "DEL", "PING", "ECHO", "INCR", "key", "value", "*", "$3", "-1", "x"]

    /// 1...5 arguments: known words, or random bytes of any value (possibly empty).
    static func arguments(using rng: inout SeededGenerator) -> [[UInt8]] {
        (0..<Int.random(in: 1...5, using: &rng)).map { _ in
            if Bool.random(using: &rng) { return Array(words.randomElement(using: &rng)!.utf8) }
            return (0..<Int.random(in: 0...20, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        }
    }

    /// The multibulk encoding of `arguments`.
    static func multibulk(_ arguments: [[UInt8]]) -> [UInt8] {
        var bytes: [UInt8] = []
        RequestEncoder.encode(arguments, into: &bytes)
        return bytes
    }

    /// A multibulk or (when it fits in `maxInline` and randomness says so) inline encoding.
    static func encoded(_ arguments: [[UInt8]], maxInline: Int, using rng: inout SeededGenerator) -> [UInt8] {
        if Bool.random(using: &rng) {
            let line = inline(arguments, using: &rng)
            let terminator = line.suffix(2) == [13, 10] ? 2 : 1
            if line.count - terminator <= maxInline { return line }
        }
        return multibulk(arguments)
    }

    /// An inline line that splits back into `arguments`: bare words where possible, else single
    /// or double quotes with escapes; random separators and line ending.
    static func inline(_ arguments: [[UInt8]], using rng: inout SeededGenerator) -> [UInt8] {
        var line: [UInt8] = []
        for (index, argument) in arguments.enumerated() {
            if index > 0 { line += Array([" ", "\t", "  ", " \t\u{0B}\u{0C}"].randomElement(using: &rng)!.utf8) }
            line += word(argument, first: index == 0, using: &rng)
        }
        line += Bool.random(using: &rng) ? [13, 10] : [10]
        return line
    }

    private static func word(_ argument: [UInt8], first: Bool, using rng: inout SeededGenerator) -> [UInt8] {
        let bare = !argument.isEmpty && argument.allSatisfy { $0 > 32 && $0 < 127 && $0 != 34 && $0 != 39 }
            && !(first && argument[0] == 42)
        if bare && Int.random(in: 0..<4, using: &rng) != 0 { return argument }
        let singleQuotable = !argument.contains { $0 == 39 || $0 == 92 || $0 == 10 }
        if singleQuotable && Bool.random(using: &rng) { return [39] + argument + [39] }
        return doubleQuoted(argument, using: &rng)
    }

    private static func doubleQuoted(_ argument: [UInt8], using rng: inout SeededGenerator) -> [UInt8] {
        var out: [UInt8] = [34]
        for byte in argument {
            switch byte {
            case 34, 92: out += [92, byte]
            case 10 where Bool.random(using: &rng): out += Array("\\n".utf8)
            case 13 where Bool.random(using: &rng): out += Array("\\r".utf8)
            case 32...126: out.append(byte)
            default:
                let hex = Bool.random(using: &rng) ? "0123456789abcdef" : "0123456789ABCDEF"
                let digits = Array(hex.utf8)
                out += [92, 120, digits[Int(byte >> 4)], digits[Int(byte & 15)]]
            }
        }
        out.append(34)
        return out
    }

    /// A garbage inline line (without its terminator): any bytes but LF and quotes, not starting
    /// with `*`, at most `maxLength` long.
    static func garbageLine(maxLength: Int, using rng: inout SeededGenerator) -> [UInt8] {
        var line = (0..<Int.random(in: 0...maxLength, using: &rng)).map { _ in
            var byte = UInt8.random(in: 0...255, using: &rng)
            while byte == 10 || byte == 34 || byte == 39 { byte = UInt8.random(in: 0...255, using: &rng) }
            return byte
        }
        if line.first == 42 { line[0] = 33 }
        return line
    }

    /// The words of a quote-free line, as Redis's sdssplitargs reads them: \t, \n, \v, \f, \r
    /// and space are skipped before a word; a word ends only at space, \t, \n or \r.
    static func referenceSplit(_ line: [UInt8]) -> [[UInt8]] {
        var words: [[UInt8]] = []
        var index = 0
        while index < line.count {
            if line[index] == 32 || (9...13).contains(line[index]) {
                index += 1
                continue
            }
            var word: [UInt8] = []
            while index < line.count, ![32, 9, 10, 13].contains(line[index]) {
                word.append(line[index])
                index += 1
            }
            words.append(word)
        }
        return words
    }

    private static let specials = Array("*$0123456789-\r\n \t\"'\\xaF".utf8)

    /// Random bytes, biased towards the bytes the parser cares about.
    static func noise(count: Int, using rng: inout SeededGenerator) -> [UInt8] {
        (0..<count).map { _ in
            Int.random(in: 0..<3, using: &rng) == 0 ? UInt8.random(in: 0...255, using: &rng)
                : specials.randomElement(using: &rng)!
        }
    }

    /// `input` with 1...3 random edits: byte changes, insertions, deletions, duplications, cuts.
    static func mutated(_ input: [UInt8], using rng: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
            guard !bytes.isEmpty else { return noise(count: 4, using: &rng) }
            let at = Int.random(in: 0..<bytes.count, using: &rng)
            switch Int.random(in: 0..<5, using: &rng) {
            case 0: bytes[at] = noise(count: 1, using: &rng)[0]
            case 1: bytes.insert(contentsOf: noise(count: Int.random(in: 1...3, using: &rng), using: &rng), at: at)
            case 2: bytes.remove(at: at)
            case 3: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + 8)], at: at)
            default: bytes.removeSubrange(at...)
            }
        }
        return bytes
    }
}
