import ActorKVProtocol
import Testing

/// One row of a request table: input bytes and the requests they must decode to.
struct RequestCase: Sendable, CustomTestStringConvertible {
    let name: String
    let input: [UInt8]
    let expected: [[[UInt8]]]
    var limits = ProtocolLimits()

    init(_ name: String, _ input: String, limits: ProtocolLimits = ProtocolLimits(), _ expected: [[UInt8]]...) {
        self.init(name, Array(input.utf8), expected)
        self.limits = limits
    }

    init(_ name: String, bytes input: [UInt8], _ expected: [[[UInt8]]], limits: ProtocolLimits = ProtocolLimits()) {
        self.init(name, input, expected)
        self.limits = limits
    }

    private init(_ name: String, _ input: [UInt8], _ expected: [[[UInt8]]]) {
        self.name = name
        self.input = input
        self.expected = expected
    }

    var testDescription: String { name }
}

/// One row of an error table: input bytes, the requests decoded before the error, the message.
struct RequestErrorCase: Sendable, CustomTestStringConvertible {
    let name: String
    let input: [UInt8]
    let message: String
    var before: [[[UInt8]]] = []
    var limits = ProtocolLimits()

    init(_ name: String, _ input: String, _ message: String, before: [[[UInt8]]] = [], limits: ProtocolLimits = ProtocolLimits()) {
        self.init(name, bytes: Array(input.utf8), message, before: before, limits: limits)
    }

    init(_ name: String, bytes: [UInt8], _ message: String, before: [[[UInt8]]] = [], limits: ProtocolLimits = ProtocolLimits()) {
        self.name = name
        self.input = bytes
        self.message = message
        self.before = before
        self.limits = limits
    }

    var testDescription: String { name }
}

/// Checks that `input` decodes to exactly `expected`, with nothing left over, whether it is fed
/// whole, one byte at a time, or in random splits.
func expectDecodes(
    _ input: [UInt8], _ expected: [[[UInt8]]], limits: ProtocolLimits = ProtocolLimits(),
    seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation
) {
    for chunking in Chunking.all(seed: seed) {
        let outcome = Feeder.requests(input, chunking, limits: limits)
        let wanted = DecodeOutcome<[[UInt8]]>(outputs: expected)
        let same = outcome == wanted
        #expect(same, "input \(show(input)) fed \(chunking): got \(outcome), expected \(wanted)", sourceLocation: sourceLocation)
    }
}

/// Checks that `input` fails with `message` after decoding `before`, in every chunking.
func expectFails(
    _ input: [UInt8], _ message: String, before: [[[UInt8]]] = [], limits: ProtocolLimits = ProtocolLimits(),
    seed: UInt64, sourceLocation: SourceLocation = #_sourceLocation
) {
    for chunking in Chunking.all(seed: seed) {
        let outcome = Feeder.requests(input, chunking, limits: limits)
        let wanted = DecodeOutcome<[[UInt8]]>(outputs: before, error: ProtocolError(message))
        let same = outcome == wanted
        #expect(same, "input \(show(input)) fed \(chunking): got \(outcome), expected \(wanted)", sourceLocation: sourceLocation)
    }
}
