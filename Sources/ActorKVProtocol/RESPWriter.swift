/// The pieces of RESP2 output shared by ``Reply`` and ``RequestEncoder``.
enum RESPWriter {
    private static let crlf: [UInt8] = [ASCII.cr, ASCII.lf]

    /// Appends `<type><count>\r\n`.
    static func appendHeader(type: UInt8, count: Int64, to buffer: inout [UInt8]) {
        buffer.append(type)
        ASCIIDecimal.append(count, to: &buffer)
        buffer.append(contentsOf: crlf)
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
        let utf8 = text.utf8
        if utf8.contains(where: isLineBreak) {
            buffer.append(contentsOf: utf8.lazy.map { isLineBreak($0) ? ASCII.space : $0 })
        } else {
            buffer.append(contentsOf: utf8)
        }
        buffer.append(contentsOf: crlf)
    }

    @inline(__always)
    private static func isLineBreak(_ byte: UInt8) -> Bool {
        byte == ASCII.cr || byte == ASCII.lf
    }
}
