import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Deep pipelines: a client that writes many requests before reading any reply is served in full
/// and in order, whether the replies are small or add up to more than the output limit.
@Suite struct PipelineTests {
    @Test(arguments: [PipelineCase.puts, .gets], ["loop", "pool"])
    func aLongPipelineWrittenBeforeReadingIsAnsweredInFull(_ pipeline: PipelineCase, execution: String) async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--max-output-bytes", "65536", "--execution", execution])
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
}

/// Clients that keep the server busy without pause must not starve a newcomer: the loop goes
/// back to epoll between turns instead of serving the same connections for as long as they send.
@Suite struct FairnessTests {
    @Test(arguments: ["loop", "pool"])
    func aNewConnectionIsServedWhileOthersKeepTheServerBusy(execution: String) async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--execution", execution])
            defer { server.stop() }
            let load = BusyLoad()
            // Each busy client streams requests from one thread and drains replies on another, so
            // its socket always has more to read.
            var busy: [RawConnection] = []
            for client in 0..<4 {
                let connection = try RawConnection(path: server.socketPath)
                busy.append(connection)
                let fd = connection.fd
                var request: [UInt8] = []
                for i in 0..<256 { RequestEncoder.encode(["PUT", "busy", "c\(client)-\(i)", "v"], into: &request) }
                Thread { [request] in
                    while !load.stop.load(ordering: .relaxed) {
                        let sent = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                        if sent <= 0 { return }
                    }
                }.start()
                Thread {
                    var buffer = [UInt8](repeating: 0, count: 65536)
                    while true {
                        let n = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress!, $0.count, 0) }
                        if n <= 0 { return }
                        load.replyBytes.add(n, ordering: .relaxed)
                    }
                }.start()
            }
            defer {
                load.stop.store(true, ordering: .relaxed)
                for connection in busy { shutdown(connection.fd, Int32(SHUT_RDWR)) }
            }
            for _ in 0..<30_000 where load.replyBytes.load(ordering: .relaxed) < 1_000_000 { usleep(1_000) }
            try #require(load.replyBytes.load(ordering: .relaxed) >= 1_000_000, "the busy clients never got going")
            // The busy clients are going; a newcomer must get its answers (the read timeout is 10 s).
            let newcomer = try RawConnection(path: server.socketPath, timeoutSeconds: 10)
            for i in 0..<20 {
                #expect(try newcomer.command(["PUT", "calm", "k\(i)", "v\(i)"]) == .simple("OK"))
                #expect(try newcomer.command(["GET", "calm", "k\(i)"]) == .bulk("v\(i)"))
            }
        }
    }
}

/// What the busy clients share with the test.
final class BusyLoad: Sendable {
    let stop = Atomic<Bool>(false)
    let replyBytes = Atomic<Int>(0)
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
