/// Size limits that the decoders enforce while bytes arrive, so that a client cannot make the
/// server buffer or allocate without bound. A request past any limit is a framing error
/// (``ProtocolError``): the server replies `-PROTO <message>` and closes the connection.
public struct ProtocolLimits: Sendable, Equatable {
    /// Longest inline request line, in bytes, not counting its `\n` or `\r\n` terminator.
    /// Longer lines fail with "too big inline request: …". For replies, the longest `+`/`-` line.
    public var maxInlineLength: Int
    /// Largest `$len` a bulk header may announce. A larger header fails with "invalid bulk length:
    /// N bytes, over the limit of …" as soon as the header is read, before anything is allocated for the payload. (A valid
    /// header of 32 KiB or more reserves room for its payload, at most 64 MiB, as Redis does.)
    /// Also the longest inline word, after unquoting ("too big inline argument: …").
    public var maxBulkLength: Int
    /// Largest `*N` a multibulk header may announce; a larger one fails with "invalid multibulk
    /// length: N arguments, over the limit of …". Also the most words of an inline line ("too
    /// many inline arguments: …").
    public var maxArguments: Int
    /// Largest sum of the bulk lengths of one multibulk request, checked as each `$len` header
    /// arrives (before allocating); a larger sum fails with "too big multibulk request: …". A
    /// request of more than 64 arguments also counts 56 bytes per argument, from its `*N`
    /// header on, for storing each argument on its own: the limit bounds what a request holds.
    public var maxRequestBytes: Int

    /// Creates limits; every parameter defaults to the server's standard value.
    public init(
        maxInlineLength: Int = 64 * 1024,
        maxBulkLength: Int = 64 * 1024 * 1024,
        maxArguments: Int = 1_048_576,
        maxRequestBytes: Int = 128 * 1024 * 1024
    ) {
        self.maxInlineLength = maxInlineLength
        self.maxBulkLength = maxBulkLength
        self.maxArguments = maxArguments
        self.maxRequestBytes = maxRequestBytes
    }
}

extension ProtocolLimits {
    /// Which limit a request went over (``ProtocolError/exceeded``).
    public enum Limit: Sendable, Equatable {
        /// ``ProtocolLimits/maxInlineLength``.
        case inlineLength
        /// ``ProtocolLimits/maxBulkLength``.
        case bulkLength
        /// ``ProtocolLimits/maxArguments``.
        case arguments
        /// ``ProtocolLimits/maxRequestBytes``.
        case requestBytes
    }
}

extension ProtocolLimits {
    /// Largest value a decoder uses for any limit: "unlimited" settings such as `Int.max` are
    /// read as this, so that offsets computed from limits cannot overflow.
    static let ceiling = 1 << 48

    /// These limits with every value brought into `0...ceiling`.
    var clamped: ProtocolLimits {
        func clamp(_ value: Int) -> Int { min(max(value, 0), Self.ceiling) }
        return ProtocolLimits(
            maxInlineLength: clamp(maxInlineLength),
            maxBulkLength: clamp(maxBulkLength),
            maxArguments: clamp(maxArguments),
            maxRequestBytes: clamp(maxRequestBytes)
        )
    }
}
