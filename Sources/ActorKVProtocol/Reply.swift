/// A RESP2 reply.
public enum Reply: Sendable, Equatable {
    /// A status line, `+OK\r\n`. CR and LF inside are sent as spaces.
    case simple(String)
    /// An error line, `-CODE message\r\n` (the string is "CODE message"). CR and LF inside are
    /// sent as spaces.
    case error(String)
    /// An integer, `:5\r\n`.
    case integer(Int64)
    /// A binary-safe string, `$3\r\nabc\r\n`.
    case bulk([UInt8])
    /// The null bulk string, `$-1\r\n`.
    case null
    /// The null array, `*-1\r\n` (a refused transaction). Decoders read it as ``null``.
    case nullArray
    /// An array of replies, `*N\r\n` followed by each element.
    indirect case array([Reply])
    /// A reply already encoded, sent as these bytes (a change message that many followers
    /// share, encoded once). Only ever sent; decoders never produce it.
    case raw([UInt8])

    /// Appends the RESP2 encoding of this reply to `buffer`. Never throws.
    public func encode(into buffer: inout [UInt8]) {
        switch self {
        case .simple(let text):
            RESPWriter.appendLine(type: ASCII.plus, text, to: &buffer)
        case .error(let text):
            RESPWriter.appendLine(type: ASCII.minus, text, to: &buffer)
        case .integer(let value):
            RESPWriter.appendHeader(type: ASCII.colon, count: value, to: &buffer)
        case .bulk(let bytes):
            RESPWriter.appendBulk(bytes, to: &buffer)
        case .null:
            RESPWriter.appendHeader(type: ASCII.dollar, count: -1, to: &buffer)
        case .nullArray:
            RESPWriter.appendHeader(type: ASCII.star, count: -1, to: &buffer)
        case .array(let elements):
            RESPWriter.appendHeader(type: ASCII.star, count: Int64(elements.count), to: &buffer)
            for element in elements { element.encode(into: &buffer) }
        case .raw(let bytes):
            buffer.append(contentsOf: bytes)
        }
    }

    /// The RESP2 encoding of this reply.
    public var encoded: [UInt8] {
        var buffer: [UInt8] = []
        encode(into: &buffer)
        return buffer
    }
}
