/// Writes the pieces of a push message straight into a buffer, in the bytes ``Reply`` would
/// encode (`>N` in RESP3, `*N` in RESP2 for the push; nulls as `_` or `$-1`): for a message sent
/// so often that building a ``Reply`` for each would cost more than writing it (a change
/// feed's, encoded once per change).
public enum PushWriter {
    /// Appends the header of a push of `count` elements.
    public static func appendPushHeader(count: Int, version: RESPVersion, to buffer: inout [UInt8]) {
        RESPWriter.appendHeader(type: version == .resp3 ? ASCII.greaterThan : ASCII.star, count: Int64(count), to: &buffer)
    }

    /// Appends the header of an array of `count` elements (the same in both versions).
    public static func appendArrayHeader(count: Int, to buffer: inout [UInt8]) {
        RESPWriter.appendHeader(type: ASCII.star, count: Int64(count), to: &buffer)
    }

    /// Appends a bulk string.
    public static func appendBulk(_ bytes: some Collection<UInt8>, to buffer: inout [UInt8]) {
        RESPWriter.appendBulk(bytes, to: &buffer)
    }

    /// Appends a bulk string held in an array: the overload callers in other modules reach
    /// for keys and values. A generic function is not specialized across modules, so the
    /// `some Collection` one, called from the server with an array, copied it byte by byte
    /// through the collection's witnesses (most of the change tape's encoding, which took a
    /// fifth of the server's CPU under a flood of changes).
    public static func appendBulk(_ bytes: [UInt8], to buffer: inout [UInt8]) {
        RESPWriter.appendBulk(bytes, to: &buffer)
    }

    /// Appends an integer.
    public static func appendInteger(_ value: Int64, to buffer: inout [UInt8]) {
        RESPWriter.appendHeader(type: ASCII.colon, count: value, to: &buffer)
    }

    /// Appends the null bulk string.
    public static func appendNull(version: RESPVersion, to buffer: inout [UInt8]) {
        if version == .resp3 { RESPWriter.appendNull(to: &buffer) } else { RESPWriter.appendHeader(type: ASCII.dollar, count: -1, to: &buffer) }
    }
}
