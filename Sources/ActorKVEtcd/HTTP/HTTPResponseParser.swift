/// An HTTP/1.1 response, as far as the etcd gateway's answers need: status, whether the server
/// keeps the connection open, and the body.
public struct HTTPResponse: Sendable, Equatable {
    /// The status code (200, 400, 503, …).
    public var status: Int
    /// Whether the connection may carry another request (no `Connection: close`).
    public var keepAlive: Bool
    /// The body, de-chunked.
    public var body: [UInt8]
}

/// Reads HTTP/1.1 responses from bytes as they arrive. Pure: no I/O.
///
/// A body comes with `Content-Length` or `Transfer-Encoding: chunked`; a response with neither
/// ends when the connection does (``finish()``). For a streamed body (etcd's watch), each chunk
/// is handed out as it completes (``nextChunk()``) before the response ends.
public struct HTTPResponseParser: Sendable {
    /// A response the parser cannot read.
    public struct Malformed: Error, Equatable, CustomStringConvertible {
        /// What was wrong.
        public let description: String
    }

    private enum Stage: Sendable {
        case head
        case fixed(remaining: Int)
        case chunkSize
        case chunkData(remaining: Int)
        case chunkEnd
        case trailer
        case untilClose
        case done
    }

    private var buffer: [UInt8] = []
    private var position = 0
    private var stage = Stage.head
    private var status = 0
    private var keepAlive = true
    private var body: [UInt8] = []
    private var chunks: [[UInt8]] = []
    private var current: [UInt8] = []
    /// The longest head accepted.
    static let maxHead = 64 * 1024
    /// The largest body accepted (etcd's default request limit is 1.5 MiB; a range page may be larger).
    static let maxBody = 256 * 1024 * 1024

    /// A parser expecting a response's first byte.
    public init() {}

    /// Adds bytes read from the connection.
    public mutating func feed(_ bytes: some Collection<UInt8>) {
        if position > 0 && position == buffer.count { buffer.removeAll(keepingCapacity: true); position = 0 }
        buffer.append(contentsOf: bytes)
    }

    /// The response, once complete (nil: more bytes are needed).
    public mutating func response() throws(Malformed) -> HTTPResponse? {
        try advance()
        guard case .done = stage else { return nil }
        return HTTPResponse(status: status, keepAlive: keepAlive, body: body)
    }

    /// The next complete chunk of a chunked body (nil: none yet). Chunks taken here are not
    /// part of ``response()``'s body.
    public mutating func nextChunk() throws(Malformed) -> [UInt8]? {
        try advance()
        return chunks.isEmpty ? nil : chunks.removeFirst()
    }

    /// Whether the head has been read and the status is known.
    public var status200: Bool? {
        if case .head = stage { return nil }
        return status == 200
    }

    /// The connection ended: a body read until the close is complete; anything else is cut.
    public mutating func finish() throws(Malformed) -> HTTPResponse {
        try advance()
        switch stage {
        case .untilClose, .done: return HTTPResponse(status: status, keepAlive: false, body: body)
        default: throw Malformed(description: "the connection closed in the middle of a response")
        }
    }

    private mutating func advance() throws(Malformed) {
        while true {
            switch stage {
            case .head:
                guard let end = find([13, 10, 13, 10]) else {
                    if buffer.count - position > Self.maxHead { throw Malformed(description: "response head longer than \(Self.maxHead) bytes") }
                    return
                }
                try readHead(position, end)
                position = end + 4
            case .fixed(let remaining):
                let take = min(remaining, buffer.count - position)
                body.append(contentsOf: buffer[position..<(position + take)])
                position += take
                if take == remaining { stage = .done } else { stage = .fixed(remaining: remaining - take); return }
            case .chunkSize:
                guard let end = find([13, 10]) else { return }
                guard let size = Self.hexadecimal(Self.trimmed(buffer[position..<end].prefix { $0 != UInt8(ascii: ";") })) else {
                    throw Malformed(description: "bad chunk size")
                }
                position = end + 2
                stage = size == 0 ? .trailer : .chunkData(remaining: size)
            case .chunkData(let remaining):
                let take = min(remaining, buffer.count - position)
                current.append(contentsOf: buffer[position..<(position + take)])
                position += take
                guard take == remaining else { stage = .chunkData(remaining: remaining - take); return }
                stage = .chunkEnd
            case .chunkEnd:
                guard buffer.count - position >= 2 else { return }
                guard buffer[position] == 13, buffer[position + 1] == 10 else { throw Malformed(description: "chunk not followed by CRLF") }
                position += 2
                chunks.append(current)
                body.append(contentsOf: current)
                if body.count > Self.maxBody { throw Malformed(description: "response body larger than \(Self.maxBody) bytes") }
                current = []
                stage = .chunkSize
            case .trailer:
                guard let end = find([13, 10]) else { return }
                let empty = end == position
                position = end + 2
                if empty { stage = .done }
            case .untilClose:
                body.append(contentsOf: buffer[position...])
                position = buffer.count
                return
            case .done:
                return
            }
        }
    }

