#if canImport(Glibc)
import Glibc
#endif
import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// RESP2 multibulk requests: binary safety, skipped empty requests, each bad header, the limits.
@Suite("Multibulk requests")
struct MultibulkParsingTests {
    static let seed = TestEnvironment.seed(for: "MultibulkParsingTests")

    static let valid: [RequestCase] = [
        RequestCase("one argument", "*1\r\n$4\r\nPING\r\n", args("PING")),
        RequestCase("SET", "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n", args("SET", "key", "value")),
        RequestCase("binary value with NUL, CR and LF", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\na\u{0}\r\nb\n\r\n",
                    args("SET", "k", "a\u{0}\r\nb\n")),
        RequestCase("value that is only CRLF", "*1\r\n$2\r\n\r\n\r\n", args("\r\n")),
        RequestCase("empty bulk", "*2\r\n$3\r\nGET\r\n$0\r\n\r\n", args("GET", "")),
        // Redis skips any count <= 0 as an empty request (`*-2\r\nPING\r\n` answers +PONG).
        RequestCase("*0 and *-1 are skipped", "*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n*0\r\n", args("PING")),
        RequestCase("any negative count is skipped", "*-2\r\nPING\r\n*-1048577\r\n*-9223372036854775808\r\n*1\r\n$1\r\nx\r\n",
                    args("PING"), args("x")),
        RequestCase("pipelined", "*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\n", args("PING"), args("ECHO", "hi")),
        RequestCase("quotes and spaces are plain bytes", "*1\r\n$7\r\n\"a' b\\x\r\n", args("\"a' b\\x")),
        RequestCase("all 256 byte values", bytes: Self.allBytesRequest, [[bytes("SET"), Array(0...255)]]),
        RequestCase("bulk at maxBulkLength", "*1\r\n$4\r\nabcd\r\n", limits: ProtocolLimits(maxBulkLength: 4), args("abcd")),
        RequestCase("arguments at maxArguments", "*2\r\n$1\r\na\r\n$1\r\nb\r\n", limits: ProtocolLimits(maxArguments: 2),
                    args("a", "b")),
    ]

    static var allBytesRequest: [UInt8] {
        var wire: [UInt8] = []
        RequestEncoder.encode([bytes("SET"), Array(0...255)], into: &wire)
        return wire
    }

    @Test("valid multibulk input decodes the same in every chunking", arguments: valid)
    func decodesValid(_ row: RequestCase) {
        expectDecodes(row.input, row.expected, limits: row.limits, seed: Self.seed)
    }

    static let badCount = "invalid multibulk length"
    static let badLength = "invalid bulk length"
    static let badEnd = "expected '\\r\\n' after bulk data"
    static func tooBig(_ bytes: Int, limit: Int) -> String {
        "too big multibulk request: at least \(bytes) bytes, over the limit of \(limit)"
    }
    static let small = ProtocolLimits(maxBulkLength: 1024, maxArguments: 16, maxRequestBytes: 100)

