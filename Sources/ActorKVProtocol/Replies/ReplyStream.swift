/// A queue of replies encoded incrementally, so the bytes waiting in an output buffer stay
/// bounded however large one reply is.
///
/// ``encode(into:upTo:)`` appends the encoding of the queued replies, in order, in the stream's
/// ``version`` (RESP2 until a ``Reply/switching(to:_:)`` reply switches it), until the
/// buffer holds `limit` bytes. A bulk string's content is split at the limit and continued on the
/// next call; arrays are walked with a small stack of positions, so a 32 MiB value, or an array of
/// many large values, is never copied into the buffer whole. Lines (headers, status and error
/// lines, integers, a bulk's trailing CRLF) are written whole, so the buffer may end up to one
/// line past the limit.
///
/// Small replies take a fast path: a reply whose encoding fits the room left is written with
/// ``Reply/encode(into:)`` directly, as a plain loop over the replies would.
///
/// Memory: a top-level reply is released as soon as its encoding is complete (or, for one
/// encoded in pieces, once its last piece is written). Elements inside an array are not copied
/// while it is walked, but stay referenced by that array until the whole array is written.
public struct ReplyStream: Sendable {
    /// Replies not yet started; those before `head` are done (and were set to `.null`).
    @usableFromInline private(set) var replies: [Reply] = []
    @usableFromInline private(set) var head = 0
    /// Arrays being walked, outermost first. Each frame holds a reference to the array (never a
    /// copy of its elements) and the index of the next element to start.
    @usableFromInline private(set) var frames: [Frame] = []
    /// The bulk string whose content is being written, when `inBulk` (a slice of the packed
    /// strings it is one of, for ``Reply/bulks(_:asMap:)``).
    private var bulk: ArraySlice<UInt8> = []
    /// Where in `bulk` (an index of the slice) the content not yet written starts.
    private var bulkOffset = 0
    @usableFromInline private(set) var inBulk = false
    /// The protocol the replies are encoded in: RESP2 until a ``Reply/switching(to:_:)`` reply
    /// (HELLO's, RESET's) is encoded, from that reply on.
    public private(set) var version: RESPVersion = .resp2

    @usableFromInline struct Frame: Sendable {
        /// The array's elements, or its packed strings.
        let elements: Elements
        var next: Int

        @usableFromInline enum Elements: Sendable {
            case replies([Reply])
            case strings(BulkStrings)
        }

        /// How many elements the array has.
        var count: Int {
            switch elements {
            case .replies(let replies): return replies.count
            case .strings(let strings): return strings.count
            }
        }
    }

    /// Room a bulk string needs besides its content: the longest `$<len>\r\n` plus the trailing CRLF.
    private static let bulkOverhead = 32
    /// An upper bound on the length of a header or integer line: type byte, sign, 19 digits, CRLF.
    private static let lineBound = 23
    /// How deep ``encodedSize(of:budget:depth:)`` looks into nested arrays before giving up.
    private static let estimateDepth = 8
    private static let crlf: [UInt8] = [ASCII.cr, ASCII.lf]

    /// An empty stream.
    public init() {}

    /// Whether nothing is left to encode: no queued replies and none partly written. (Inlinable:
    /// the event loop asks several times per connection per turn.)
    @inlinable public var isEmpty: Bool {
        head == replies.count && frames.isEmpty && !inBulk
    }

    /// Queues `reply` after those already queued.
    public mutating func append(_ reply: consuming Reply) {
        compactBeforeAppend()
        replies.append(reply)
    }

    /// Queues `newReplies`, in order, after those already queued.
    ///
    /// When no reply is waiting to be started, the array is adopted as it is, without copying.
    /// Pass an array the caller does not keep a reference to: the stream overwrites each reply
    /// with `.null` once written, so a shared array would be copied (its element references) on
    /// the first write.
    public mutating func append(contentsOf newReplies: consuming [Reply]) {
        if head == replies.count {
            replies = consume newReplies
            head = 0
        } else {
            compactBeforeAppend()
            replies.append(contentsOf: newReplies)
        }
    }