    /// Reads the head in `buffer[start..<end]` (without its final blank line) as bytes: no
    /// string is made unless it is malformed.
    private mutating func readHead(_ start: Int, _ end: Int) throws(Malformed) {
        var lineEnd = find([13, 10], from: start, before: end) ?? end
        let code = Self.statusCode(buffer[start..<lineEnd])
        guard let code else {
            let line = String(decoding: buffer[start..<lineEnd].prefix(80), as: UTF8.self)
            throw Malformed(description: "not an HTTP/1.x status line: '\(line)'")
        }
        status = code
        keepAlive = buffer[start + 7] != UInt8(ascii: "0")
        var length: Int?
        var chunked = false
        var lineStart = lineEnd + 2
        while lineStart < end {
            lineEnd = find([13, 10], from: lineStart, before: end) ?? end
            defer { lineStart = lineEnd + 2 }
            guard let colon = buffer[lineStart..<lineEnd].firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = buffer[lineStart..<colon]
            let value = Self.trimmed(buffer[(colon + 1)..<lineEnd])
            if Self.equalsIgnoringCase(name, "content-length") {
                guard let n = Self.decimal(value), n <= Self.maxBody else {
                    throw Malformed(description: "bad Content-Length '\(String(decoding: value.prefix(40), as: UTF8.self))'")
                }
                length = n
            } else if Self.equalsIgnoringCase(name, "transfer-encoding") {
                chunked = Self.containsIgnoringCase(value, "chunked")
            } else if Self.equalsIgnoringCase(name, "connection") {
                if Self.equalsIgnoringCase(value, "close") { keepAlive = false }
                if Self.equalsIgnoringCase(value, "keep-alive") { keepAlive = true }
            }
        }
        if chunked { stage = .chunkSize } else if let length { stage = length == 0 ? .done : .fixed(remaining: length) } else if code == 204 || code == 304 {
            stage = .done
        } else {
            keepAlive = false
            stage = .untilClose
        }
    }

    /// The status code of a status line `HTTP/1.x CODE[ reason]`, nil if it is not one.
    static func statusCode(_ line: ArraySlice<UInt8>) -> Int? {
        let prefix = Array("HTTP/1.".utf8)
        guard line.count > prefix.count + 2, line.starts(with: prefix) else { return nil }
        let rest = line.dropFirst(prefix.count)
        guard rest.first.map({ $0 &- UInt8(ascii: "0") < 10 }) == true, rest.dropFirst().first == UInt8(ascii: " ") else { return nil }
        let codeText = rest.dropFirst(2).prefix { $0 != UInt8(ascii: " ") }
        guard codeText.count <= 3 else { return nil }
        return decimal(codeText)
    }

    /// A non-negative decimal of at most 18 digits (nil for anything else).
    private static func decimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value = 0
        for byte in digits {
            guard byte &- UInt8(ascii: "0") < 10 else { return nil }
            value = value * 10 + Int(byte &- UInt8(ascii: "0"))
        }
        return value
    }

    /// A chunk size: at most 15 hexadecimal digits (nil for anything else).
    private static func hexadecimal(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 15 else { return nil }
        var value = 0
        for byte in digits {
            let digit: UInt8
            switch lower(byte) {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = lower(byte) - UInt8(ascii: "a") + 10
            default: return nil
            }
            value = value << 4 | Int(digit)
        }
        return value
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
        return slice
    }

    private static func lower(_ byte: UInt8) -> UInt8 {
        byte &- UInt8(ascii: "A") < 26 ? byte | 0x20 : byte
    }

    /// Whether `bytes` spell `word` (lower case ASCII) in any case.
    private static func equalsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ word: StaticString) -> Bool {
        guard bytes.count == word.utf8CodeUnitCount else { return false }
        var index = 0
        for byte in bytes {
            guard lower(byte) == word.utf8Start[index] else { return false }
            index += 1
        }
        return true
    }

    private static func containsIgnoringCase(_ bytes: ArraySlice<UInt8>, _ word: StaticString) -> Bool {
        let count = word.utf8CodeUnitCount
        guard bytes.count >= count else { return false }
        var start = bytes.startIndex
        while start + count <= bytes.endIndex {
            if equalsIgnoringCase(bytes[start..<(start + count)], word) { return true }
            start += 1
        }
        return false
    }

    private func find(_ needle: [UInt8]) -> Int? {
        find(needle, from: position, before: buffer.count)
    }

    /// Where `needle` starts in `buffer[from..<before]`, if it is there whole.
    private func find(_ needle: [UInt8], from: Int, before: Int) -> Int? {
        guard before - from >= needle.count else { return nil }
        var i = from
        while i <= before - needle.count {
            if buffer[i] == needle[0] {
                var match = true
                for j in 1..<needle.count where buffer[i + j] != needle[j] { match = false; break }
                if match { return i }
            }
            i += 1
        }
        return nil
    }
}
