/// The pieces of RESP output shared by ``Reply``, ``ReplyStream`` and ``RequestEncoder``.
enum RESPWriter {
    private static let crlf: [UInt8] = [ASCII.cr, ASCII.lf]

    /// Appends `<type><count>\r\n`.
    static func appendHeader(type: UInt8, count: Int64, to buffer: inout [UInt8]) {
        buffer.append(type)
        ASCIIDecimal.append(count, to: &buffer)
        buffer.append(contentsOf: crlf)
    }

    /// Appends RESP3's null, `_\r\n`.
    static func appendNull(to buffer: inout [UInt8]) {
        buffer.append(ASCII.underscore)
        buffer.append(contentsOf: crlf)
    }

    /// A double as Redis writes one: `inf`, `-inf`, `nan`, an integral value without a fraction
    /// (`3`), anything else in Swift's shortest round-tripping form (`1.5`, `1e-07`).
    static func doubleText(_ value: Double) -> String {
        if value.isNaN { return "nan" }
        if value.isInfinite { return value < 0 ? "-inf" : "inf" }
        if value == value.rounded(), abs(value) < 1e17 { return String(Int64(value)) }
        return value.description
    }

    /// Appends `$<len>\r\n<bytes>\r\n`.
    static func appendBulk(_ bytes: some Collection<UInt8>, to buffer: inout [UInt8]) {
        appendHeader(type: ASCII.dollar, count: Int64(bytes.count), to: &buffer)
        buffer.append(contentsOf: bytes)
        buffer.append(contentsOf: crlf)
    }

    /// Appends `<type><text>\r\n`, with CR and LF in `text` replaced by spaces.
    static func appendLine(type: UInt8, _ text: String, to buffer: inout [UInt8]) {
        buffer.append(type)
        // A native or small string's bytes, read in place: stepping through its UTF8View one
        // index at a time cost as much as the rest of a `+QUEUED` reply.
        let appended: Void? = text.utf8.withContiguousStorageIfAvailable { bytes in
            appendReplacingLineBreaks(bytes, to: &buffer)
        }
        if appended == nil { appendReplacingLineBreaks(text.utf8, to: &buffer) }
        buffer.append(contentsOf: crlf)
    }

    /// Appends `bytes` with each CR and LF replaced by a space.
    private static func appendReplacingLineBreaks<Bytes: Collection<UInt8>>(_ bytes: Bytes, to buffer: inout [UInt8]) {
        if bytes.contains(where: isLineBreak) {
            buffer.append(contentsOf: bytes.lazy.map { isLineBreak($0) ? ASCII.space : $0 })
        } else {
            buffer.append(contentsOf: bytes)
        }
    }

    @inline(__always)
    private static func isLineBreak(_ byte: UInt8) -> Bool {
        byte == ASCII.cr || byte == ASCII.lf
    }
}
