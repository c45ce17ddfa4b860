/// A small pull parser over JSON bytes, for reading snapshots without building a document tree
/// (and, in the package, the tokens of cluster mode's JSON reader).
///
/// It reads exactly the JSON grammar (RFC 8259) for the pieces it is asked for; every failure
/// carries the byte offset where the input stopped making sense.
package struct JSONScanner {
    /// Where and why the input stopped making sense.
    package struct Failure: Error {
        /// The byte offset.
        package let offset: Int
        /// What was wrong.
        package let reason: String

        package init(offset: Int, reason: String) {
            self.offset = offset
            self.reason = reason
        }
    }

    let bytes: UnsafeRawBufferPointer
    private(set) var position = 0

    /// A scanner of `bytes`, which must stay valid while it reads.
    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Whether every byte has been read.
    package var isAtEnd: Bool { position >= bytes.count }

    /// A failure at the current position.
    package func fail(_ reason: String) -> Failure { Failure(offset: position, reason: reason) }

    /// Skips spaces, tabs and line ends.
    package mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x0A, 0x0D, 0x09: position += 1
            default: return
            }
        }
    }

    /// The next non-whitespace byte, without consuming it.
    package mutating func peek() -> UInt8? {
        skipWhitespace()
        return position < bytes.count ? bytes[position] : nil
    }

    /// Consumes `byte` (after whitespace) or fails.
    package mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek() == byte else {
            throw fail("expected '\(Character(Unicode.Scalar(byte)))'")
        }
        position += 1
    }

    /// Consumes `byte` if it is next.
    package mutating func consume(_ byte: UInt8) -> Bool {
        guard peek() == byte else { return false }
        position += 1
        return true
    }

    /// Reads a string and returns its UTF-8 bytes with escapes resolved.
    package mutating func string() throws(Failure) -> [UInt8] {
        try expect(UInt8(ascii: "\""))
        var out: [UInt8] = []
        var runStart = position
        while true {
            guard position < bytes.count else { throw fail("unterminated string") }
            let c = bytes[position]
            if c == UInt8(ascii: "\"") {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<position]))
                position += 1
                return out
            }
            if c == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[runStart..<position]))
                position += 1
                try escape(into: &out)
                runStart = position
                continue
            }
            guard c >= 0x20 else { throw fail("control character in string") }
            position += 1
        }
    }

    private mutating func escape(into out: inout [UInt8]) throws(Failure) {
        guard position < bytes.count else { throw fail("unterminated escape") }
        let c = bytes[position]
        position += 1
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(c)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"): try unicodeEscape(into: &out)
        default: throw fail("invalid escape")
        }
    }

    private mutating func unicodeEscape(into out: inout [UInt8]) throws(Failure) {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                  bytes[position + 1] == UInt8(ascii: "u") else { throw fail("lone surrogate") }
            position += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw fail("invalid surrogate pair") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw fail("lone surrogate")
        }
        guard let u = Unicode.Scalar(scalar) else { throw fail("invalid code point") }
        out.append(contentsOf: UTF8.encode(u)!)
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard position + 4 <= bytes.count else { throw fail("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[position]
            let d: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            v = v << 4 | d
            position += 1
        }
        return v
    }

    /// Reads a non-negative integer that fits in UInt64.
    mutating func unsignedInteger() throws(Failure) -> UInt64 {
        skipWhitespace()
        let start = position
        var v: UInt64 = 0
        while position < bytes.count, bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9") {
            let (m, o1) = v.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(UInt64(bytes[position] - UInt8(ascii: "0")))
            guard !o1, !o2 else { throw fail("integer too large") }
            v = a
            position += 1
        }
        guard position > start else { throw fail("expected a non-negative integer") }
        return v
    }

    /// Reads a number (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, after any
    /// whitespace) and returns its text: the caller converts it to the type it wants.
    package mutating func number() throws(Failure) -> String {
        skipWhitespace()
        let start = position
        if position < bytes.count, bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard isDigitNext else { throw fail("expected a number") }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
            guard !isDigitNext else { throw fail("a number with a leading zero") }
        } else {
            skipDigits()
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard isDigitNext else { throw fail("expected a digit after '.'") }
            skipDigits()
        }
        if position < bytes.count, bytes[position] | 0x20 == UInt8(ascii: "e") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-") { position += 1 }
            guard isDigitNext else { throw fail("expected a digit in the exponent") }
            skipDigits()
        }
        return String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
    }

    private var isDigitNext: Bool { position < bytes.count && bytes[position] &- UInt8(ascii: "0") < 10 }

    private mutating func skipDigits() {
        while isDigitNext { position += 1 }
    }

    /// Skips any one JSON value.
    mutating func skipValue(depth: Int = 0) throws(Failure) {
        guard depth < 64 else { throw fail("nesting too deep") }
        switch peek() {
        case UInt8(ascii: "\""): _ = try string()
        case UInt8(ascii: "{"):
            position += 1
            if consume(UInt8(ascii: "}")) { return }
            repeat {
                _ = try string()
                try expect(UInt8(ascii: ":"))
                try skipValue(depth: depth + 1)
            } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "}"))
        case UInt8(ascii: "["):
            position += 1
            if consume(UInt8(ascii: "]")) { return }
            repeat { try skipValue(depth: depth + 1) } while consume(UInt8(ascii: ","))
            try expect(UInt8(ascii: "]"))
        case .some(let c) where c == UInt8(ascii: "-") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")):
            position += 1
            while position < bytes.count, "0123456789.eE+-".utf8.contains(bytes[position]) { position += 1 }
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: throw fail("expected a value")
        }
    }

    /// Reads the literal `word` (`true`, `false`, `null`), after any whitespace.
    package mutating func literal(_ word: String) throws(Failure) {
        skipWhitespace()
        for c in word.utf8 {
            guard position < bytes.count, bytes[position] == c else { throw fail("expected \(word)") }
            position += 1
        }
    }
}
