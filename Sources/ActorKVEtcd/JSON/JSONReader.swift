import ActorKVStore

/// Reads one JSON document (RFC 8259) from bytes into a ``JSONValue``; the tokens (strings and
/// their escapes, numbers, literals) are read by the store's `JSONScanner`, the snapshot codec's
/// pull parser. Pure: no I/O.
///
/// Strict where etcd's gateway is: no trailing commas, no comments, no control characters or lone
/// surrogates in strings, no leading zeros; nesting deeper than ``maxDepth`` is refused rather
/// than recursed into. Invalid UTF-8 in a string is replaced (U+FFFD), as `String(decoding:)` does.
struct JSONReader {
    /// The deepest nesting of arrays and objects accepted.
    static let maxDepth = 64

    private var scanner: JSONScanner

    /// A reader of `bytes`, which must stay valid while it reads.
    init(_ bytes: UnsafeRawBufferPointer) { scanner = JSONScanner(bytes) }

    /// The one value the bytes hold, with nothing but white space around it.
    mutating func document() throws(JSONValue.Mismatch) -> JSONValue {
        do throws(JSONScanner.Failure) {
            let value = try value(depth: 0)
            scanner.skipWhitespace()
            guard scanner.isAtEnd else { throw scanner.fail("data after the JSON value") }
            return value
        } catch {
            throw JSONValue.Mismatch(description: "\(error.reason) at byte \(error.offset)")
        }
    }

    private mutating func value(depth: Int) throws(JSONScanner.Failure) -> JSONValue {
        switch scanner.peek() {
        case UInt8(ascii: "{"): return try object(depth: depth + 1)
        case UInt8(ascii: "["): return try array(depth: depth + 1)
        case UInt8(ascii: "\""): return .string(String(decoding: try scanner.string(), as: UTF8.self))
        case UInt8(ascii: "t"): try scanner.literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try scanner.literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try scanner.literal("null"); return .null
        case .some(let byte) where byte == UInt8(ascii: "-") || byte &- UInt8(ascii: "0") < 10: return .number(try scanner.number())
        case nil: throw scanner.fail("the JSON ends where a value was expected")
        default: throw scanner.fail("expected a value")
        }
    }

    private mutating func object(depth: Int) throws(JSONScanner.Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw scanner.fail("JSON nested deeper than \(Self.maxDepth)") }
        try scanner.expect(UInt8(ascii: "{"))
        var members: [JSONValue.Member] = []
        if scanner.consume(UInt8(ascii: "}")) { return .object(members) }
        repeat {
            guard scanner.peek() == UInt8(ascii: "\"") else { throw scanner.fail("expected a member name") }
            let name = String(decoding: try scanner.string(), as: UTF8.self)
            try scanner.expect(UInt8(ascii: ":"))
            members.append(JSONValue.Member(name: name, value: try value(depth: depth)))
        } while scanner.consume(UInt8(ascii: ","))
        try scanner.expect(UInt8(ascii: "}"))
        return .object(members)
    }

    private mutating func array(depth: Int) throws(JSONScanner.Failure) -> JSONValue {
        guard depth <= Self.maxDepth else { throw scanner.fail("JSON nested deeper than \(Self.maxDepth)") }
        try scanner.expect(UInt8(ascii: "["))
        var elements: [JSONValue] = []
        if scanner.consume(UInt8(ascii: "]")) { return .array(elements) }
        repeat { elements.append(try value(depth: depth)) } while scanner.consume(UInt8(ascii: ","))
        try scanner.expect(UInt8(ascii: "]"))
        return .array(elements)
    }
}
