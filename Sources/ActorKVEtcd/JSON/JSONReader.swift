/// Reads one JSON document (RFC 8259) from bytes into a ``JSONValue``. Pure: no I/O.
///
/// Strict where etcd's gateway is: no trailing commas, no comments, no control characters in
/// strings, no leading zeros; nesting deeper than ``maxDepth`` is refused rather than recursed
/// into. Invalid UTF-8 in a string is replaced (U+FFFD), as `String(decoding:)` does.
struct JSONReader {
    /// The deepest nesting of arrays and objects accepted.
    static let maxDepth = 64

    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0

    /// A reader of `bytes`, which must stay valid while it reads.
    init(_ bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

    /// The one value the bytes hold, with nothing but white space around it.
    mutating func document() throws(JSONValue.Mismatch) -> JSONValue {
        let value = try value(depth: 0)
        skipSpace()
        guard position == bytes.count else { throw failure("data after the JSON value") }
        return value
    }

    private mutating func value(depth: Int) throws(JSONValue.Mismatch) -> JSONValue {
        skipSpace()
        guard position < bytes.count else { throw failure("the JSON ends where a value was expected") }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw failure("unexpected character")
        }
    }

    private mutating func object(depth: Int) throws(JSONValue.Mismatch) -> JSONValue {
        guard depth <= Self.maxDepth else { throw failure("JSON nested deeper than \(Self.maxDepth)") }
        position += 1
        var members: [JSONValue.Member] = []
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") { position += 1; return .object(members) }
        while true {
            skipSpace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw failure("expected a member name") }
            let name = try string()
            skipSpace()
            try expect(UInt8(ascii: ":"), "expected ':' after a member name")
            members.append(JSONValue.Member(name: name, value: try value(depth: depth)))
            skipSpace()
            guard position < bytes.count else { throw failure("the JSON ends inside an object") }
            let next = bytes[position]
            position += 1
            if next == UInt8(ascii: "}") { return .object(members) }
            guard next == UInt8(ascii: ",") else { position -= 1; throw failure("expected ',' or '}' in an object") }
        }
    }

    private mutating func array(depth: Int) throws(JSONValue.Mismatch) -> JSONValue {
        guard depth <= Self.maxDepth else { throw failure("JSON nested deeper than \(Self.maxDepth)") }
        position += 1
        var elements: [JSONValue] = []
        skipSpace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") { position += 1; return .array(elements) }
        while true {
            elements.append(try value(depth: depth))
            skipSpace()
            guard position < bytes.count else { throw failure("the JSON ends inside an array") }
            let next = bytes[position]
            position += 1
            if next == UInt8(ascii: "]") { return .array(elements) }
            guard next == UInt8(ascii: ",") else { position -= 1; throw failure("expected ',' or ']' in an array") }
        }
    }

    /// A string, the reader at its opening quote. Runs without escapes are taken whole.
    private mutating func string() throws(JSONValue.Mismatch) -> String {
        position += 1
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                defer { position += 1 }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") { break }
            guard byte >= 0x20 else { throw failure("a control character inside a string") }
            position += 1
        }
        var text = Array(bytes[start..<position])
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""): return String(decoding: text, as: UTF8.self)
            case UInt8(ascii: "\\"): try escape(into: &text)
            case ..<0x20: position -= 1; throw failure("a control character inside a string")
            default: text.append(byte)
            }
        }
        throw failure("the JSON ends inside a string")
    }

    /// The escape after a backslash, appended to `text` as UTF-8.
    private mutating func escape(into text: inout [UInt8]) throws(JSONValue.Mismatch) {
        guard position < bytes.count else { throw failure("the JSON ends inside a string") }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(byte)
        case UInt8(ascii: "b"): text.append(0x08)
        case UInt8(ascii: "f"): text.append(0x0C)
        case UInt8(ascii: "n"): text.append(0x0A)
        case UInt8(ascii: "r"): text.append(0x0D)
        case UInt8(ascii: "t"): text.append(0x09)
        case UInt8(ascii: "u"): appendScalar(try unicodeEscape(), to: &text)
        default: position -= 1; throw failure("an unknown escape in a string")
        }
    }

    /// The scalar of a `\uXXXX` escape (the reader after the `u`), joining a surrogate pair;
    /// a lone surrogate becomes U+FFFD.
    private mutating func unicodeEscape() throws(JSONValue.Mismatch) -> Unicode.Scalar {
        let first = try hex4()
        guard (0xD800...0xDBFF).contains(first) else {
            return Unicode.Scalar(first) ?? "\u{FFFD}"
        }
        let mark = position
        if position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u") {
            position += 2
            let second = try hex4()
            if (0xDC00...0xDFFF).contains(second) {
                return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)) ?? "\u{FFFD}"
            }
            position = mark
        }
        return "\u{FFFD}"
    }

    private mutating func hex4() throws(JSONValue.Mismatch) -> UInt32 {
        guard position + 4 <= bytes.count else { throw failure("a short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw failure("a bad \\u escape")
            }
            value = value << 4 | UInt32(digit)
            position += 1
        }
        return value
    }

    private func appendScalar(_ scalar: Unicode.Scalar, to text: inout [UInt8]) {
        UTF8.encode(scalar) { text.append($0) }
    }

    /// A number's text: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    private mutating func number() throws(JSONValue.Mismatch) -> String {
        let start = position
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count, isDigit(bytes[position]) else { throw failure("a bad number") }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
            if position < bytes.count, isDigit(bytes[position]) { throw failure("a number with a leading zero") }
        } else {
            skipDigits()
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard position < bytes.count, isDigit(bytes[position]) else { throw failure("a bad number") }
            skipDigits()
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard position < bytes.count, isDigit(bytes[position]) else { throw failure("a bad number") }
            skipDigits()
        }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    private mutating func skipDigits() {
        while position < bytes.count, isDigit(bytes[position]) { position += 1 }
    }

    private mutating func literal(_ word: StaticString) throws(JSONValue.Mismatch) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw failure("unexpected character") }
        for index in 0..<count where bytes[position + index] != word.utf8Start[index] { throw failure("unexpected character") }
        position += count
    }

    private mutating func expect(_ byte: UInt8, _ message: String) throws(JSONValue.Mismatch) {
        guard position < bytes.count, bytes[position] == byte else { throw failure(message) }
        position += 1
    }

    private mutating func skipSpace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private func failure(_ message: String) -> JSONValue.Mismatch {
        JSONValue.Mismatch(description: "\(message) at byte \(position)")
    }
}
