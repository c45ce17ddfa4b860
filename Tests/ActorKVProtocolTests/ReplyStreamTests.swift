import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// ReplyStream: incremental encoding gives the same bytes as `Reply.encode`, in bounded pieces,
/// and releases what it has written.
@Suite("Reply stream")
struct ReplyStreamTests {
    static let seed = TestEnvironment.seed(for: "ReplyStreamTests")

    /// The longest header or integer line: type byte, sign, 19 digits, CRLF.
    static let headerLine = 23

    /// The concatenated `Reply.encode` of `replies`, each in the version the stream is in then
    /// (RESP2 until a switching reply), packed strings encoded as the array or map of bulks they
    /// stand for.
    static func expected(_ replies: [Reply]) -> [UInt8] {
        var bytes: [UInt8] = []
        var version = RESPVersion.resp2
        for reply in replies {
            if case .switching(let next, _) = reply { version = next }
            unpacked(reply).encode(into: &bytes, version: version)
        }
        return bytes
    }

    /// `reply` with every ``Reply/bulks(_:asMap:)`` in it replaced by the array or map of
    /// ``Reply/bulk(_:)``s it stands for.
    static func unpacked(_ reply: Reply) -> Reply {
        switch reply {
        case .bulks(let strings, let asMap):
            let bulks = (0..<strings.count).map { Reply.bulk(Array(strings[$0])) }
            return asMap ? .map(bulks) : .array(bulks)
        case .array(let elements): return .array(elements.map(unpacked))
        case .map(let elements): return .map(elements.map(unpacked))
        case .pairs(let elements): return .pairs(elements.map(unpacked))
        case .push(let elements): return .push(elements.map(unpacked))
        case .switching(let version, let inner): return .switching(to: version, unpacked(inner))
        case .simple, .error, .integer, .bulk, .null, .nullArray, .double, .boolean, .nothing: return reply
        }
    }

    /// Encodes everything in `stream`, `limit` bytes at a time into an emptied buffer (as a
    /// socket that takes all it is given); returns the bytes and the size of each piece.
    static func drain(_ stream: inout ReplyStream, limit: Int) -> (bytes: [UInt8], pieces: [Int]) {
        var bytes: [UInt8] = []
        var pieces: [Int] = []
        var buffer: [UInt8] = []
        while !stream.isEmpty {
            buffer.removeAll(keepingCapacity: true)
            stream.encode(into: &buffer, upTo: limit)
            bytes += buffer
            pieces.append(buffer.count)
            if buffer.isEmpty { break }  // no progress: fail below rather than loop forever
        }
        return (bytes, pieces)
    }

    @Test("a few replies encode as Reply.encode does, with room for all and one byte at a time")
    func smallReplies() {
        let replies: [Reply] = [
            .simple("OK"), .error("ERR no"), .integer(-42), .bulk(bytes("abc")), .bulk([]), .null, .array([]),
            .array([.integer(1), .bulk(bytes("x")), .null, .array([.simple("OK"), .array([])]), .array([])]),
        ]
        for limit in [1, 2, 7, 64, Int.max] {
            var stream = ReplyStream()
            #expect(stream.isEmpty)
            stream.append(contentsOf: replies)
            #expect(!stream.isEmpty)
            let (output, _) = Self.drain(&stream, limit: limit)
            #expect(Self.difference(output, Self.expected(replies)) == nil, "limit \(limit)")
            #expect(stream.isEmpty)
        }
    }

    @Test("random reply trees under random limits give Reply.encode's bytes, in bounded pieces, in RESP2 and RESP3")
    func randomTrees() {
        var rng = SeededGenerator(seed: Self.seed)
        for iteration in 0..<TestEnvironment.fuzzIterations(default: 1000) {
            var batches = (0..<Int.random(in: 1...4, using: &rng)).map { _ in
                (0..<Int.random(in: 0...6, using: &rng)).map { _ in Self.randomReply(depth: 3, using: &rng) }
            }
            // Every other one in RESP3, switched to first, as HELLO 3 does.
            if iteration % 2 == 1 { batches[0].insert(.switching(to: .resp3, .simple("OK")), at: 0) }
            guard let failure = Self.check(batches, using: &rng) else { continue }
            Issue.record("iteration \(iteration) (seed \(Self.seed)): \(failure)")
            return
        }
    }

