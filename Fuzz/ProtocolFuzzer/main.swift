// libFuzzer target for ActorKVProtocol. Built by Fuzz/run.sh together with the module's sources
// (one module, -parse-as-library), so it uses no import.
//
// The first input byte chooses the limits (low bit) and where to cut the rest of the input in
// two (other bits). The rest is fed to a RequestDecoder whole and in those two pieces: both
// runs must give the same requests and error, and the buffer must stay within one request's
// limits plus the appended piece. The same bytes are also fed to a ReplyDecoder (no crash, no
// hang). Any difference is a crash, which libFuzzer reports and saves.

/// What a RequestDecoder produced for one input.
struct FuzzOutcome: Equatable {
    var requests: [[[UInt8]]] = []
    var error: ProtocolError?
    var leftover = 0
}

/// Small limits, so that every limit is reached by short inputs.
let smallLimits = ProtocolLimits(maxInlineLength: 64, maxBulkLength: 128, maxArguments: 8, maxRequestBytes: 256)

/// Feeds `pieces` in order, draining the decoder after each; checks the buffer bound.
func decodeRequests(_ pieces: [UnsafeRawBufferPointer], limits: ProtocolLimits) -> FuzzOutcome {
    let bound = max(limits.maxInlineLength + 1, limits.maxBulkLength + 1, 22)
    var decoder = RequestDecoder(limits: limits)
    var outcome = FuzzOutcome()
    for piece in pieces {
        decoder.append(piece)
        precondition(decoder.bufferedByteCount <= bound + piece.count, "buffer grew past one request plus the piece")
        do {
            while let request = try decoder.next() { outcome.requests.append(request) }
        } catch {
            outcome.error = error
            return outcome
        }
    }
    outcome.leftover = decoder.bufferedByteCount
    return outcome
}

/// Feeds `pieces` to a ReplyDecoder until it needs more bytes or fails.
func decodeReplies(_ pieces: [UnsafeRawBufferPointer], limits: ProtocolLimits) {
    var decoder = ReplyDecoder(limits: limits)
    for piece in pieces {
        decoder.append(piece)
        do {
            while try decoder.next() != nil {}
        } catch {
            return
        }
    }
}

/// The libFuzzer entry point.
@_cdecl("LLVMFuzzerTestOneInput")
public func protocolFuzzerTestOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let control = Int(data[0])
    let input = UnsafeRawBufferPointer(start: data + 1, count: size - 1)
    let limits = control & 1 == 0 ? smallLimits : ProtocolLimits()
    let cut = input.count * (control >> 1) / 127
    let pieces = [UnsafeRawBufferPointer(rebasing: input[..<cut]), UnsafeRawBufferPointer(rebasing: input[cut...])]
    let whole = decodeRequests([input], limits: limits)
    let split = decodeRequests(pieces, limits: limits)
    precondition(whole == split, "fed in two pieces: \(split); fed whole: \(whole)")
    decodeReplies(pieces, limits: limits)
    return 0
}
