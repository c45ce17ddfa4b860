/// Encodes a request as a RESP2 multibulk array, for clients.
public enum RequestEncoder {
    /// Appends `*N\r\n` then `$len\r\n<arg>\r\n` for each argument (binary safe). Never throws.
    public static func encode(_ arguments: [[UInt8]], into buffer: inout [UInt8]) {
        RESPWriter.appendHeader(type: ASCII.star, count: Int64(arguments.count), to: &buffer)
        for argument in arguments {
            RESPWriter.appendBulk(argument, to: &buffer)
        }
    }

    /// Appends the multibulk encoding of the UTF-8 bytes of each argument. Never throws.
    public static func encode(_ arguments: [String], into buffer: inout [UInt8]) {
        RESPWriter.appendHeader(type: ASCII.star, count: Int64(arguments.count), to: &buffer)
        for argument in arguments {
            RESPWriter.appendBulk(argument.utf8, to: &buffer)
        }
    }
}