    /// Feeds `batches` to a stream (appending the later ones at random points, often in the
    /// middle of a reply) under random limits and partial drains; describes the first failure.
    static func check(_ batches: [[Reply]], using rng: inout SeededGenerator) -> String? {
        let all = batches.flatMap { $0 }
        let wanted = expected(all)
        let longestLine = max(headerLine, all.map(longestLine(in:)).max() ?? 0)
        var stream = ReplyStream()
        var remaining = batches[...]
        var sent: [UInt8] = []
        var buffer: [UInt8] = []
        var calls = 0
        while true {
            // isEmpty is kept by the stream as it changes: it must say what encoding a copy finds.
            var copy = stream
            var rest: [UInt8] = []
            copy.encode(into: &rest, upTo: Int.max)
            if stream.isEmpty != rest.isEmpty { return "isEmpty is \(stream.isEmpty) with \(rest.count) bytes left to encode" }
            if let batch = remaining.first, stream.isEmpty || Int.random(in: 0..<8, using: &rng) == 0 {
                remaining = remaining.dropFirst()
                if batch.count == 1 && Bool.random(using: &rng) {
                    stream.append(batch[0])
                } else {
                    stream.append(contentsOf: batch)
                }
                continue
            }
            if stream.isEmpty { break }
            calls += 1
            if calls > 10_000_000 { return "no end after \(calls) calls" }
            let before = buffer.count
            let limit = randomLimit(above: before, using: &rng)
            stream.encode(into: &buffer, upTo: limit)
            if limit <= before {
                if buffer.count != before {
                    return "limit \(limit) <= \(before) bytes, yet \(buffer.count - before) added"
                }
            } else {
                if buffer.count == before { return "no progress with limit \(limit) over \(before) bytes" }
                if buffer.count - limit >= longestLine {
                    return "buffer \(buffer.count) bytes with limit \(limit) (longest line \(longestLine))"
                }
                if buffer.count < limit && !stream.isEmpty {
                    return "stopped at \(buffer.count) bytes under limit \(limit) with replies left"
                }
            }
            // The socket takes all, some or none of the buffer (all once it is large, so a
            // trickle of one-byte limits does not move megabytes each time).
            let count = buffer.count > 65_536 || Bool.random(using: &rng)
                ? buffer.count : Int.random(in: 0...buffer.count, using: &rng)
            sent += buffer[..<count]
            buffer.removeFirst(count)
        }
        sent += buffer
        if !remaining.isEmpty { return "batches left unappended" }
        return difference(sent, wanted)
    }

    /// Where `output` departs from `wanted`, briefly (arrays of megabytes are not printed).
    static func difference(_ output: [UInt8], _ wanted: [UInt8]) -> String? {
        guard output != wanted else { return nil }
        let first = (0..<min(output.count, wanted.count)).first { output[$0] != wanted[$0] }
            ?? min(output.count, wanted.count)
        return "\(output.count) bytes vs \(wanted.count) expected; first difference at \(first): " +
            show(Array(output[first...].prefix(60))) + " vs " + show(Array(wanted[first...].prefix(60)))
    }

    /// One byte past the buffer, a little or a lot past it, huge, or at or below it.
    static func randomLimit(above count: Int, using rng: inout SeededGenerator) -> Int {
        switch Int.random(in: 0..<40, using: &rng) {
        case 0..<10: return count + 1
        case 10..<18: return count + Int.random(in: 1...64, using: &rng)
        case 18..<26: return count + Int.random(in: 20...40, using: &rng)
        case 26..<33: return count + Int.random(in: 1...4096, using: &rng)
        case 33..<36: return count + Int.random(in: 1...100_000, using: &rng)
        case 36: return Int.max
        default: return Int.random(in: 0...count, using: &rng)
        }
    }

