import ActorKVProtocol
import ActorKVTestSupport
import Foundation

/// Settings read from the environment.
enum TestEnvironment {
    /// ACTORKV_FUZZ_ITERATIONS, or `defaultValue`.
    static func fuzzIterations(default defaultValue: Int) -> Int {
        ProcessInfo.processInfo.environment["ACTORKV_FUZZ_ITERATIONS"].flatMap(Int.init) ?? defaultValue
    }

    /// ACTORKV_FUZZ_SEED if set, else a fresh random seed; printed so a failure can be replayed.
    static func seed(for label: String) -> UInt64 {
        let seed = ProcessInfo.processInfo.environment["ACTORKV_FUZZ_SEED"].flatMap { UInt64($0) }
            ?? UInt64.random(in: 0...UInt64.max)
        print("[\(label)] seed \(seed) (replay with ACTORKV_FUZZ_SEED=\(seed))")
        return seed
    }
}

/// How an input is cut into the chunks handed to `append`.
enum Chunking: CustomStringConvertible {
    case whole
    case byteByByte
    case random(seed: UInt64)

    var description: String {
        switch self {
        case .whole: "whole"
        case .byteByByte: "one byte at a time"
        case .random(let seed): "random splits (seed \(seed))"
        }
    }

    /// The whole, byte-by-byte and `randomRounds` random chunkings derived from `seed`.
    static func all(seed: UInt64, randomRounds: Int = 4) -> [Chunking] {
        [.whole, .byteByByte] + (0..<randomRounds).map { .random(seed: seed &+ UInt64($0)) }
    }

    /// The chunks of `input`.
    func chunks(of input: [UInt8]) -> [ArraySlice<UInt8>] {
        switch self {
        case .whole:
            return [input[...]]
        case .byteByByte:
            return input.indices.map { input[$0...$0] }
        case .random(let seed):
            var rng = SeededGenerator(seed: seed)
            return Self.randomChunks(of: input, using: &rng)
        }
    }

    /// Cuts `input` at random points: mostly small pieces, sometimes large ones, some empty.
    static func randomChunks(of input: [UInt8], using rng: inout SeededGenerator) -> [ArraySlice<UInt8>] {
        var chunks: [ArraySlice<UInt8>] = []
        var start = 0
        while start < input.count {
            let maxSize = Int.random(in: 0..<4, using: &rng) == 0 ? input.count : 8
            let size = Int.random(in: 0...maxSize, using: &rng)
            let end = min(input.count, start + size)
            chunks.append(input[start..<end])
            start = end
        }
        return chunks
    }
}

/// Everything a decoder produced for one input.
struct DecodeOutcome<Output: Equatable>: Equatable, CustomStringConvertible {
    var outputs: [Output] = []
    var error: ProtocolError?
    /// `bufferedByteCount` after the last chunk (0 unless input was left undecoded).
    var leftover = 0
    /// Whether a partial message remained after the last chunk.
    var partial = false

    /// A readable summary: requests as escaped text, long arguments cut short.
    var description: String {
        let shown = outputs.map { output in
            guard let request = output as? [[UInt8]] else { return String(describing: output) }
            return "[" + request.map { "\"" + show($0, limit: 48) + "\"" }
                .joined(separator: ", ") + "]"
        }
        return "\(shown.count) outputs [\(shown.joined(separator: ", "))], error: \(error.map(\.message) ?? "none"), " +
            "leftover: \(leftover), partial: \(partial)"
    }
}

/// The NIO-style decoder driver: feeds chunks and drains the decoder after each one.
enum Feeder {
    /// Feeds `input` to a fresh RequestDecoder in the given chunking; stops at the first error.
    /// `onChunk` sees the decoder after each append (before draining) and the chunk size.
    static func requests(
        _ input: [UInt8], _ chunking: Chunking, limits: ProtocolLimits = ProtocolLimits(),
        onChunk: (RequestDecoder, Int) -> Void = { _, _ in }
    ) -> DecodeOutcome<[[UInt8]]> {
        var decoder = RequestDecoder(limits: limits)
        var outcome = DecodeOutcome<[[UInt8]]>()
        for (number, chunk) in chunking.chunks(of: input).enumerated() {
            appendAlternating(chunk, number: number, to: &decoder)
            onChunk(decoder, chunk.count)
            do {
                while let request = try decoder.next() { outcome.outputs.append(request) }
            } catch {
                outcome.error = error
                return outcome
            }
        }
        outcome.leftover = decoder.bufferedByteCount
        outcome.partial = decoder.hasPartialRequest
        return outcome
    }

    /// Feeds `input` to a fresh ReplyDecoder in the given chunking; stops at the first error.
    static func replies(
        _ input: [UInt8], _ chunking: Chunking, limits: ProtocolLimits = ProtocolLimits()
    ) -> DecodeOutcome<Reply> {
        var decoder = ReplyDecoder(limits: limits)
        var outcome = DecodeOutcome<Reply>()
        for chunk in chunking.chunks(of: input) {
            chunk.withUnsafeBytes { decoder.append($0) }
            do {
                while let reply = try decoder.next() { outcome.outputs.append(reply) }
            } catch {
                outcome.error = error
                return outcome
            }
        }
        outcome.leftover = decoder.bufferedByteCount
        outcome.partial = decoder.hasPartialReply
        return outcome
    }

    /// Uses both `append` overloads, so both are exercised.
    private static func appendAlternating(_ chunk: ArraySlice<UInt8>, number: Int, to decoder: inout RequestDecoder) {
        if number.isMultiple(of: 2) {
            decoder.append(Array(chunk))
        } else {
            chunk.withUnsafeBytes { decoder.append($0) }
        }
    }
}

/// The UTF-8 bytes of `text`.
func bytes(_ text: String) -> [UInt8] {
    Array(text.utf8)
}

/// Arguments written as strings, for readable expectations.
func args(_ words: String...) -> [[UInt8]] {
    words.map { Array($0.utf8) }
}

/// Shows bytes with control characters escaped, for failure messages; long inputs are cut
/// after `limit` bytes.
func show(_ bytes: [UInt8], limit: Int = 300) -> String {
    let text = bytes.prefix(limit).map { byte in
        switch byte {
        case 13: "\\r"
        case 10: "\\n"
        case 32...126: String(UnicodeScalar(byte))
        default: "\\x" + (byte < 16 ? "0" : "") + String(byte, radix: 16)
        }
    }.joined()
    return bytes.count > limit ? text + "…(\(bytes.count) bytes)" : text
}