    /// Drops the finished prefix when it is at least half the queue, so a stream appended to
    /// while it is being drained does not grow without bound.
    private mutating func compactBeforeAppend() {
        if head > 0 && head >= replies.count / 2 {
            replies.removeFirst(head)
            head = 0
        }
    }

    /// Appends the encoding of the queued replies to `buffer`, in order, until `buffer.count`
    /// reaches `limit` or nothing is left.
    ///
    /// A bulk string's content is split where it reaches `limit`; the rest follows on the next
    /// call. Lines are written whole, so `buffer.count` may exceed `limit` by up to one line. When
    /// `limit > buffer.count` and the stream is not empty, at least one byte is appended (unless
    /// all that is left is ``Reply/nothing``, which is taken and appends none); when
    /// `limit <= buffer.count`, nothing is.
    public mutating func encode(into buffer: inout [UInt8], upTo limit: Int) {
        while buffer.count < limit {
            if inBulk {
                continueBulk(into: &buffer, upTo: limit)
                continue
            }
            if !frames.isEmpty {
                walkStep(into: &buffer, upTo: limit)
                continue
            }
            guard head < replies.count else { break }
            if case .switching(let newVersion, let reply) = replies[head] {
                version = newVersion
                replies[head] = reply
            }
            let room = limit - buffer.count
            if Self.fitsWhole(replies[head], room: room) {
                replies[head].encode(into: &buffer, version: version)
                replies[head] = .null
                head += 1
            } else {
                let reply = replies[head]
                replies[head] = .null
                head += 1
                start(reply, into: &buffer)
            }
        }
        if head == replies.count && head > 0 {
            replies.removeAll(keepingCapacity: true)
            head = 0
        }
    }

    /// Whether `reply`'s whole encoding ends within `room` bytes (or is a single line, which may
    /// be written whole anyway).
    @inline(__always)
    private static func fitsWhole(_ reply: Reply, room: Int) -> Bool {
        switch reply {
        case .bulk(let bytes):
            return bytes.count <= room - bulkOverhead
        case .array(let elements), .map(let elements), .push(let elements):
            return encodedSize(of: elements, budget: room, depth: estimateDepth) != nil
        case .pairs(let elements):
            // Each pair's RESP3 header, `*2\r\n`, is 2 bytes per element.
            return encodedSize(of: elements, budget: room - 2 * elements.count, depth: estimateDepth) != nil
        case .bulks(let strings, _):
            return lineBound + strings.encodedSize <= room
        case .switching(_, let inner):
            return fitsWhole(inner, room: room)
        case .simple, .error, .integer, .null, .nullArray, .double, .boolean, .nothing:
            return true
        }
    }

    /// An upper bound on the encoded size of an array with `elements`, or nil once it exceeds
    /// `budget` (or the nesting is deeper than `depth`). Stops early, so a large array costs
    /// about as much as the part of it that would fit.
    private static func encodedSize(of elements: [Reply], budget: Int, depth: Int) -> Int? {
        var total = lineBound
        if total > budget { return nil }
        for element in elements {
            switch element {
            case .simple(let text), .error(let text):
                total += text.utf8.count + 3
            case .integer, .double, .boolean:
                total += lineBound
            case .null, .nullArray:
                total += 5
            case .nothing:
                break
            case .bulk(let bytes):
                total += bytes.count + bulkOverhead
            case .switching(_, let inner):
                guard depth > 0, let size = encodedSize(of: [inner], budget: budget - total, depth: depth - 1) else { return nil }
                total += size
            case .array(let inner), .map(let inner), .push(let inner):
                guard depth > 0, let size = encodedSize(of: inner, budget: budget - total, depth: depth - 1) else {
                    return nil
                }
                total += size
            case .pairs(let inner):
                guard depth > 0, let size = encodedSize(of: inner, budget: budget - total - 2 * inner.count, depth: depth - 1) else {
                    return nil
                }
                total += size + 2 * inner.count
            case .bulks(let strings, _):
                total += lineBound + strings.encodedSize
            }
            if total > budget { return nil }
        }
        return total
    }

