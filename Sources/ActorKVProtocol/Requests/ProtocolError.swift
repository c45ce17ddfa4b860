/// A framing error: the server replies `-PROTO <message>` and closes the connection.
///
/// The decoders throw it when the bytes cannot be a valid request or reply, or when they exceed
/// ``ProtocolLimits``. The messages used by ``RequestDecoder`` are the static members below.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The human-readable reason, sent after `-PROTO ` on the wire.
    public let message: String
    /// The limit the bytes went over, when that is the error (the message gives the size and
    /// the limit; the server adds the name of its flag); nil for bytes that are malformed.
    public let exceeded: ProtocolLimits.Limit?

    /// Creates an error with the given message, about going over `exceeded` if given.
    public init(_ message: String, exceeded: ProtocolLimits.Limit? = nil) {
        self.message = message
        self.exceeded = exceeded
    }

    /// `message`, for logs and test output.
    public var description: String { message }

    /// Equal when their messages are (the message names the limit, if any).
    public static func == (lhs: ProtocolError, rhs: ProtocolError) -> Bool { lhs.message == rhs.message }
}

extension ProtocolError {
    /// A `*N` header that is not a decimal integer, or has no `\r\n` where one is due. (A count
    /// of 0 or less is an empty request, skipped as Redis does; one over `maxArguments` is
    /// ``tooManyArguments(_:limit:)``.)
    public static let invalidMultibulkLength = ProtocolError("invalid multibulk length")
    /// A `$len` header that is not a decimal integer of 0 or more, or has no `\r\n` where one
    /// is due (one over `maxBulkLength` is ``bulkTooLong(_:limit:)``).
    public static let invalidBulkLength = ProtocolError("invalid bulk length")
    /// A bulk payload that is not followed by exactly `\r\n`.
    public static let invalidBulkTerminator = ProtocolError("expected '\\r\\n' after bulk data")
    /// An inline line with an unterminated quote, or a closing quote not followed by whitespace.
    public static let unbalancedQuotes = ProtocolError("unbalanced quotes in request")

    /// A `$len` header announcing more than `limit` bytes.
    public static func bulkTooLong(_ length: Int64, limit: Int) -> ProtocolError {
        ProtocolError("invalid bulk length: \(length) bytes, over the limit of \(limit)", exceeded: .bulkLength)
    }

    /// A `*N` header announcing more than `limit` arguments.
    public static func tooManyArguments(_ count: Int64, limit: Int) -> ProtocolError {
        ProtocolError("invalid multibulk length: \(count) arguments, over the limit of \(limit)", exceeded: .arguments)
    }

    /// A multibulk request whose headers so far add up to `bytes`, more than `limit`.
    public static func requestTooBig(_ bytes: Int, limit: Int) -> ProtocolError {
        ProtocolError("too big multibulk request: at least \(bytes) bytes, over the limit of \(limit)", exceeded: .requestBytes)
    }

    /// An inline line longer than `limit` bytes (how much longer depends on how it arrived).
    public static func inlineTooBig(limit: Int) -> ProtocolError {
        ProtocolError("too big inline request: over the limit of \(limit) bytes", exceeded: .inlineLength)
    }

    /// An inline line of more than `limit` words.
    public static func tooManyInlineArguments(limit: Int) -> ProtocolError {
        ProtocolError("too many inline arguments: over the limit of \(limit)", exceeded: .arguments)
    }

    /// An inline word of `length` bytes after unquoting, more than `limit`.
    public static func inlineArgumentTooBig(_ length: Int, limit: Int) -> ProtocolError {
        ProtocolError("too big inline argument: \(length) bytes, over the limit of \(limit)", exceeded: .bulkLength)
    }

    /// A multibulk element that does not start with `$`. Printable ASCII is shown as is,
    /// any other byte as `\xHH`.
    public static func expectedDollar(got byte: UInt8) -> ProtocolError {
        ProtocolError("expected '$', got '\(ASCII.printable(byte))'")
    }
}

extension ProtocolError {
    /// A reply starting with a byte other than `+ - : $ *`.
    public static func unexpectedReplyType(_ byte: UInt8) -> ProtocolError {
        ProtocolError("unexpected reply type '\(ASCII.printable(byte))'")
    }
    /// A `:` reply that is not a decimal Int64.
    public static let invalidInteger = ProtocolError("invalid integer reply")
    /// A `+` or `-` reply longer than `maxInlineLength`.
    public static let replyLineTooBig = ProtocolError("too big reply line")
    /// A `+` or `-` reply whose `\n` is not preceded by `\r`.
    public static let invalidReplyLine = ProtocolError("invalid reply line")
    /// Arrays nested deeper than ``ReplyDecoder/maxNestingDepth``.
    public static let replyTooDeep = ProtocolError("too deeply nested reply")
}
