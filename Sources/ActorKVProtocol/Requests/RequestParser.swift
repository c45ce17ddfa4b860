/// The request-decoding state machine: it reads from a byte buffer, never owns it, and
/// remembers how far it got so that bytes arriving in small pieces are never rescanned.
struct RequestParser: Sendable {
    /// Bulk payloads at least this big are received in place (Redis's PROTO_MBULK_BIG_ARG).
    static let bigPayloadThreshold = 32 * 1024
    /// The bytes per argument a new request reserves room for (a key, a short value).
    static let typicalArgumentBytes = 40

    /// What the parser expects next.
    enum Phase: Sendable, Equatable {
        /// The first byte of a request, which chooses multibulk (`*`) or inline.
        case start
        /// The `\n` of an inline line; the first `scanned` bytes of the line hold none.
        case inline(scanned: Int)
        /// A `$len\r\n` header of a multibulk element.
        case bulkHeader
        /// A payload of this many bytes, then `\r\n`.
        case bulkPayload(Int)
    }

    /// The result of one call to ``step(_:cursor:limits:)``.
    enum Step {
        /// A complete request.
        case request(Request)
        /// All complete input was consumed; more bytes are needed.
        case needMore
        /// A framing error; the connection must be closed.
        case failure(ProtocolError)
        /// The pending payload of this size, followed by `\r\n`, fills the buffer exactly from
        /// index 0: the caller may take the buffer as the argument and pass it to
        /// ``acceptPayload(_:)`` instead of copying it.
        case payloadInPlace(count: Int)
    }

    private(set) var phase = Phase.start
    private var request = Request([])
    private var remaining = 0
    private var requestBytes = 0

    /// The size of a big payload still to arrive, if the parser waits for one.
    var pendingBigPayload: Int? {
        if case .bulkPayload(let count) = phase, count >= Self.bigPayloadThreshold { return count }
        return nil
    }

    /// Parses from `cursor` until a request completes, input runs out, or an error occurs;
    /// `cursor` is left after the last consumed byte.
    mutating func step(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, limits: ProtocolLimits
    ) -> Step {
        while true {
            let outcome: Step?
            switch phase {
            case .start:
                guard cursor < bytes.count else { return .needMore }
                if bytes[cursor] == ASCII.star {
                    outcome = readMultibulkCount(bytes, cursor: &cursor, limits: limits)
                } else {
                    phase = .inline(scanned: 0)
                    outcome = nil
                }
            case .inline(let scanned):
                outcome = readInline(bytes, cursor: &cursor, scanned: scanned, limits: limits)
            case .bulkHeader:
                outcome = readBulkHeader(bytes, cursor: &cursor, limits: limits)
            case .bulkPayload(let count):
                outcome = readBulkPayload(bytes, cursor: &cursor, count: count)
            }
            if let outcome { return outcome }
        }
    }

    /// Adds the payload the caller took in place after a `.payloadInPlace` step; returns the
    /// request if that was its last argument.
    mutating func acceptPayload(_ payload: [UInt8]) -> Request? {
        request.append(array: payload)
        if case .request(let request)? = finishArgument() { return request }
        return nil
    }

    /// Reads `*N\r\n`; nil means "go on parsing".
    private mutating func readMultibulkCount(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, limits: ProtocolLimits
    ) -> Step? {
        switch ASCIIDecimal.scanLine(bytes, from: cursor + 1) {
        case .incomplete:
            return .needMore
        case .invalid:
            return .failure(.invalidMultibulkLength)
        case .value(let count, let next):
            if count <= 0 {
                cursor = next  // an empty request: skipped, as Redis does for any count <= 0
                return nil
            }
            guard count <= Int64(limits.maxArguments) else { return .failure(.tooManyArguments(count, limit: limits.maxArguments)) }
            cursor = next
            remaining = Int(count)
            requestBytes = Request.storageOverhead(arguments: remaining)
            guard requestBytes <= limits.maxRequestBytes else { return .failure(.requestTooBig(requestBytes, limit: limits.maxRequestBytes)) }
            // Room for a typical small request (GET, PUT of a short value) in one allocation.
            request = Request(reservingArguments: remaining, bytes: min(remaining * Self.typicalArgumentBytes, 4096))
            phase = .bulkHeader
            return nil
        }
    }