    /// Starts a reply too large for the room left: a bulk's header (its content follows), or an
    /// array's header and a frame to walk its elements. Other replies are written whole.
    private mutating func start(_ reply: Reply, into buffer: inout [UInt8]) {
        switch reply {
        case .bulk(let bytes):
            startBulk(bytes[...], into: &buffer)
        case .array(let elements), .map(let elements), .push(let elements):
            let count = reply.headerCount(elements.count, in: version)
            RESPWriter.appendHeader(type: reply.headerType(in: version), count: Int64(count), to: &buffer)
            if !elements.isEmpty {
                frames.append(Frame(elements: .replies(elements), next: 0))
            }
        case .bulks(let strings, _):
            let count = reply.headerCount(strings.count, in: version)
            RESPWriter.appendHeader(type: reply.headerType(in: version), count: Int64(count), to: &buffer)
            if !strings.isEmpty {
                frames.append(Frame(elements: .strings(strings), next: 0))
            }
        case .pairs:
            // Walked as the arrays it is sent as (made only for a reply too large to write whole).
            start(reply.arrayForm(in: version), into: &buffer)
        case .switching(_, let inner):
            start(inner, into: &buffer)
        case .simple, .error, .integer, .null, .nullArray, .double, .boolean, .nothing:
            reply.encode(into: &buffer, version: version)
        }
    }

    /// Writes a bulk string's header; its content follows (``continueBulk(into:upTo:)``).
    private mutating func startBulk(_ bytes: ArraySlice<UInt8>, into buffer: inout [UInt8]) {
        RESPWriter.appendHeader(type: ASCII.dollar, count: Int64(bytes.count), to: &buffer)
        bulk = bytes
        bulkOffset = bytes.startIndex
        inBulk = true
    }

    /// Writes as much of the current bulk's content as fits below `limit`; when the content is
    /// done, its CRLF, and then releases it.
    private mutating func continueBulk(into buffer: inout [UInt8], upTo limit: Int) {
        let room = limit - buffer.count
        let remaining = bulk.endIndex - bulkOffset
        if remaining > room {
            let end = bulkOffset + room
            buffer.append(contentsOf: bulk[bulkOffset..<end])
            bulkOffset = end
            return
        }
        buffer.append(contentsOf: bulk[bulkOffset...])
        buffer.append(contentsOf: Self.crlf)
        bulk = []
        bulkOffset = 0
        inBulk = false
        popFinishedFrames()
    }

    /// Starts the next element of the innermost array being walked (all the packed strings
    /// that fit, for ``Reply/bulks(_:asMap:)``).
    private mutating func walkStep(into buffer: inout [UInt8], upTo limit: Int) {
        let top = frames.count - 1
        guard case .replies(let elements) = frames[top].elements else {
            walkStrings(into: &buffer, upTo: limit)
            return
        }
        let element = elements[frames[top].next]
        frames[top].next += 1
        if Self.fitsWhole(element, room: limit - buffer.count) {
            element.encode(into: &buffer, version: version)
        } else {
            start(element, into: &buffer)
        }
        if !inBulk { popFinishedFrames() }
    }

    /// Writes the innermost frame's packed strings from the next one on: those that fit whole,
    /// then the start of one that does not.
    private mutating func walkStrings(into buffer: inout [UInt8], upTo limit: Int) {
        let top = frames.count - 1
        guard case .strings(let strings) = frames[top].elements else { return }
        var next = frames[top].next, size = 0
        // Those that fit, found from their framing and content, then written in one call.
        let first = next
        while next < strings.count {
            let length = strings.range(of: next).count
            let more = length + BulkStrings.framing(ofLength: length)
            guard buffer.count + size + more <= limit else { break }
            size += more
            next += 1
        }
        strings.encode(first..<next, into: &buffer)
        if next == first {
            startBulk(strings[next], into: &buffer)
            next += 1
        }
        frames[top].next = next
        if !inBulk { popFinishedFrames() }
    }

    /// Drops the innermost frames whose elements have all been started, releasing their arrays.
    /// Afterwards the innermost frame, if any, has an element left, so a non-empty stream always
    /// has bytes to write.
    private mutating func popFinishedFrames() {
        while let top = frames.indices.last, frames[top].next == frames[top].count {
            frames.removeLast()
        }
    }
}
