/// Reads RESP2 messages where they lie in a receive buffer, without building a `Reply` per
/// message: what `fanout`'s watchers use, so that the benchmark's own process spends as little
/// of the shared cores as it can on each delivery (a `Reply` tree is an allocation per part:
/// six for an ActorKV `change`, four for a Redis `message`).
///
/// A scan notes each part of one message as a ``Token`` (in order, arrays before their
/// elements) into a reused array; it checks every header and terminator as strictly as
/// `ReplyDecoder` does, and fails on anything that is not RESP2.
struct FrameScanner {
    /// One part of a message: a header's type byte and where its bytes are (`+ - :` the line,
    /// `$` the payload, `*` no bytes and `count` elements; a null bulk or array has count -1).
    struct Token {
        var type: UInt8
        var start: Int
        var count: Int
    }

    /// The parts of the last message scanned.
    private(set) var tokens: [Token] = []
    /// The deepest nesting accepted (a fan-out message nests two arrays).
    static let maxDepth = 8

    init() { tokens.reserveCapacity(16) }

    /// Scans the message starting at `start`; returns the index just after it, or nil when it
    /// has not all arrived. ``tokens`` then hold its parts.
    mutating func scan(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) throws(ClientError) -> Int? {
        tokens.removeAll(keepingCapacity: true)
        return try value(bytes, at: start, depth: 0)
    }

    private mutating func value(_ bytes: UnsafeBufferPointer<UInt8>, at index: Int, depth: Int) throws(ClientError) -> Int? {
        guard index < bytes.count else { return nil }
        let type = bytes[index]
        guard let lineEnd = try Self.lineEnd(bytes, from: index + 1) else { return nil }
        switch type {
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"):
            tokens.append(Token(type: type, start: index + 1, count: lineEnd - index - 1))
            return lineEnd + 2
        case UInt8(ascii: "$"):
            let length = try Self.integer(bytes, from: index + 1, to: lineEnd)
            tokens.append(Token(type: type, start: lineEnd + 2, count: length))
            guard length >= 0 else { return lineEnd + 2 }
            let end = lineEnd + 2 + length
            guard end + 2 <= bytes.count else { return nil }
            guard bytes[end] == 13, bytes[end + 1] == 10 else { throw ClientError("bad reply: a bulk string without its CRLF") }
            return end + 2
        case UInt8(ascii: "*"):
            let count = try Self.integer(bytes, from: index + 1, to: lineEnd)
            guard depth < Self.maxDepth else { throw ClientError("bad reply: nested deeper than \(Self.maxDepth)") }
            tokens.append(Token(type: type, start: lineEnd + 2, count: count))
            var next = lineEnd + 2
            for _ in 0..<max(0, count) {
                guard let after = try value(bytes, at: next, depth: depth + 1) else { return nil }
                next = after
            }
            return next
        default:
            throw ClientError("bad reply: unexpected type byte \(type)")
        }
    }

    /// The index of the CR of the first CRLF at or after `from`, or nil if none has arrived.
    private static func lineEnd(_ bytes: UnsafeBufferPointer<UInt8>, from: Int) throws(ClientError) -> Int? {
        var i = from
        while i + 1 < bytes.count {
            if bytes[i] == 13 {
                guard bytes[i + 1] == 10 else { throw ClientError("bad reply: a CR without its LF") }
                return i
            }
            i += 1
        }
        return nil
    }

    /// A header's signed decimal (`-1` for a null), strictly.
    private static func integer(_ bytes: UnsafeBufferPointer<UInt8>, from: Int, to end: Int) throws(ClientError) -> Int {
        var i = from
        let negative = i < end && bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard i < end, end - i <= 18 else { throw ClientError("bad reply: a header without a valid length") }
        var n = 0
        while i < end {
            let digit = bytes[i] &- 0x30
            guard digit < 10 else { throw ClientError("bad reply: a header without a valid length") }
            n = n * 10 + Int(digit)
            i += 1
        }
        guard !negative || n == 1 else { throw ClientError("bad reply: a negative length other than -1") }
        return negative ? -1 : n
    }

    /// Whether the token is a bulk string holding exactly `text`.
    func isBulk(_ token: Token, _ text: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard token.type == UInt8(ascii: "$"), token.count == text.utf8CodeUnitCount else { return false }
        let expected = UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
        return expected.indices.allSatisfy { bytes[token.start + $0] == expected[$0] }
    }
}
