@testable import ActorKVClient
import ActorKVProtocol
import Foundation
import Glibc
import Testing

/// A connected Unix socket pair: the client's end and the test's, which plays the server.
func socketPair() -> (client: Int32, server: Int32) {
    var fds: [Int32] = [-1, -1]
    _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
    return (fds[0], fds[1])
}

/// The error a ``SendResult`` failed with, and whether the request was sent.
func failure(of result: SendResult) -> (ActorKVError, sent: Bool)? {
    switch result {
    case .reply: return nil
    case .failed(let error): return (error, true)
    case .notSent(let error): return (error, false)
    }
}

@Suite("Refused connections (-MAXCLIENTS, -NOPERM on accept)")
struct RefusalTests {
    static let ping: [UInt8] = {
        var bytes: [UInt8] = []
        RequestEncoder.encode(["PING"], into: &bytes)
        return bytes
    }()
    static let noperm = Array("-NOPERM connection refused: uid 4242 is not allowed\r\n".utf8)
    static let refusedNoperm = ActorKVError.refused(path: "fake", code: "NOPERM", message: "connection refused: uid 4242 is not allowed")

    /// Waits (bounded) until `condition` holds.
    func wait(until condition: () -> Bool) async throws {
        for _ in 0..<2000 where !condition() { try await Task.sleep(for: .milliseconds(2)) }
    }

    @Test("the refusal arrives after the request was sent: refused, not a server error reply")
    func refusalAfterRequest() async throws {
        let (client, server) = socketPair()
        let connection = Connection.adopt(fd: client, path: "fake", timeout: .seconds(10))
        let call = Task { await connection.send(Self.ping) }
        try await wait { connection.pendingCount == 1 }
        writeBytes(server, Self.noperm)
        close(server)
        let result = await call.value
        #expect(failure(of: result)?.0 == Self.refusedNoperm, "\(result)")
        #expect(!connection.isUsable)
    }

    @Test("the refusal arrives before any request: the request is not sent and fails with refused")
    func refusalBeforeRequest() async throws {
        let (client, server) = socketPair()
        writeBytes(server, Array("-MAXCLIENTS max number of clients reached\r\n".utf8))
        close(server)
        let connection = Connection.adopt(fd: client, path: "fake", timeout: .seconds(10))
        try await wait { !connection.isUsable }
        let result = await connection.send(Self.ping)
        let failed = failure(of: result)
        #expect(failed?.0 == .refused(path: "fake", code: "MAXCLIENTS", message: "max number of clients reached"), "\(result)")
        #expect(failed?.sent == false)
    }

    @Test("the server closed the refused connection before the request was written: refused, not 'write failed'")
    func refusalAfterFailedWrite() async throws {
        let (client, server) = socketPair()
        writeBytes(server, Self.noperm)
        close(server)
        // No reader yet, so the send's write fails (EPIPE) before the refusal has been read.
        let connection = Connection.adopt(fd: client, path: "fake", timeout: .seconds(10), startingThreads: false)
        let call = Task { await connection.send(Self.ping) }
        try await wait { !connection.isUsable }
        connection.startThreads()
        let result = await call.value
        #expect(failure(of: result)?.0 == Self.refusedNoperm, "\(result)")
    }

    @Test("an error that is not the first reply, or not a refusal, keeps its old meaning")
    func otherErrors() async throws {
        // -NOPERM as the second reply is a reply to that request.
        let (client, server) = socketPair()
        let connection = Connection.adopt(fd: client, path: "fake", timeout: .seconds(10))
        let first = Task { await connection.send(Self.ping) }
        try await wait { connection.pendingCount == 1 }
        writeBytes(server, Array("+PONG\r\n".utf8))
        guard case .reply(.simple("PONG")) = await first.value else { Issue.record("no PONG"); return }
        let second = Task { await connection.send(Self.ping) }
        try await wait { connection.pendingCount == 1 }
        writeBytes(server, Self.noperm)
        guard case .reply(.error("NOPERM connection refused: uid 4242 is not allowed")) = await second.value else {
            Issue.record("expected the error reply")
            return
        }
        #expect(connection.isUsable)
        connection.shutdown(with: .closed)
        close(server)

        // Another error with no request is still a lost connection.
        let (client2, server2) = socketPair()
        writeBytes(server2, Array("-ERR something else\r\n".utf8))
        let connection2 = Connection.adopt(fd: client2, path: "fake", timeout: .seconds(10))
        try await wait { !connection2.isUsable }
        guard case .connectionLost(let reason)? = failure(of: await connection2.send(Self.ping))?.0 else {
            Issue.record("expected connectionLost")
            return
        }
        #expect(reason.contains("ERR something else"))
        close(server2)
    }

    @Test("a server at --max-clients: the client's call fails with refused(MAXCLIENTS), every time")
    func maxClients() async throws {
        try await withServer(arguments: ["--max-clients", "1"]) { server, kv in
            // Take the only place (the startup probe's connection may still hold it for a moment).
            for _ in 0..<500 {
                if (try? await kv.ping()) != nil { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await kv.ping() == "PONG")
            for _ in 0..<10 {
                let other = ActorKVClient(socketPath: server.socketPath)
                let error = await expectActorKVError { _ = try await other.get("ns", "k") }
                guard case .refused(let path, let code, _)? = error else {
                    Issue.record("expected refused, got \(String(describing: error))")
                    continue
                }
                #expect(path == server.socketPath && code == "MAXCLIENTS")
                #expect(error?.wireCode == .maxClients)
                #expect(error?.isConnectionError == true)
                #expect(error?.description.contains("cannot connect to \(server.socketPath): the server refused") == true)
            }
        }
    }
}
