/// Incremental RESP2 reply decoder, for clients. Also accepts `*-1` as `.null`.
///
/// Append bytes as they arrive, then call ``next()`` until it returns nil. Limits: `+`/`-`
/// lines up to `maxInlineLength` bytes, bulk strings up to `maxBulkLength`, arrays up to
/// `maxArguments` elements and ``maxNestingDepth`` levels.
public struct ReplyDecoder: Sendable {
    /// The deepest nesting of arrays accepted; deeper replies fail with "too deeply nested reply".
    public static let maxNestingDepth = 256

    private let limits: ProtocolLimits
    private var buffer = InputBuffer()
    private var parser = ReplyParser()

    /// Creates a decoder that enforces `limits` (negative values count as 0, values above 2^48
    /// as 2^48).
    public init(limits: ProtocolLimits = ProtocolLimits()) {
        self.limits = limits.clamped
    }

    /// Adds bytes received from the server. Never throws: limits are checked by ``next()``.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(bytes)
    }

    /// Adds bytes received from the server. Never throws: limits are checked by ``next()``.
    public mutating func append(_ bytes: [UInt8]) {
        buffer.append(bytes)
    }

    /// Bytes buffered but not yet consumed.
    public var bufferedByteCount: Int { buffer.unreadCount }

    /// True while part of a reply has been received but not all of it.
    public var hasPartialReply: Bool {
        buffer.unreadCount > 0 || !parser.isAtReplyBoundary
    }

    /// Next complete reply, or nil when more bytes are needed.
    ///
    /// Throws a ``ProtocolError`` when the bytes are not valid RESP2 or exceed the limits; the
    /// decoder must not be used afterwards.
    public mutating func next() throws(ProtocolError) -> Reply? {
        var state = ReplyParser()
        swap(&state, &parser)  // a local, so the closure below does not capture self
        var cursor = buffer.readIndex
        let limits = self.limits
        let step = buffer.storage.withUnsafeBufferPointer { bytes in
            state.step(bytes, cursor: &cursor, limits: limits)
        }
        swap(&state, &parser)
        buffer.readIndex = cursor
        buffer.compactIfConsumed()
        switch step {
        case .reply(let reply): return reply
        case .needMore: return nil
        case .failure(let error): throw error
        }
    }
}
