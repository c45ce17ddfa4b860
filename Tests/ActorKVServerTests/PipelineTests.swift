import ActorKVProtocol
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Deep pipelines: a client that writes many requests before reading any reply is served in full
/// and in order, whether the replies are small or add up to more than the output limit.
@Suite struct PipelineTests {
    @Test(arguments: [PipelineCase.puts, .gets])
    func aLongPipelineWrittenBeforeReadingIsAnsweredInFull(_ pipeline: PipelineCase) throws {
        let server = try ServerProcess(arguments: ["--max-output-bytes", "65536"])
        defer { server.stop() }
        let setup = try RawConnection(path: server.socketPath)
        let value = String(repeating: "v", count: 100)
        #expect(try setup.command(["PUT", "deep", "seed", value]) == .simple("OK"))
        var request: [UInt8] = []
        for i in 0..<pipeline.count {
            let words = pipeline == .puts ? ["PUT", "deep", "k\(i)", "\(i)"] : ["GET", "deep", "seed"]
            RequestEncoder.encode(words, into: &request)
        }
        let client = try RawConnection(path: server.socketPath)
        // The whole pipeline goes out from another thread, as one stream, while this one reads.
        let writer = PipelineWriter(fd: client.fd, bytes: request)
        let thread = Thread { writer.run() }
        thread.start()
        for i in 0..<pipeline.count {
            let reply = try client.reply()
            let expected: Reply = pipeline == .puts ? .simple("OK") : .bulk(value)
            guard reply == expected else {
                Issue.record("reply \(i) was \(reply), expected \(expected)")
                return
            }
        }
        #expect(writer.waitForResult() == nil)
        if pipeline == .puts {
            #expect(try client.command(["COUNT", "deep"]) == .integer(Int64(pipeline.count + 1)))
            #expect(try client.command(["GET", "deep", "k\(pipeline.count - 1)"]) == .bulk("\(pipeline.count - 1)"))
        }
    }
}

/// The two pipelines: small replies, and replies that add up to far more than the output limit.
enum PipelineCase: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case puts, gets
    var count: Int { 20_000 }
    var testDescription: String { rawValue }
}

/// Writes a byte stream to a socket on its own thread and reports how it went.
final class PipelineWriter: @unchecked Sendable {
    private let fd: Int32
    private let bytes: [UInt8]
    private let done = DispatchSemaphore(value: 0)
    private var failure: String?

    init(fd: Int32, bytes: [UInt8]) {
        self.fd = fd
        self.bytes = bytes
    }

    /// Sends every byte, then signals.
    func run() {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { failure = "send after \(sent) bytes: \(String(cString: strerror(errno)))"; break }
            sent += n
        }
        done.signal()
    }

    /// Waits for the writer; nil if everything was sent.
    func waitForResult() -> String? {
        done.wait()
        return failure
    }
}
