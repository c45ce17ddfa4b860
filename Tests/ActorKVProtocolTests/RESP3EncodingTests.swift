import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// One reply value, two encodings: each form in RESP2 and RESP3, and a stream that switches
/// protocol at a HELLO's reply, in every chunking.
@Suite("Replies in RESP2 and RESP3")
struct RESP3EncodingTests {
    struct Row: Sendable, CustomTestStringConvertible {
        let reply: Reply
        let resp2: String
        let resp3: String
        var testDescription: String { resp3.debugDescription }
    }

    static let rows: [Row] = [
        Row(reply: .null, resp2: "$-1\r\n", resp3: "_\r\n"),
        Row(reply: .nullArray, resp2: "*-1\r\n", resp3: "_\r\n"),
        Row(reply: .map([.bulk(Array("a".utf8)), .integer(1), .bulk(Array("b".utf8)), .null]),
            resp2: "*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n$-1\r\n", resp3: "%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n_\r\n"),
        Row(reply: .map([]), resp2: "*0\r\n", resp3: "%0\r\n"),
        Row(reply: .pairs([.bulk(Array("a".utf8)), .bulk(Array("1".utf8)), .bulk(Array("b".utf8)), .null]),
            resp2: "*4\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$-1\r\n", resp3: "*2\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*2\r\n$1\r\nb\r\n_\r\n"),
        Row(reply: .pairs([]), resp2: "*0\r\n", resp3: "*0\r\n"),
        Row(reply: .bulks(BulkStrings([Array("a".utf8), Array("1".utf8), [], Array("0123456789".utf8)]), asMap: true),
            resp2: "*4\r\n$1\r\na\r\n$1\r\n1\r\n$0\r\n\r\n$10\r\n0123456789\r\n", resp3: "%2\r\n$1\r\na\r\n$1\r\n1\r\n$0\r\n\r\n$10\r\n0123456789\r\n"),
        Row(reply: .bulks(BulkStrings([Array("k".utf8), Array("v".utf8)]), asMap: false),
            resp2: "*2\r\n$1\r\nk\r\n$1\r\nv\r\n", resp3: "*2\r\n$1\r\nk\r\n$1\r\nv\r\n"),
        Row(reply: .bulks(BulkStrings(), asMap: true), resp2: "*0\r\n", resp3: "%0\r\n"),
        Row(reply: .array([.pairs([.integer(1), .integer(2)])]), resp2: "*1\r\n*2\r\n:1\r\n:2\r\n", resp3: "*1\r\n*1\r\n*2\r\n:1\r\n:2\r\n"),
        Row(reply: .push([.bulk(Array("change".utf8)), .integer(3)]), resp2: "*2\r\n$6\r\nchange\r\n:3\r\n", resp3: ">2\r\n$6\r\nchange\r\n:3\r\n"),
        Row(reply: .double(1.5), resp2: "$3\r\n1.5\r\n", resp3: ",1.5\r\n"),
        Row(reply: .double(3), resp2: "$1\r\n3\r\n", resp3: ",3\r\n"),
        Row(reply: .double(-.infinity), resp2: "$4\r\n-inf\r\n", resp3: ",-inf\r\n"),
        Row(reply: .double(.nan), resp2: "$3\r\nnan\r\n", resp3: ",nan\r\n"),
        Row(reply: .boolean(true), resp2: ":1\r\n", resp3: "#t\r\n"),
        Row(reply: .boolean(false), resp2: ":0\r\n", resp3: "#f\r\n"),
        Row(reply: .array([.null, .map([.integer(1), .nullArray])]), resp2: "*2\r\n$-1\r\n*2\r\n:1\r\n*-1\r\n", resp3: "*2\r\n_\r\n%1\r\n:1\r\n_\r\n"),
        Row(reply: .simple("OK"), resp2: "+OK\r\n", resp3: "+OK\r\n"),
        Row(reply: .switching(to: .resp3, .null), resp2: "_\r\n", resp3: "_\r\n"),
        Row(reply: .switching(to: .resp2, .null), resp2: "$-1\r\n", resp3: "$-1\r\n"),
        Row(reply: .nothing, resp2: "", resp3: ""),
    ]

    @Test("each form encodes to its RESP2 and its RESP3 bytes", arguments: rows)
    func encodings(_ row: Row) {
        #expect(String(decoding: row.reply.encoded(in: .resp2), as: UTF8.self) == row.resp2)
        #expect(String(decoding: row.reply.encoded(in: .resp3), as: UTF8.self) == row.resp3)
        #expect(row.reply.encoded == row.reply.encoded(in: .resp2))
    }

    @Test("no reply (SHUTDOWN's) adds no bytes to a stream, which still empties, in every chunking")
    func streamOfNothing() {
        for chunk in [1, 2, 4096] {
            var stream = ReplyStream()
            stream.append(contentsOf: [.simple("OK"), .nothing])
            var out: [UInt8] = []
            var calls = 0
            while !stream.isEmpty && calls < 100 {
                stream.encode(into: &out, upTo: out.count + chunk)
                calls += 1
            }
            #expect(String(decoding: out, as: UTF8.self) == "+OK\r\n", "in pieces of \(chunk)")
            #expect(stream.isEmpty)
        }
    }

    @Test("a stream encodes in RESP2 until a switching reply, then in its version, in every chunking and for large replies too")
    func streamSwitches() {
        let big = Reply.bulk(Array(repeating: 0x61, count: 200_000))
        let bigMap = Reply.map((0..<2000).flatMap { [Reply.bulk(Array("k\($0)".utf8)), .bulk(Array(repeating: 0x62, count: 100))] })
        let replies: [Reply] = [.null, bigMap, .switching(to: .resp3, .map([.bulk(Array("proto".utf8)), .integer(3)])), .null, bigMap, big,
                                .push([.bulk(Array("change".utf8)), .null]), .switching(to: .resp2, .simple("RESET")), .null, .push([.null])]
        var expected: [UInt8] = []
        var version = RESPVersion.resp2
        for reply in replies {
            if case .switching(let next, _) = reply { version = next }
            reply.encode(into: &expected, version: version)
        }
        for chunk in [1, 13, 4096, 1 << 20] {
            var stream = ReplyStream()
            stream.append(contentsOf: replies)
            var out: [UInt8] = []
            while !stream.isEmpty { stream.encode(into: &out, upTo: out.count + chunk) }
            #expect(out == expected, "in pieces of \(chunk)")
            #expect(stream.version == .resp2)
        }
    }
}
