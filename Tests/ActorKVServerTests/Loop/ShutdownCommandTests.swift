import ActorKVProtocol
@testable import ActorKVServer
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `SHUTDOWN`, Redis's way to stop the server, on the real `actorkvd` over a real socket.
@Suite struct ShutdownCommandTests {
    /// What the server sends on `c` until it closes it (within the connection's timeout).
    static func bytesUntilClosed(_ c: RawConnection) throws -> [UInt8] { try bytesUntilClosed(c.fd) }

    /// What arrives on socket `fd` until its other end closes it.
    static func bytesUntilClosed(_ fd: Int32) throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return received }
            guard n > 0 else { throw TestFailure("recv after \(received.count) bytes: errno \(errno)") }
            received += buffer[0..<n]
        }
    }

    @Test("the shutdown request holds only the askers' sockets, and ends them with the failure as their reply when there is one, else with none")
    func requestHoldsAndAnswersTheAskers() throws {
        func pair() -> (Int32, Int32) {
            var fds: [Int32] = [-1, -1]
            _ = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
            return (fds[0], fds[1])
        }
        for failure in [nil, "IOERR shut down, but the logs of 1 namespace(s) may not be on disk"] {
            let request = ShutdownRequest()
            let woken = WakeCount()
            request.setWake { woken.count.add(1, ordering: .relaxed) }
            let (asker, askerPeer) = pair()
            let (other, otherPeer) = pair()
            #expect(!request.isRequested && request.asker == nil)
            request.request(by: 7, who: "connection 7, uid 0, pid 1")
            #expect(request.isRequested && request.asker == "connection 7, uid 0, pid 1" && woken.count.load(ordering: .relaxed) == 1)
            #expect(!request.hold(other, of: 8), "connection 8 did not ask: the loop closes it as usual")
            #expect(request.hold(asker, of: 7))
            request.finish(failure: failure)
            #expect(try Self.bytesUntilClosed(askerPeer) == Array((failure.map { "-\($0)\r\n" } ?? "").utf8), "then the end of the stream")
            var probe: UInt8 = 0
            #expect(send(other, &probe, 1, Int32(MSG_DONTWAIT)) == 1, "a socket not held stays the caller's, open")
            for fd in [askerPeer, other, otherPeer] { close(fd) }
        }
    }

    @Test("SHUTDOWN stops the server as SIGTERM does; the asker's connection ends with no reply once the server has shut down")
    func shutdownStopsTheServerAndEndsTheAskersConnectionLast() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let first = try ServerProcess(directory: dir)
            let other = try RawConnection(path: first.socketPath)
            #expect(try other.command(["PING"]) == .simple("PONG"))
            let c = try RawConnection(path: first.socketPath)
            // The PUT before it is answered; what follows it is neither run nor answered.
            try c.send("PUT sd k v\r\nSHUTDOWN\r\nPUT sd after v\r\n")
            #expect(try c.reply() == .simple("OK"))
            #expect(try Self.bytesUntilClosed(c) == [], "no reply to SHUTDOWN, nor to what follows it: the connection just ends")
            // By the time it ends, the server has shut down: socket removed, every namespace
            // fsync'd, the data directory's lock released.
            #expect(!FileManager.default.fileExists(atPath: first.socketPath), "the socket is removed before the asker's connection ends")
            #expect(first.log.contains("shut down cleanly (SHUTDOWN from connection "), "\(first.log)")
            #expect(other.isClosedByServer(), "the other connection was closed too")
            let second = try ServerProcess(directory: dir)
            defer { second.stop() }
            #expect(first.process.status == 0)
            let d = try RawConnection(path: second.socketPath)
            #expect(try d.command(["GET", "sd", "k"]) == .bulk("v"))
            #expect(try d.command(["GET", "sd", "after"]) == .null, "nothing after SHUTDOWN ran")
        }
    }

    @Test("SHUTDOWN's options are Redis's; a bad combination, ABORT and SHUTDOWN inside MULTI are refused, the server serving on")
    func refusedShutdownsLeaveTheServerServing() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            for words in [["SAVE", "NOSAVE"], ["ABORT", "NOW"], ["NOW", "LATER"], ["FORCE", "ABORT"]] {
                let reply = try c.command(["SHUTDOWN"] + words)
                #expect(reply == .error("ERR syntax error (usage: SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT])"), "\(words): \(reply)")
            }
            #expect(try c.command(["SHUTDOWN", "abort"]) == .error("ERR No shutdown in progress."), "ABORT: there is never one to cancel")
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            #expect(try c.command(["SHUTDOWN"]).errorCode == "ERR")
            #expect(try c.command(["EXEC"]).errorCode == "EXECABORT")
            #expect(try c.command(["PUT", "still", "k", "v"]) == .simple("OK"))
            #expect(server.process.isRunning)
            #expect(!server.log.contains("shutting down"))
        }
    }

    @Test("SHUTDOWN on a RESP3 connection, with the options repeated as Redis allows, sends nothing either")
    func shutdownOnRESP3SendsNothing() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            let c = try RawConnection(path: server.socketPath)
            _ = try RESP3ServerTests.exchange(c, "HELLO 3\r\n", expect: "$7\r\nmodules\r\n*0\r\n")
            try c.send("*3\r\n$8\r\nSHUTDOWN\r\n$3\r\nnow\r\n$3\r\nNOW\r\n")
            #expect(try Self.bytesUntilClosed(c) == [])
            #expect(server.process.status == 0)
        }
    }
}

/// How many times a ``ShutdownRequest`` woke its loop.
private final class WakeCount: Sendable {
    let count = Atomic<Int>(0)
}
