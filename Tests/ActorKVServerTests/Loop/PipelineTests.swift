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

/// A client that writes its whole pipeline before it reads a reply, as redis-py's and ruby-redis's
/// pipelines do: the server reads on while the replies wait, so the client can finish writing;
/// and what it reads ahead is bounded by `--max-request-bytes`.
@Suite struct ReadAheadTests {
    static let value = String(repeating: "v", count: 1000)

    /// `count` GETs of the 1,000-byte value, encoded.
    static func gets(_ count: Int) -> [UInt8] {
        var request: [UInt8] = []
        for _ in 0..<count { RequestEncoder.encode(["GET", "ahead", "big"], into: &request) }
        return request
    }

    @Test(arguments: ["loop", "pool"])
    func aPipelineWrittenWholeBeforeAnyReplyIsReadCompletes(execution: String) async throws {
        try await onOwnThread {
            // 20,000 replies of 1 KB against a 64 KiB output limit: before the server read ahead,
            // it stopped reading at the limit while the client was still writing, and both waited
            // for ever.
            let server = try ServerProcess(arguments: ["--max-output-bytes", "65536", "--execution", execution])
            defer { server.stop() }
            let client = try RawConnection(path: server.socketPath)
            #expect(try client.command(["PUT", "ahead", "big", Self.value]) == .simple("OK"))
            let count = 20_000
            let writer = PipelineWriter(fd: client.fd, bytes: Self.gets(count))
            Thread { writer.run() }.start()
            // Nothing is read until the whole pipeline is written; the socket's send timeout
            // (30 s) ends a writer that the server no longer reads from.
            let failure = writer.waitForResult()
            #expect(failure == nil, "the pipeline could not be written before reading: \(failure ?? "")")
            guard failure == nil else { return }
            for i in 0..<count {
                let reply = try client.reply()
                guard reply == .bulk(Self.value) else {
                    Issue.record("reply \(i) was \(reply)")
                    return
                }
            }
            #expect(try client.command(["PING"]) == .simple("PONG"))
        }
    }

    @Test func aClientThatNeverReadsIsReadNoFurtherThanTheAllowance() async throws {
        try await onOwnThread {
            let allowance = 1 << 20
            let server = try ServerProcess(arguments: ["--max-output-bytes", "65536", "--max-request-bytes", "\(allowance)"])
            defer { server.stop() }
            let client = try RawConnection(path: server.socketPath)
            #expect(try client.command(["PUT", "ahead", "big", Self.value]) == .simple("OK"))
            // Write GETs, reading nothing, until the socket stays full for 5 s (or 64 MiB went).
            let chunk = Self.gets(1000)
            let flags = fcntl(client.fd, F_GETFL)
            _ = fcntl(client.fd, F_SETFL, flags | O_NONBLOCK)
            var sent = 0
            writing: while sent < 64 << 20 {
                var offset = 0
                while offset < chunk.count {
                    let n = chunk.withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress! + offset, chunk.count - offset, Int32(MSG_NOSIGNAL)) }
                    if n > 0 { offset += n; sent += n; continue }
                    guard n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) else {
                        Issue.record("send failed: \(String(cString: strerror(errno)))")
                        return
                    }
                    var entry = pollfd(fd: client.fd, events: Int16(POLLOUT), revents: 0)
                    if poll(&entry, 1, 5000) == 0 { break writing }
                }
            }
            _ = fcntl(client.fd, F_SETFL, flags)
            // The server read past what its 64 KiB of output holds (about 65 replies; with the
            // kernel's buffers well under 1 MiB of requests), up to its allowance, and no further:
            // what the kernel buffers between the two sockets is a few hundred KiB.
            #expect(sent > allowance, "only \(sent) bytes were taken")
            #expect(sent < allowance + (8 << 20), "\(sent) bytes were taken from a client that reads nothing")
            // Every complete request is answered, in order, once the client reads.
            let requestBytes = chunk.count / 1000
            for i in 0..<(sent / requestBytes) {
                let reply = try client.reply()
                guard reply == .bulk(Self.value) else {
                    Issue.record("reply \(i) was \(reply)")
                    return
                }
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
