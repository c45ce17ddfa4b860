import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// RequestEncoder output, and its round trip through RequestDecoder.
@Suite("Request encoder")
struct RequestEncoderTests {
    static let seed = TestEnvironment.seed(for: "RequestEncoderTests")

    @Test("string and byte arguments encode as a multibulk array")
    func encodes() {
        var fromStrings: [UInt8] = []
        RequestEncoder.encode(["SET", "k", "v\u{e9}"], into: &fromStrings)
        #expect(fromStrings == Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\u{e9}\r\n".utf8))
        var fromBytes: [UInt8] = []
        RequestEncoder.encode([Array("GET".utf8), [0, 13, 10]], into: &fromBytes)
        #expect(fromBytes == Array("*2\r\n$3\r\nGET\r\n$3\r\n\u{0}\r\n\r\n".utf8))
        var empty: [UInt8] = []
        RequestEncoder.encode([String](), into: &empty)
        #expect(empty == Array("*0\r\n".utf8))
    }

    @Test("random binary requests round-trip in every chunking")
    func roundTrip() {
        var rng = SeededGenerator(seed: Self.seed)
        for _ in 0..<200 {
            let requests = (0..<Int.random(in: 1...5, using: &rng)).map { _ in CommandGenerator.arguments(using: &rng) }
            var wire: [UInt8] = []
            for request in requests { RequestEncoder.encode(request, into: &wire) }
            expectDecodes(wire, requests, seed: rng.next())
        }
    }
}
