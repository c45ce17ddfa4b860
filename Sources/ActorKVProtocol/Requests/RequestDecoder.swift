/// Incremental request decoder (like Redis's query buffer processing).
///
/// Append bytes as they are read from the connection, then call ``next()`` until it returns nil.
/// Each request is chosen by its first byte: `*` starts a RESP2 multibulk request
/// (`*N\r\n` then N times `$len\r\n<len bytes>\r\n`, binary safe), anything else an inline line
/// split like Redis's `sdssplitargs`. Partial input is never rescanned, and consumed bytes are
/// dropped, so memory stays bounded by one request (see ``ProtocolLimits``) plus the bytes
/// appended since the last drain.
public struct RequestDecoder: Sendable {
    /// Most bytes reserved ahead for a payload announced by a `$len` header.
    static let maxPreallocation = 64 * 1024 * 1024 + 2

    private let limits: ProtocolLimits
    private var buffer = InputBuffer()
    private var parser = RequestParser()

    /// Creates a decoder that enforces `limits` (negative values count as 0, values above 2^48
    /// as 2^48).
    public init(limits: ProtocolLimits = ProtocolLimits()) {
        self.limits = limits.clamped
    }

    /// Adds bytes received from the client. Never throws: limits are checked by ``next()``.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(bytes)
    }

    /// Adds bytes received from the client. Never throws: limits are checked by ``next()``.
    public mutating func append(_ bytes: [UInt8]) {
        buffer.append(bytes)
    }

    /// Bytes buffered but not yet consumed (for backpressure decisions).
    public var bufferedByteCount: Int { buffer.unreadCount }

    /// True while part of a request has been received but not all of it: either unconsumed
    /// bytes are buffered or a multibulk request is half decoded.
    public var hasPartialRequest: Bool {
        buffer.unreadCount > 0 || parser.phase != .start
    }

    /// Next complete request as its arguments (args[0] is the command name, bytes as sent), or
    /// nil when more bytes are needed. The same as ``nextRequest()``, one array per argument.
    public mutating func next() throws(ProtocolError) -> [[UInt8]]? {
        try nextRequest()?.arguments
    }

    /// Next complete request, or nil when more bytes are needed.
    ///
    /// Empty inline lines and `*N` headers with N <= 0 are skipped. Throws a ``ProtocolError``
    /// on a framing error (bad header, missing `\r\n` after a payload, unbalanced quotes, or a
    /// limit of ``ProtocolLimits`` exceeded); the decoder must not be used afterwards.
    public mutating func nextRequest() throws(ProtocolError) -> Request? {
        while true {
            switch runParser() {
            case .request(let request):
                buffer.compactIfConsumed()
                return request
            case .needMore:
                prepareForMoreInput()
                return nil
            case .failure(let error):
                throw error
            case .payloadInPlace(let count):
                if let request = takePayloadInPlace(count: count) { return request }
            }
        }
    }

    /// Runs the parser over the unconsumed bytes and records how far it read.
    private mutating func runParser() -> RequestParser.Step {
        var state = RequestParser()
        swap(&state, &parser)  // a local, so the closure below does not capture self
        var cursor = buffer.readIndex
        let limits = self.limits
        let step = buffer.storage.withUnsafeBufferPointer { bytes in
            state.step(bytes, cursor: &cursor, limits: limits)
        }
        swap(&state, &parser)
        buffer.readIndex = cursor
        return step
    }

    /// Hands the whole buffer to the parser as the pending payload, without copying it.
    private mutating func takePayloadInPlace(count: Int) -> Request? {
        guard let payload = buffer.takeWholePayload(count: count) else {
            preconditionFailure("the parser offers a payload in place only when it fills the buffer")
        }
        return parser.acceptPayload(payload)
    }

    /// Drops consumed bytes; when a big payload is on its way, moves it to the start of a
    /// buffer with room for all of it (up to ``maxPreallocation``), so that it arrives without
    /// reallocation and can be taken in place when complete, as Redis does.
    private mutating func prepareForMoreInput() {
        if let count = parser.pendingBigPayload, buffer.readIndex > 0 {
            buffer.reserve(unread: min(count + 2, Self.maxPreallocation))
        } else {
            buffer.compactIfConsumed()
        }
    }
}