    static let invalid: [RequestErrorCase] = [
        RequestErrorCase("count missing", "*\r\n", badCount),
        RequestErrorCase("count not a number", "*x\r\n", badCount),
        RequestErrorCase("count with trailing letter", "*1a\r\n", badCount),
        RequestErrorCase("count with plus sign", "*+1\r\n", badCount),
        RequestErrorCase("count with space", "* 1\r\n", badCount),
        RequestErrorCase("count with leading zero", "*01\r\n", badCount),
        RequestErrorCase("count -0", "*-0\r\n", badCount),
        RequestErrorCase("negative count overflows", "*-9223372036854775809\r\n", badCount),
        RequestErrorCase("count overflows", "*99999999999999999999\r\n", badCount),
        RequestErrorCase("count ended by LF alone", "*1\n$4\nPING\n", badCount),
        RequestErrorCase("count CR not followed by LF", "*1\rx", badCount),
        RequestErrorCase("endless count header", "*" + String(repeating: "1", count: 100), badCount),
        RequestErrorCase("count over maxArguments", "*17\r\n", "invalid multibulk length: 17 arguments, over the limit of 16", limits: small),
        RequestErrorCase("count over default maxArguments", "*1048577\r\n", "invalid multibulk length: 1048577 arguments, over the limit of 1048576"),
        RequestErrorCase("element without $", "*1\r\nPING\r\n", "expected '$', got 'P'"),
        RequestErrorCase("element starting with a control byte", "*1\r\n\u{1}", "expected '$', got '\\x01'"),
        RequestErrorCase("inline line where a bulk is due", "*2\r\n$1\r\na\r\n\r\n", "expected '$', got '\\x0d'"),
        RequestErrorCase("length missing", "*1\r\n$\r\n", badLength),
        RequestErrorCase("length not a number", "*1\r\n$abc\r\n", badLength),
        RequestErrorCase("length negative", "*1\r\n$-1\r\n", badLength),
        RequestErrorCase("length fractional", "*1\r\n$1.5\r\n", badLength),
        RequestErrorCase("length with leading zero", "*1\r\n$04\r\nPING\r\n", badLength),
        RequestErrorCase("endless length header", "*1\r\n$" + String(repeating: "9", count: 70), badLength),
        RequestErrorCase("length over maxBulkLength, no payload sent", "*1\r\n$1025\r\n", "invalid bulk length: 1025 bytes, over the limit of 1024",
                         limits: small),
        RequestErrorCase("length over default maxBulkLength, no payload sent", "*1\r\n$67108865\r\n",
                         "invalid bulk length: 67108865 bytes, over the limit of 67108864"),
        RequestErrorCase("lengths add up over maxRequestBytes", "*2\r\n$60\r\n" + String(repeating: "v", count: 60) + "\r\n$41\r\n",
                         "too big multibulk request: at least 101 bytes, over the limit of 100", limits: small),
        RequestErrorCase("payload longer than announced", "*1\r\n$1\r\nab\r\n", badEnd),
        RequestErrorCase("payload followed by LF only", "*1\r\n$1\r\na\n\r\n", badEnd),
        RequestErrorCase("payload followed by CR and garbage", "*1\r\n$1\r\na\rX", badEnd),
        RequestErrorCase("error after good requests", "*1\r\n$4\r\nPING\r\n*x\r\n", badCount, before: [args("PING")]),
    ]

    @Test("invalid multibulk input fails the same in every chunking", arguments: invalid)
    func failsInvalid(_ row: RequestErrorCase) {
        expectFails(row.input, row.message, before: row.before, limits: row.limits, seed: Self.seed)
    }

    @Test("requests at maxRequestBytes are accepted")
    func requestAtByteLimit() {
        let limits = ProtocolLimits(maxRequestBytes: 10)
        expectDecodes(bytes("*2\r\n$5\r\nhello\r\n$5\r\nworld\r\n"), [args("hello", "world")], limits: limits, seed: Self.seed)
    }

    /// A request of many one-byte arguments holds about 56 bytes per argument in the server
    /// (each stored on its own), so beyond 64 arguments each counts that much toward
    /// maxRequestBytes, from the `*N` header on; up to 64 (stored flat) only their bytes count.
    @Test("many small arguments count what storing them costs toward maxRequestBytes")
    func perArgumentOverhead() throws {
        func request(_ count: Int) -> [UInt8] {
            bytes("*\(count)\r\n" + String(repeating: "$1\r\na\r\n", count: count))
        }
        let many = 65
        let overhead = many * 56
        expectFails(bytes("*\(many)\r\n"), Self.tooBig(overhead, limit: overhead - 1), limits: ProtocolLimits(maxRequestBytes: overhead - 1),
                    seed: Self.seed)
        expectFails(request(many), Self.tooBig(overhead + many, limit: overhead + many - 1),
                    limits: ProtocolLimits(maxRequestBytes: overhead + many - 1), seed: Self.seed)
        let manyArgs = Array(repeating: bytes("a"), count: many)
        expectDecodes(request(many), [manyArgs], limits: ProtocolLimits(maxRequestBytes: overhead + many), seed: Self.seed)
        let flatArgs = Array(repeating: bytes("a"), count: 64)
        expectDecodes(request(64), [flatArgs], limits: ProtocolLimits(maxRequestBytes: 64), seed: Self.seed)
    }

