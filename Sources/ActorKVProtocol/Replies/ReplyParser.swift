/// The reply-decoding state machine: it reads from a byte buffer, never owns it, and keeps the
/// arrays being filled on an explicit stack, so nested replies need no recursion and bytes
/// arriving in small pieces are never rescanned.
struct ReplyParser: Sendable {
    /// What the parser expects next.
    enum Phase: Sendable, Equatable {
        /// The type byte of a reply or array element.
        case start
        /// The `\r\n` ending a `+` or `-` line; `scanned` bytes after the type byte hold no `\n`.
        case line(type: UInt8, scanned: Int)
        /// A bulk payload of this many bytes, then `\r\n`.
        case bulkPayload(Int)
    }

    /// The result of one call to ``step(_:cursor:limits:)``.
    enum Step {
        /// A complete top-level reply.
        case reply(Reply)
        /// All complete input was consumed; more bytes are needed.
        case needMore
        /// A framing error.
        case failure(ProtocolError)
    }

    /// An array whose elements are still arriving.
    private struct Frame: Sendable {
        var remaining: Int
        var elements: [Reply]
    }

    private(set) var phase = Phase.start
    private var frames: [Frame] = []

    /// True while no reply is partly decoded.
    var isAtReplyBoundary: Bool { phase == .start && frames.isEmpty }

    /// Parses from `cursor` until a top-level reply completes, input runs out, or an error occurs;
    /// `cursor` is left after the last consumed byte.
    mutating func step(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, limits: ProtocolLimits
    ) -> Step {
        while true {
            let outcome: Step?
            switch phase {
            case .start:
                guard cursor < bytes.count else { return .needMore }
                outcome = readTyped(bytes, cursor: &cursor, limits: limits)
            case .line(let type, let scanned):
                outcome = readLine(bytes, cursor: &cursor, type: type, scanned: scanned, limits: limits)
            case .bulkPayload(let count):
                outcome = readBulkPayload(bytes, cursor: &cursor, count: count)
            }
            if let outcome { return outcome }
        }
    }

    /// Dispatches on the type byte at `cursor`; nil means "go on parsing".
    private mutating func readTyped(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, limits: ProtocolLimits
    ) -> Step? {
        let type = bytes[cursor]
        switch type {
        case ASCII.plus, ASCII.minus:
            phase = .line(type: type, scanned: 0)
            return nil
        case ASCII.colon, ASCII.dollar, ASCII.star:
            return readHeader(bytes, cursor: &cursor, type: type, limits: limits)
        default:
            return .failure(.unexpectedReplyType(type))
        }
    }

    /// Reads a `:`, `$` or `*` line; nil means "go on parsing".
    private mutating func readHeader(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, type: UInt8, limits: ProtocolLimits
    ) -> Step? {
        switch ASCIIDecimal.scanLine(bytes, from: cursor + 1) {
        case .incomplete:
            return .needMore
        case .invalid:
            return .failure(Self.headerError(type))
        case .value(let value, let next):
            cursor = next
            switch type {
            case ASCII.colon: return complete(.integer(value))
            case ASCII.dollar: return startBulk(length: value, limits: limits)
            default: return startArray(count: value, limits: limits)
            }
        }
    }

    /// The error for a malformed `:`, `$` or `*` line.
    private static func headerError(_ type: UInt8) -> ProtocolError {
        switch type {
        case ASCII.colon: return .invalidInteger
        case ASCII.dollar: return .invalidBulkLength
        default: return .invalidMultibulkLength
        }
    }

    /// Handles a `$len` header: null, or a payload to wait for.
    private mutating func startBulk(length: Int64, limits: ProtocolLimits) -> Step? {
        if length == -1 { return complete(.null) }
        guard length >= 0 else { return .failure(.invalidBulkLength) }
        guard length <= Int64(limits.maxBulkLength) else { return .failure(.bulkTooLong(length, limit: limits.maxBulkLength)) }
        phase = .bulkPayload(Int(length))
        return nil
    }

    /// Handles a `*N` header: null, empty, or a new array frame.
    private mutating func startArray(count: Int64, limits: ProtocolLimits) -> Step? {
        if count == -1 { return complete(.null) }
        if count == 0 { return complete(.array([])) }
        guard count > 0 else { return .failure(.invalidMultibulkLength) }
        guard count <= Int64(limits.maxArguments) else { return .failure(.tooManyArguments(count, limit: limits.maxArguments)) }
        guard frames.count < ReplyDecoder.maxNestingDepth else { return .failure(.replyTooDeep) }
        var elements: [Reply] = []
        elements.reserveCapacity(min(Int(count), 1024))
        frames.append(Frame(remaining: Int(count), elements: elements))
        return nil
    }

    /// Reads the rest of a `+`/`-` line; nil means "go on parsing".
    private mutating func readLine(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, type: UInt8, scanned: Int,
        limits: ProtocolLimits
    ) -> Step? {
        let textStart = cursor + 1
        let searchEnd = min(bytes.count, textStart + limits.maxInlineLength + 2)
        guard let newline = ByteScanner.firstIndex(of: ASCII.lf, in: bytes, from: textStart + scanned, to: searchEnd)
        else {
            let buffered = bytes.count - textStart
            guard buffered < limits.maxInlineLength + 2 else { return .failure(.replyLineTooBig) }
            phase = .line(type: type, scanned: buffered)
            return .needMore
        }
        guard newline > textStart, bytes[newline - 1] == ASCII.cr else { return .failure(.invalidReplyLine) }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[textStart..<(newline - 1)]), as: UTF8.self)
        cursor = newline + 1
        return complete(type == ASCII.plus ? .simple(text) : .error(text))
    }

    /// Reads a payload of `count` bytes and its `\r\n`; nil means "go on parsing".
    private mutating func readBulkPayload(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, count: Int
    ) -> Step? {
        guard bytes.count - cursor >= count + 2 else { return .needMore }
        let end = cursor + count
        guard bytes[end] == ASCII.cr, bytes[end + 1] == ASCII.lf else { return .failure(.invalidBulkTerminator) }
        let payload = Array(UnsafeBufferPointer(rebasing: bytes[cursor..<end]))
        cursor = end + 2
        return complete(.bulk(payload))
    }

    /// Adds a finished value to the innermost open array, closing every array it completes;
    /// returns the top-level reply when there is one, nil to go on parsing.
    private mutating func complete(_ reply: Reply) -> Step? {
        phase = .start
        var value = reply
        while !frames.isEmpty {
            let last = frames.count - 1
            frames[last].elements.append(value)
            frames[last].remaining -= 1
            guard frames[last].remaining == 0 else { return nil }
            value = .array(frames.removeLast().elements)
        }
        return .reply(value)
    }
}
