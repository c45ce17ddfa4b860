/// The RESP version a connection speaks: RESP2 until the client sends `HELLO 3`.
public enum RESPVersion: Int, Sendable, CaseIterable {
    /// RESP2: nulls as `$-1`/`*-1`, maps as flat arrays, pushes as arrays.
    case resp2 = 2
    /// RESP3: nulls as `_`, maps as `%`, doubles as `,`, booleans as `#`, pushes as `>`.
    case resp3 = 3
}

/// A reply, encoded per connection in RESP2 or RESP3 (``encode(into:version:)``): commands make
/// one value and never know which protocol the connection speaks.
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
    /// The null bulk string: RESP2 `$-1\r\n`, RESP3 `_\r\n`.
    case null
    /// The null array (a refused transaction): RESP2 `*-1\r\n`, RESP3 `_\r\n`. Decoders read it
    /// as ``null``.
    case nullArray
    /// An array of replies, `*N\r\n` followed by each element.
    indirect case array([Reply])
    /// A map, its keys and values alternating (an even count): RESP3 `%N\r\n` (N pairs), RESP2
    /// the flat array `*2N\r\n`, as Redis sends HGETALL and HELLO to each.
    indirect case map([Reply])
    /// Keys and values alternating (an even count), sent as pairs: RESP3 an array of
    /// two-element arrays `*N\r\n*2\r\n…` (N pairs), RESP2 the flat array `*2N\r\n`, as Redis
    /// sends HRANDFIELD … WITHVALUES to each.
    indirect case pairs([Reply])
    /// Bulk strings packed in one buffer, sent as ``array(_:)`` of their ``bulk(_:)``s would be
    /// or, `asMap`, as ``map(_:)`` of them (keys and values alternating, an even count): one
    /// value instead of one per string, for replies of many small strings (HGETALL's, HKEYS', a
    /// scan page's entries). Decoders read it as the array or map it is sent as.
    indirect case bulks(BulkStrings, asMap: Bool)
    /// A floating-point number: RESP3 `,1.5\r\n`, RESP2 the bulk string of the same text.
    case double(Double)
    /// A boolean: RESP3 `#t\r\n`/`#f\r\n`, RESP2 the integer 1 or 0.
    case boolean(Bool)
    /// An out-of-band message (a change feed's): RESP3 `>N\r\n`, RESP2 an array.
    indirect case push([Reply])
    /// Switches the connection to `version`, then is `reply` encoded in it (HELLO's reply, which
    /// is already in the version it asks for, and RESET's). Only meaningful as a whole reply.
    indirect case switching(to: RESPVersion, Reply)
    /// No reply at all: nothing is sent, in either protocol. SHUTDOWN's, whose connection is
    /// closed instead once the server has shut down, as Redis's is. Only meaningful as a whole
    /// reply, and only as a connection's last.
    case nothing

    /// Appends the encoding of this reply in `version` to `buffer`. Never throws.
    public func encode(into buffer: inout [UInt8], version: RESPVersion = .resp2) {
        switch self {
        case .simple(let text):
            RESPWriter.appendLine(type: ASCII.plus, text, to: &buffer)
        case .error(let text):
            RESPWriter.appendLine(type: ASCII.minus, text, to: &buffer)
        case .integer(let value):
            RESPWriter.appendHeader(type: ASCII.colon, count: value, to: &buffer)
        case .bulk(let bytes):
            RESPWriter.appendBulk(bytes, to: &buffer)
        case .null, .nullArray:
            if version == .resp3 { RESPWriter.appendNull(to: &buffer); return }
            RESPWriter.appendHeader(type: isNullArray ? ASCII.star : ASCII.dollar, count: -1, to: &buffer)
        case .array(let elements), .map(let elements), .push(let elements):
            RESPWriter.appendHeader(type: headerType(in: version), count: Int64(headerCount(elements.count, in: version)), to: &buffer)
            for element in elements { element.encode(into: &buffer, version: version) }
        case .pairs(let elements):
            guard version == .resp3 else {
                RESPWriter.appendHeader(type: ASCII.star, count: Int64(elements.count), to: &buffer)
                for element in elements { element.encode(into: &buffer, version: version) }
                return
            }
            RESPWriter.appendHeader(type: ASCII.star, count: Int64(elements.count / 2), to: &buffer)
            for pair in stride(from: 0, to: elements.count - 1, by: 2) {
                RESPWriter.appendHeader(type: ASCII.star, count: 2, to: &buffer)
                elements[pair].encode(into: &buffer, version: version)
                elements[pair + 1].encode(into: &buffer, version: version)
            }
        case .bulks(let strings, _):
            RESPWriter.appendHeader(type: headerType(in: version), count: Int64(headerCount(strings.count, in: version)), to: &buffer)
            strings.encode(0..<strings.count, into: &buffer)
        case .double(let value):
            let text = RESPWriter.doubleText(value)
            if version == .resp3 { RESPWriter.appendLine(type: ASCII.comma, text, to: &buffer) } else { RESPWriter.appendBulk(text.utf8, to: &buffer) }
        case .boolean(let value):
            if version == .resp3 { RESPWriter.appendLine(type: ASCII.hash, value ? "t" : "f", to: &buffer) } else { RESPWriter.appendHeader(type: ASCII.colon, count: value ? 1 : 0, to: &buffer) }
        case .switching(let newVersion, let reply):
            reply.encode(into: &buffer, version: newVersion)
        case .nothing:
            return
        }
    }

    /// Whether this is ``nullArray``.
    private var isNullArray: Bool {
        if case .nullArray = self { return true }
        return false
    }

    /// Whether two replies are the same value: the same case and contents, packed strings
    /// (``bulks(_:asMap:)``) being equal to the array or map of ``bulk(_:)``s they stand for,
    /// which they are sent as.
    public static func == (lhs: Reply, rhs: Reply) -> Bool {
        if case .bulks(let strings, let asMap) = lhs {
            if case .bulks(let other, let otherAsMap) = rhs { return asMap == otherAsMap && strings == other }
            return rhs == unpacked(strings, asMap: asMap)
        }
        if case .bulks(let strings, let asMap) = rhs { return lhs == unpacked(strings, asMap: asMap) }
        switch lhs {
        case .simple(let a): if case .simple(let b) = rhs { return a == b }
        case .error(let a): if case .error(let b) = rhs { return a == b }
        case .integer(let a): if case .integer(let b) = rhs { return a == b }
        case .bulk(let a): if case .bulk(let b) = rhs { return a == b }
        case .null: if case .null = rhs { return true }
        case .nullArray: if case .nullArray = rhs { return true }
        case .array(let a): if case .array(let b) = rhs { return a == b }
        case .map(let a): if case .map(let b) = rhs { return a == b }
        case .pairs(let a): if case .pairs(let b) = rhs { return a == b }
        case .push(let a): if case .push(let b) = rhs { return a == b }
        case .double(let a): if case .double(let b) = rhs { return a == b }
        case .boolean(let a): if case .boolean(let b) = rhs { return a == b }
        case .switching(let a, let reply): if case .switching(let b, let other) = rhs { return a == b && reply == other }
        case .nothing: if case .nothing = rhs { return true }
        case .bulks: preconditionFailure("handled above")
        }
        return false
    }

    /// This reply, packed strings (``bulks(_:asMap:)``) as the array or map of ``bulk(_:)``s
    /// they stand for (for a reader that matches on arrays: a client, a test); the elements of
    /// an array are left as they are.
    public var unpacked: Reply {
        guard case .bulks(let strings, let asMap) = self else { return self }
        return Self.unpacked(strings, asMap: asMap)
    }

    /// The array or map of ``bulk(_:)``s that packed `strings` stand for.
    private static func unpacked(_ strings: BulkStrings, asMap: Bool) -> Reply {
        let bulks = (0..<strings.count).map { Reply.bulk(Array(strings[$0])) }
        return asMap ? .map(bulks) : .array(bulks)
    }

    /// This reply as the arrays `version` sends it: a ``pairs(_:)`` reply as RESP3's array of
    /// two-element arrays or RESP2's flat array; any other reply as it is.
    public func arrayForm(in version: RESPVersion) -> Reply {
        guard case .pairs(let elements) = self else { return self }
        guard version == .resp3 else { return .array(elements) }
        return .array(stride(from: 0, to: elements.count - 1, by: 2).map { .array([elements[$0], elements[$0 + 1]]) })
    }

    /// The type byte of an aggregate's header (`*`, `%` or `>`) in `version`.
    func headerType(in version: RESPVersion) -> UInt8 {
        switch self {
        case .map where version == .resp3, .bulks(_, asMap: true) where version == .resp3: return ASCII.percent
        case .push where version == .resp3: return ASCII.greaterThan
        default: return ASCII.star
        }
    }

    /// The count an aggregate's header gives for `elements` elements: pairs for a RESP3 map.
    func headerCount(_ elements: Int, in version: RESPVersion) -> Int {
        guard version == .resp3 else { return elements }
        switch self {
        case .map, .bulks(_, asMap: true): return elements / 2
        default: return elements
        }
    }

    /// The RESP2 encoding of this reply.
    public var encoded: [UInt8] { encoded(in: .resp2) }

    /// The encoding of this reply in `version`.
    public func encoded(in version: RESPVersion) -> [UInt8] {
        var buffer: [UInt8] = []
        encode(into: &buffer, version: version)
        return buffer
    }
}