    /// A random reply: nesting, empty and huge bulks, nulls, integers, errors, empty arrays.
    static func randomReply(depth: Int, using rng: inout SeededGenerator) -> Reply {
        switch Int.random(in: 0..<(depth > 0 ? 10 : 7), using: &rng) {
        case 0: return .simple(ReplyGenerator.text(using: &rng))
        case 1: return .error("ERR " + ReplyGenerator.text(using: &rng))
        case 2: return .integer(Int64.random(in: .min ... .max, using: &rng) >> Int64.random(in: 0...63, using: &rng))
        case 3: return .null
        case 4: return .bulk([])
        case 5: return .bulk(pattern(count: Int.random(in: 1...40, using: &rng), using: &rng))
        case 6:
            let huge = Int.random(in: 0..<8, using: &rng) == 0
            return .bulk(pattern(count: Int.random(in: huge ? 20_000...150_000 : 41...3_000, using: &rng), using: &rng))
        case 7: return .array([])
        case 8 where Bool.random(using: &rng):
            // Pairs: flat in RESP2, an array of arrays of two in RESP3 (see the RESP3 test below).
            let count = 2 * Int.random(in: 0...(Int.random(in: 0..<4, using: &rng) == 0 ? 20 : 3), using: &rng)
            return .pairs((0..<count).map { _ in randomReply(depth: depth - 1, using: &rng) })
        case 9 where Bool.random(using: &rng):
            // Packed strings, as an array or a map: small ones written many at a time, a huge
            // one split as a bulk is.
            let count = 2 * Int.random(in: 0...(Int.random(in: 0..<4, using: &rng) == 0 ? 60 : 4), using: &rng)
            var strings = (0..<count).map { _ in
                switch Int.random(in: 0..<20, using: &rng) {
                case 0: return [UInt8]()
                case 1..<5: return pattern(count: Int.random(in: 8...12, using: &rng), using: &rng)
                default: return pattern(count: Int.random(in: 1...300, using: &rng), using: &rng)
                }
            }
            // Now and then one huge (a check drains a copy of the stream at every step: more would be slow).
            if count > 0 && Int.random(in: 0..<16, using: &rng) == 0 {
                strings[Int.random(in: 0..<count, using: &rng)] = pattern(count: Int.random(in: 20_000...60_000, using: &rng), using: &rng)
            }
            return .bulks(BulkStrings(strings), asMap: Bool.random(using: &rng))
        default:
            let count = Int.random(in: 0...(Int.random(in: 0..<4, using: &rng) == 0 ? 40 : 5), using: &rng)
            return .array((0..<count).map { _ in randomReply(depth: depth - 1, using: &rng) })
        }
    }

    /// A byte pattern with no short period, so a dropped, repeated or misplaced piece of a bulk shows.
    static let patternSource: [UInt8] = (0..<(2 * 65_521 + 150_000)).map {
        UInt8(truncatingIfNeeded: ($0 % 65_521) * 7 + $0 / 251)
    }

    /// `count` bytes of the pattern from a random place (cheaper than random bytes).
    static func pattern(count: Int, using rng: inout SeededGenerator) -> [UInt8] {
        let start = Int.random(in: 0..<(patternSource.count - count), using: &rng)
        return Array(patternSource[start..<(start + count)])
    }

    /// The longest status or error line in `reply`, encoded.
    static func longestLine(in reply: Reply) -> Int {
        switch reply {
        case .simple(let text), .error(let text): text.utf8.count + 3
        case .array(let elements), .map(let elements), .push(let elements), .pairs(let elements): elements.map(longestLine(in:)).max() ?? 0
        case .switching(_, let inner): longestLine(in: inner)
        case .double, .boolean: 32
        case .integer, .bulk, .bulks, .null, .nullArray, .nothing: 0
        }
    }

