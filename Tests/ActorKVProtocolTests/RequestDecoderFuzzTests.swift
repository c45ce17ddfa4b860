import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// Randomized tests of RequestDecoder: random and mutated input in random splits must never
/// crash or hang, must decode exactly as when fed whole, and must keep its buffer bounded; valid
/// commands between garbage lines must still decode.
///
/// ACTORKV_FUZZ_ITERATIONS sets the number of inputs (default 20 000); ACTORKV_FUZZ_SEED replays.
@Suite("RequestDecoder fuzzing")
struct RequestDecoderFuzzTests {
    static let iterations = TestEnvironment.fuzzIterations(default: 20_000)
    /// Small limits, so that every limit is reached often.
    static let limits = ProtocolLimits(maxInlineLength: 120, maxBulkLength: 200, maxArguments: 8, maxRequestBytes: 400)
    /// Most bytes a drained decoder may hold: a partial inline line (plus a pending CR), a
    /// partial header, or a partial payload (plus its CR).
    static let drainedBound = max(limits.maxInlineLength + 1, limits.maxBulkLength + 1, 22)

    @Test("random and mutated input: split feeding equals whole feeding, buffer stays bounded")
    func randomInput() {
        let seed = TestEnvironment.seed(for: "RequestDecoderFuzzTests.randomInput")
        var rng = SeededGenerator(seed: seed)
        var stats = (inputs: 0, bytes: 0, requests: 0, errors: 0)
        for iteration in 0..<Self.iterations {
            let input = Self.makeInput(using: &rng)
            let whole = Feeder.requests(input, .whole, limits: Self.limits)
            let chunking: Chunking = iteration % 16 == 0 ? .byteByByte : .random(seed: rng.next())
            var overBound: (buffered: Int, chunk: Int)?
            let split = Feeder.requests(input, chunking, limits: Self.limits) { decoder, chunk in
                if decoder.bufferedByteCount > Self.drainedBound + chunk {
                    overBound = (decoder.bufferedByteCount, chunk)
                }
            }
            stats.inputs += 1
            stats.bytes += input.count
            stats.requests += whole.outputs.count
            stats.errors += whole.error == nil ? 0 : 1
            guard Self.check(input, whole: whole, split: split, chunking, overBound: overBound, seed: seed) else { break }
        }
        print("[RequestDecoderFuzzTests.randomInput] tried \(stats.inputs) inputs (\(stats.bytes) bytes): " +
              "\(stats.requests) requests, \(stats.errors) framing errors")
    }

    @Test("valid commands interleaved with garbage lines still decode the same")
    func commandsBetweenGarbage() {
        let seed = TestEnvironment.seed(for: "RequestDecoderFuzzTests.commandsBetweenGarbage")
        var rng = SeededGenerator(seed: seed)
        let rounds = max(1, Self.iterations / 10)
        var lines = 0
        for _ in 0..<rounds {
            var input: [UInt8] = []
            var expected: [[[UInt8]]] = []
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                lines += 1
                Self.appendItem(to: &input, expected: &expected, using: &rng)
            }
            let chunking = Chunking.random(seed: rng.next())
            let outcome = Feeder.requests(input, chunking, limits: Self.limits)
            guard outcome == DecodeOutcome(outputs: expected) else {
                Issue.record("\(show(input)) fed \(chunking) gave \(outcome), expected \(expected) (seed \(seed))")
                break
            }
        }
        print("[RequestDecoderFuzzTests.commandsBetweenGarbage] tried \(rounds) inputs (\(lines) commands and garbage lines)")
    }

    /// Random noise, or valid commands with random edits.
    static func makeInput(using rng: inout SeededGenerator) -> [UInt8] {
        if Int.random(in: 0..<10, using: &rng) < 3 {
            return CommandGenerator.noise(count: Int.random(in: 0...160, using: &rng), using: &rng)
        }
        var input: [UInt8] = []
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
            let arguments = CommandGenerator.arguments(using: &rng)
            input += CommandGenerator.encoded(arguments, maxInline: limits.maxInlineLength, using: &rng)
        }
        return CommandGenerator.mutated(input, using: &rng)
    }

    /// Appends a valid command or a garbage line, and what it must decode to.
    static func appendItem(to input: inout [UInt8], expected: inout [[[UInt8]]], using rng: inout SeededGenerator) {
        if Bool.random(using: &rng) {
            let arguments = CommandGenerator.arguments(using: &rng)
            input += CommandGenerator.encoded(arguments, maxInline: limits.maxInlineLength, using: &rng)
            expected.append(arguments)
        } else {
            // A garbage line of more words than maxArguments would end the input with an error.
            var line: [UInt8]
            var words: [[UInt8]]
            repeat {
                line = CommandGenerator.garbageLine(maxLength: limits.maxInlineLength - 1, using: &rng)
                words = CommandGenerator.referenceSplit(line)
            } while words.count > limits.maxArguments
            input += line + (Bool.random(using: &rng) ? [13, 10] : [10])
            if !words.isEmpty { expected.append(words) }
        }
    }

    /// Records an issue and returns false if the split run differs from the whole run, produced
    /// more requests than bytes, or let the buffer grow past its bound.
    static func check(
        _ input: [UInt8], whole: DecodeOutcome<[[UInt8]]>, split: DecodeOutcome<[[UInt8]]>, _ chunking: Chunking,
        overBound: (buffered: Int, chunk: Int)?, seed: UInt64
    ) -> Bool {
        let context = "input \(show(input)) (seed \(seed))"
        if split != whole {
            Issue.record("fed \(chunking): \(split), fed whole: \(whole); \(context)")
            return false
        }
        if whole.outputs.count > input.count || whole.leftover > drainedBound {
            Issue.record("\(whole.outputs.count) requests, \(whole.leftover) bytes left over; \(context)")
            return false
        }
        if let overBound {
            Issue.record("buffered \(overBound.buffered) bytes after a \(overBound.chunk)-byte chunk; \(context)")
            return false
        }
        return true
    }
}
