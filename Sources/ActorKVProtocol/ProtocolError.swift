/// A framing error: the server replies `-PROTO <message>` and closes the connection.
///
/// The decoders throw it when the bytes cannot be a valid request or reply, or when they exceed
/// ``ProtocolLimits``. The messages used by ``RequestDecoder`` are the static members below.
public struct ProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The human-readable reason, sent after `-PROTO ` on the wire.
    public let message: String

    /// Creates an error with the given message.
    public init(_ message: String) {
        self.message = message
    }

    /// `message`, for logs and test output.
    public var description: String { message }
}

extension ProtocolError {
    /// A `*N` header that is not a decimal integer, or exceeds `maxArguments`, or has no `\r\n`
    /// where one is due. (A count of 0 or less is an empty request, skipped as Redis does.)
    public static let invalidMultibulkLength = ProtocolError("invalid multibulk length")
    /// A `$len` header that is not a decimal integer in `0...maxBulkLength`, or has no `\r\n`
    /// where one is due.
    public static let invalidBulkLength = ProtocolError("invalid bulk length")
    /// A bulk payload that is not followed by exactly `\r\n`.
    public static let invalidBulkTerminator = ProtocolError("expected '\\r\\n' after bulk data")
    /// A multibulk request whose bulk lengths add up to more than `maxRequestBytes`.
    public static let requestTooBig = ProtocolError("too big multibulk request")
    /// An inline line longer than `maxInlineLength`.
    public static let inlineTooBig = ProtocolError("too big inline request")
    /// An inline line with an unterminated quote, or a closing quote not followed by whitespace.
    public static let unbalancedQuotes = ProtocolError("unbalanced quotes in request")
    /// An inline line of more than `maxArguments` words (the inline form of
    /// ``invalidMultibulkLength``'s limit).
    public static let tooManyInlineArguments = ProtocolError("too many inline arguments")
    /// An inline word longer than `maxBulkLength` bytes after unquoting (the inline form of
    /// ``invalidBulkLength``'s limit).
    public static let inlineArgumentTooBig = ProtocolError("too big inline argument")

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