    @Test("a header announcing the largest bulk is held without its payload")
    func hugeHeaderWaits() throws {
        var decoder = RequestDecoder()
        decoder.append(bytes("*2\r\n$3\r\nSET\r\n$67108864\r\n"))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 0)
        #expect(decoder.hasPartialRequest)
    }

    @Test("unlimited limits (Int.max) neither overflow nor preallocate without bound")
    func unlimitedLimits() throws {
        let unlimited = ProtocolLimits(maxInlineLength: .max, maxBulkLength: .max, maxArguments: .max, maxRequestBytes: .max)
        expectDecodes(bytes("PING\r\n*1\r\n$4\r\nPING\r\n"), [args("PING"), args("PING")], limits: unlimited, seed: Self.seed)
        var decoder = RequestDecoder(limits: unlimited)
        decoder.append(bytes("*2\r\n$1000000000000\r\nabc"))
        #expect(try decoder.next() == nil)
        #expect(decoder.bufferedByteCount == 3)
        // "Unlimited" is read as 2^48 (ProtocolLimits.ceiling).
        expectFails(bytes("*1\r\n$9223372036854775807\r\n"), "invalid bulk length: 9223372036854775807 bytes, over the limit of 281474976710656",
                    limits: unlimited, seed: Self.seed)
        expectFails(bytes("*99999999999999999\r\n"), "invalid multibulk length: 99999999999999999 arguments, over the limit of 281474976710656",
                    limits: unlimited, seed: Self.seed)
    }

    @Test("big payloads decode whole, in small pieces and byte by byte", arguments: [32 * 1024, 100_000])
    func bigPayload(size: Int) {
        var rng = SeededGenerator(seed: Self.seed)
        let value = (0..<size).map { _ in UInt8.random(in: 0...255, using: &rng) }
        var input: [UInt8] = []
        RequestEncoder.encode([bytes("SET"), bytes("k"), value], into: &input)
        RequestEncoder.encode(["GET", "k"], into: &input)
        expectDecodes(input, [[bytes("SET"), bytes("k"), value], args("GET", "k")], seed: Self.seed)
    }

    @Test("nextRequest gives the arguments in place: flat, with a payload taken in place, and inline")
    func requestsInPlace() throws {
        var rng = SeededGenerator(seed: Self.seed)
        let big = (0..<40_000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        let expected: [[[UInt8]]] = [
            args("GET", "ns", "k"),
            [bytes("PUT"), bytes("ns"), [], [0, 13, 10, 255] + bytes(String(repeating: "v", count: 300))],  // outgrows its room
            [bytes("PUT"), bytes("ns"), bytes("big"), big],
            (0..<100).map { Array("arg\($0)".utf8) },  // more than a flat request holds
            args("PING"),
        ]
        var input: [UInt8] = []
        for request in expected.dropLast() { RequestEncoder.encode(request, into: &input) }
        input += bytes("PING\r\n")
        var decoder = RequestDecoder()
        var decoded: [Request] = []
        // Whole, then in small pieces: the payload is taken in place only when it fills the buffer.
        for chunk in [input.count, 7] {
            decoded = []
            var start = 0
            while start < input.count {
                let end = min(input.count, start + chunk)
                decoder.append(Array(input[start..<end]))
                while let request = try decoder.nextRequest() { decoded.append(request) }
                start = end
            }
            #expect(decoded.map(\.arguments) == expected, "chunk \(chunk)")
            #expect(decoded == expected.map(Request.init), "chunk \(chunk)")
            for (request, arguments) in zip(decoded, expected) {
                #expect(request.count == arguments.count)
                for i in arguments.indices {
                    #expect(Array(request[i]) == arguments[i])
                    #expect(request.array(i) == arguments[i])
                }
            }
        }
    }

    @Test("a header announcing many arguments allocates little before they arrive")
    func bigHeaderAllocatesLittle() throws {
        // 100 decoders, each told of 1,048,576 arguments (the default limit) and given the first:
        // a flat table of ends (zero-filled, so resident) would take 4 MiB each, 400 MiB in all.
        // Resident memory is per process and other tests run in parallel: hence the wide margin.
        let before = try #require(Self.residentBytes())
        var decoders: [RequestDecoder] = []
        for _ in 0..<100 {
            var decoder = RequestDecoder()
            decoder.append(bytes("*1048576\r\n$3\r\nDEL\r\n"))
            #expect(try decoder.next() == nil)
            decoders.append(decoder)
        }
        let grown = try #require(Self.residentBytes()) - before
        #expect(grown < 100 << 20, "100 pending headers took \(grown) bytes")
        withExtendedLifetime(decoders) {}
    }

    /// VmRSS of this process, from /proc/self/status.
    static func residentBytes() -> Int? {
        let fd = open("/proc/self/status", O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 8192)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return nil }
        let text = String(decoding: buffer[0..<n], as: UTF8.self)
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ")[1]) else { return nil }
        return kib * 1024
    }

    @Test("many arguments in one request")
    func manyArguments() {
        let words = (0..<5000).map { Array("w\($0)".utf8) }
        var input: [UInt8] = []
        RequestEncoder.encode(words, into: &input)
        expectDecodes(input, [words], seed: Self.seed)
    }
}