    /// Reads `$len\r\n`; nil means "go on parsing".
    private mutating func readBulkHeader(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, limits: ProtocolLimits
    ) -> Step? {
        guard cursor < bytes.count else { return .needMore }
        guard bytes[cursor] == ASCII.dollar else { return .failure(.expectedDollar(got: bytes[cursor])) }
        switch ASCIIDecimal.scanLine(bytes, from: cursor + 1) {
        case .incomplete:
            return .needMore
        case .invalid:
            return .failure(.invalidBulkLength)
        case .value(let length, let next):
            guard length >= 0 else { return .failure(.invalidBulkLength) }
            guard length <= Int64(limits.maxBulkLength) else { return .failure(.bulkTooLong(length, limit: limits.maxBulkLength)) }
            requestBytes += Int(length)
            guard requestBytes <= limits.maxRequestBytes else { return .failure(.requestTooBig(requestBytes, limit: limits.maxRequestBytes)) }
            cursor = next
            phase = .bulkPayload(Int(length))
            return nil
        }
    }

    /// Reads a payload of `count` bytes and its `\r\n`; nil means "go on parsing".
    private mutating func readBulkPayload(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, count: Int
    ) -> Step? {
        let available = bytes.count - cursor
        guard available >= count + 2 else { return .needMore }
        let end = cursor + count
        guard bytes[end] == ASCII.cr, bytes[end + 1] == ASCII.lf else { return .failure(.invalidBulkTerminator) }
        if cursor == 0 && available == count + 2 && count >= Self.bigPayloadThreshold {
            return .payloadInPlace(count: count)
        }
        request.append(UnsafeBufferPointer(rebasing: bytes[cursor..<end]),
                       reservingMore: (remaining - 1) * Self.typicalArgumentBytes)
        cursor = end + 2
        return finishArgument()
    }

    /// Counts one more argument as received; returns the request when it was the last one.
    private mutating func finishArgument() -> Step? {
        remaining -= 1
        guard remaining == 0 else {
            phase = .bulkHeader
            return nil
        }
        phase = .start
        let complete = request
        request = Request([])
        return .request(complete)
    }

    /// Reads an inline line; `scanned` bytes after `cursor` are known to hold no `\n`.
    /// The line, without its `\n` or `\r\n`, may be at most `maxInlineLength` bytes long; its
    /// words are held to `maxArguments` and `maxBulkLength` as a multibulk request's arguments
    /// are. Empty lines are skipped (nil: "go on parsing").
    private mutating func readInline(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: inout Int, scanned: Int, limits: ProtocolLimits
    ) -> Step? {
        let searchEnd = min(bytes.count, cursor + limits.maxInlineLength + 2)
        guard let newline = ByteScanner.firstIndex(of: ASCII.lf, in: bytes, from: cursor + scanned, to: searchEnd)
        else {
            return waitForNewline(bytes, cursor: cursor, limits: limits)
        }
        var end = newline
        if end > cursor && bytes[end - 1] == ASCII.cr { end -= 1 }
        guard end - cursor <= limits.maxInlineLength else { return .failure(.inlineTooBig(limit: limits.maxInlineLength)) }
        let line = UnsafeBufferPointer(rebasing: bytes[cursor..<end])
        cursor = newline + 1
        phase = .start
        let arguments: [[UInt8]]
        do { arguments = try InlineSplitter.split(line, limits: limits) } catch { return .failure(error) }
        return arguments.isEmpty ? nil : .request(Request(arguments))
    }

    /// Records that the buffered part of an inline line holds no `\n`, or fails if it is already
    /// too long (a final `\r` may still turn out to be part of the line terminator).
    private mutating func waitForNewline(
        _ bytes: UnsafeBufferPointer<UInt8>, cursor: Int, limits: ProtocolLimits
    ) -> Step {
        let buffered = bytes.count - cursor
        let endsWithCR = buffered > 0 && bytes[bytes.count - 1] == ASCII.cr
        guard buffered <= limits.maxInlineLength || (buffered == limits.maxInlineLength + 1 && endsWithCR) else {
            return .failure(.inlineTooBig(limit: limits.maxInlineLength))
        }
        phase = .inline(scanned: buffered)
        return .needMore
    }
}