    @Test("a 10 MiB bulk, alone or in a SCAN-shaped array, goes out in 64 KiB pieces")
    func hugeBulkInPieces() {
        let limit = 64 * 1024
        let value = (0..<(10 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let shapes: [[Reply]] = [
            [.bulk(value)],
            [.simple("OK"), .array([.bulk(bytes("0")), .array([.bulk(bytes("k1")), .bulk(value), .bulk(bytes("k2")),
                                                               .bulk(value)])]), .integer(7)],
        ]
        for replies in shapes {
            // An emptied buffer each call, as a socket that takes everything.
            var stream = ReplyStream()
            stream.append(contentsOf: replies)
            let (output, pieces) = Self.drain(&stream, limit: limit)
            #expect(Self.difference(output, Self.expected(replies)) == nil)
            #expect(stream.isEmpty)
            #expect(pieces.count >= output.count / (limit + Self.headerLine))
            #expect(pieces.max()! <= limit + Self.headerLine, "largest piece \(pieces.max()!)")

            // A buffer that keeps its bytes: each call may add 64 KiB more.
            stream.append(contentsOf: replies)
            var buffer: [UInt8] = []
            var calls = 0
            var largestExcess = Int.min
            while !stream.isEmpty && calls < 10_000 {
                let target = buffer.count + limit
                stream.encode(into: &buffer, upTo: target)
                largestExcess = max(largestExcess, buffer.count - target)
                calls += 1
            }
            #expect(Self.difference(buffer, Self.expected(replies)) == nil)
            #expect(calls >= buffer.count / (limit + Self.headerLine))
            #expect(largestExcess <= Self.headerLine, "exceeded the limit by \(largestExcess)")
        }
    }

    @Test("replies appended while one is partly written follow it, in order")
    func appendWhilePartial() {
        let big = (0..<200_000).map { UInt8(truncatingIfNeeded: $0) }
        var stream = ReplyStream()
        stream.append(contentsOf: [.simple("first"), .array([.integer(1), .bulk(big), .array([.bulk(big)])]), .null])
        var output: [UInt8] = []
        stream.encode(into: &output, upTo: 1000)  // into the first big bulk
        stream.append(.integer(2))
        stream.encode(into: &output, upTo: output.count + 250_000)  // into the second
        stream.append(contentsOf: [.simple("after"), .bulk(big)])
        stream.append(contentsOf: [])
        stream.encode(into: &output, upTo: output.count + 100)
        stream.append(contentsOf: [.error("ERR last")])
        while !stream.isEmpty { stream.encode(into: &output, upTo: output.count + 4096) }
        let wanted = Self.expected([
            .simple("first"), .array([.integer(1), .bulk(big), .array([.bulk(big)])]), .null, .integer(2),
            .simple("after"), .bulk(big), .error("ERR last"),
        ])
        #expect(Self.difference(output, wanted) == nil)
    }

    /// Whether `bytes` holds the only reference to its storage: writing to shared storage copies
    /// it first, which moves it. (Afterwards `bytes` is unique either way.)
    static func isUnique(_ bytes: inout [UInt8]) -> Bool {
        let before = bytes.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
        let during = bytes.withUnsafeMutableBufferPointer { buffer in
            buffer[0] = buffer[0]
            return UnsafeRawPointer(buffer.baseAddress)
        }
        return before == during
    }

    @Test("a written reply is not retained; one not yet written is")
    func releasesWrittenReplies() {
        var small = [UInt8](repeating: 1, count: 10)
        var pending = [UInt8](repeating: 2, count: 1000)
        var stream = ReplyStream()
        stream.append(contentsOf: [.bulk(small), .bulk(pending), .simple("queued")])
        var buffer: [UInt8] = []
        stream.encode(into: &buffer, upTo: 50)  // `small` whole, then a piece of `pending`
        let smallReleased = Self.isUnique(&small)
        let pendingHeld = !Self.isUnique(&pending)
        #expect(smallReleased)
        #expect(pendingHeld, "control: the stream still needs this one")
        _ = Self.drain(&stream, limit: 100)

        // Written in pieces, alone and inside nested arrays, with a reply still queued behind.
        var alone = [UInt8](repeating: 3, count: 100_000)
        var outer = [UInt8](repeating: 4, count: 100_000)
        var inner = [UInt8](repeating: 5, count: 100_000)
        var behind = [UInt8](repeating: 6, count: 100_000)
        // The length of the first two replies, from replies of the same shape (the test must not
        // hold references to the queued ones).
        let writtenCount = Self.expected([
            .bulk(Array(alone)), .array([.integer(1), .bulk(Array(outer)), .array([.bulk(Array(inner))])]),
        ]).count
        stream.append(contentsOf: [
            .bulk(alone), .array([.integer(1), .bulk(outer), .array([.bulk(inner)])]), .bulk(behind), .simple("queued"),
        ])
        var sent = 0
        while sent < writtenCount {
            buffer.removeAll()
            stream.encode(into: &buffer, upTo: 4096)
            sent += buffer.count
        }
        #expect(sent < writtenCount + 4096)
        let released = [Self.isUnique(&alone), Self.isUnique(&outer), Self.isUnique(&inner)]
        let behindHeld = !Self.isUnique(&behind)
        #expect(released == [true, true, true], "alone, outer, inner")
        #expect(behindHeld, "control: the stream still needs this one")
        _ = Self.drain(&stream, limit: 4096)
        #expect(stream.isEmpty)
    }
}
