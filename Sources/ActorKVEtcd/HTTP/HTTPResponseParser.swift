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
                try readHead(Array(buffer[position..<end]))
                position = end + 4
            case .fixed(let remaining):
                let take = min(remaining, buffer.count - position)
                body.append(contentsOf: buffer[position..<(position + take)])
                position += take
                if take == remaining { stage = .done } else { stage = .fixed(remaining: remaining - take); return }
            case .chunkSize:
                guard let end = find([13, 10]) else { return }
                let line = buffer[position..<end].prefix { $0 != UInt8(ascii: ";") }
                guard let size = Int(String(decoding: line, as: UTF8.self).trimmingSpaces, radix: 16), size >= 0 else {
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

    private mutating func readHead(_ head: [UInt8]) throws(Malformed) {
        let lines = String(decoding: head, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.first.map(String.init) ?? ""
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let code = Int(parts[1]) else {
            throw Malformed(description: "not an HTTP/1.x status line: '\(statusLine.prefix(80))'")
        }
        status = code
        keepAlive = parts[0] != "HTTP/1.0"
        var length: Int?
        var chunked = false
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = String(line[line.index(after: colon)...]).trimmingSpaces
            switch name {
            case "content-length":
                guard let n = Int(value), n >= 0, n <= Self.maxBody else { throw Malformed(description: "bad Content-Length '\(value)'") }
                length = n
            case "transfer-encoding": chunked = value.lowercased().contains("chunked")
            case "connection":
                if value.lowercased() == "close" { keepAlive = false }
                if value.lowercased() == "keep-alive" { keepAlive = true }
            default: break
            }
        }
        if chunked { stage = .chunkSize } else if let length { stage = length == 0 ? .done : .fixed(remaining: length) } else if code == 204 || code == 304 {
            stage = .done
        } else {
            keepAlive = false
            stage = .untilClose
        }
    }

    private func find(_ needle: [UInt8]) -> Int? {
        guard buffer.count - position >= needle.count else { return nil }
        var i = position
        while i <= buffer.count - needle.count {
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

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
