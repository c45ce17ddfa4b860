import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real `actorkvd` over a real socket.
@Suite struct EndToEndTests {
    @Test func inlineAndMultibulkRequestsShareOneConnectionAndReplyInOrder() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            var pipeline = Array("PUT config theme \"dark\\x00mode\"\r\nGET config theme\r\n".utf8)
            RequestEncoder.encode([Array("PUT".utf8), Array("config".utf8), Array("bin".utf8), [0, 13, 10, 255]], into: &pipeline)
            RequestEncoder.encode(["GET", "config", "bin"], into: &pipeline)
            pipeline += Array("DEL config theme bin nothing\nPING\r\n".utf8)
            try c.send(pipeline)
            let replies = try (0..<6).map { _ in try c.reply() }
            #expect(replies == [.simple("OK"), .bulk(Array("dark".utf8) + [0] + Array("mode".utf8)), .simple("OK"),
                                .bulk([0, 13, 10, 255]), .integer(2), .simple("PONG")])
        }
    }

    @Test func aFramingErrorGetsProtoAndClosesButEarlierCommandsRan() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            try c.send("PUT a k 1\r\nPUT a k \"unbalanced\r\nPUT a k 2\r\n")
            #expect(try c.reply() == .simple("OK"))
            #expect(try c.reply().errorCode == "PROTO")
            #expect(c.isClosedByServer())
            let other = try RawConnection(path: server.socketPath)
            #expect(try other.command(["GET", "a", "k"]) == .bulk("1"))
        }
    }

    @Test func aCommandErrorLeavesTheConnectionUsable() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["NOPE"]).errorCode == "ERR")
            #expect(try c.command(["PUT", "..", "k", "v"]).errorCode == "BADNS")
            #expect(try c.command(["PING"]) == .simple("PONG"))
        }
    }

    @Test func quitRepliesThenCloses() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            // What follows QUIT is never run or answered, not even a framing error read with it.
            try c.send("QUIT\r\nPUT a k v\r\n*x\r\n")
            #expect(try c.reply() == .simple("OK"))
            #expect(throws: TestFailure.self, "nothing after +OK: the connection just closes") { _ = try c.reply() }
            #expect(try RawConnection(path: server.socketPath).command(["GET", "a", "k"]) == .null)
        }
    }

    /// `printf … | nc -U -N`: the requests and the end of the client's stream arrive together.
    /// The server answers them and then closes, every time; with a short timeout, a connection
    /// the server forgot (it read the requests but never the end) fails the test.
    @Test func requestsFollowedByAHalfCloseAreAnsweredThenTheConnectionCloses() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            for i in 0..<200 {
                let c = try RawConnection(path: server.socketPath, timeoutSeconds: 5)
                try c.send("PUT hc k\(i) v\(i)\r\nGET hc k\(i)\r\n")
                shutdown(c.fd, Int32(SHUT_WR))
                #expect(try c.reply() == .simple("OK"))
                #expect(try c.reply() == .bulk(Array("v\(i)".utf8)))
                guard c.isClosedByServer() else {
                    Issue.record("connection \(i): not closed by the server within 5 s of its half-close")
                    return
                }
            }
        }
    }

    @Test func sigtermShutsDownCleanlyAndDataSurvivesRestart() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let first = try ServerProcess(directory: dir, arguments: ["--fsync", "always"])
            let c = try RawConnection(path: first.socketPath)
            for i in 0..<200 { #expect(try c.command(["PUT", "persist", "k\(i)", "v\(i)"]) == .simple("OK")) }
            #expect(first.stop(signal: SIGTERM) == 0)
            #expect(!FileManager.default.fileExists(atPath: first.socketPath), "socket removed on exit")
            #expect(first.log.contains("shut down cleanly"))
            let second = try ServerProcess(directory: dir)
            defer { second.stop() }
            let d = try RawConnection(path: second.socketPath)
            #expect(try d.command(["COUNT", "persist"]) == .integer(200))
            #expect(try d.command(["GET", "persist", "k199"]) == .bulk("v199"))
            #expect(second.log.contains("namespace persist: opened: 200 keys"))
        }
    }

    @Test func requestsReadButNotStartedAtShutdownAreAnsweredShutdown() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let first = try ServerProcess(directory: dir)
            let setup = try RawConnection(path: first.socketPath)
            let value = String(repeating: "v", count: 100)
            for batch in 0..<20 {
                var arguments = ["BATCH", "sd", "DEL", "nothing"]
                for i in 0..<1000 { arguments += ["PUT", "key\(batch * 1000 + i)", value] }
                _ = try setup.command(arguments)
            }
            // 40 SCANs of about 2.6 MB of replies each, then a PUT: the client does not read, so
            // backpressure keeps most of them read but not started when SIGTERM comes.
            let c = try RawConnection(path: first.socketPath)
            try c.send(String(repeating: "SCAN sd 0 COUNT 20000\r\n", count: 40) + "PUT sd late v\r\n")
            usleep(300_000)
            first.process.signal(SIGTERM)
            var replies: [Reply] = []
            for _ in 0..<41 { replies.append(try c.reply()) }
            let scans = replies.prefix { if case .array = $0 { return true }; return false }.count
            #expect(scans >= 1, "the SCANs started before the signal are answered")
            #expect(replies[scans...].allSatisfy { $0.errorCode == "SHUTDOWN" }, "then each request not started gets -SHUTDOWN, in order")
            #expect(replies.last?.errorCode == "SHUTDOWN", "the PUT was not run")
            #expect(c.isClosedByServer())
            #expect(first.process.status == 0)
            let second = try ServerProcess(directory: dir)
            defer { second.stop() }
            #expect(try RawConnection(path: second.socketPath).command(["GET", "sd", "late"]) == .null)
        }
    }

    @Test("a client that never reads its replies holds the shutdown for --shutdown-grace, and the log says so, at the start and when the grace runs out")
    func shutdownGraceRunsOutOnAClientThatDoesNotRead() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--shutdown-grace", "0.5"])
            let setup = try RawConnection(path: server.socketPath)
            #expect(try setup.command(["PUT", "g", "k", String(repeating: "v", count: 10_000)]) == .simple("OK"))
            let c = try RawConnection(path: server.socketPath)
            try c.send(String(repeating: "GET g k\r\n", count: 2_000))  // 20 MB of replies, never read
            usleep(300_000)
            #expect(server.stop(signal: SIGTERM) == 0)
            #expect(server.log.contains("and sending the replies 1 more have not read yet (for up to 0.5 s: --shutdown-grace)"), "\(server.log)")
            #expect(server.log.contains("--shutdown-grace (0.5 s) ran out with 1 connection(s) still running requests or not reading their replies"),
                    "\(server.log)")
            withExtendedLifetime(c) {}
        }
    }

    @Test func socketIsPrivateByDefaultAndModeIsConfigurable() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let attributes = try FileManager.default.attributesOfItem(atPath: server.socketPath)
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
            let open = try ServerProcess(arguments: ["--socket-mode", "660"])
            defer { open.stop() }
            #expect((try FileManager.default.attributesOfItem(atPath: open.socketPath)[.posixPermissions] as? Int) == 0o660)
        }
    }

    @Test func secondServerOnTheSameSocketOrDataDirectoryIsRefused() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let server = try ServerProcess(directory: dir)
            defer { server.stop() }
            let rival = try ChildProcess(try ServerProcess.executable(), ["--socket", server.socketPath, "--data-dir", dir.path + "/other"])
            #expect(rival.waitForExit() == .exited(1))
            let sameData = try ChildProcess(try ServerProcess.executable(), ["--socket", dir.path + "/other.sock", "--data-dir", server.dataPath])
            #expect(sameData.waitForExit() == .exited(1))
            #expect(try RawConnection(path: server.socketPath).command(["PING"]) == .simple("PONG"))
        }
    }

    @Test func staleSocketFromAKilledServerIsReplaced() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let killed = try ServerProcess(directory: dir)
            killed.stop(signal: SIGKILL)
            #expect(FileManager.default.fileExists(atPath: killed.socketPath))
            let next = try ServerProcess(directory: dir)
            defer { next.stop() }
            #expect(next.log.contains("removed stale socket"))
        }
    }

    @Test func usageErrorsExitTwoAndHelpExitsZero() async throws {
        try await onOwnThread { () throws in
            func run(_ args: [String]) throws -> Int32 {
                try ChildProcess(try ServerProcess.executable(), args).status
            }
            #expect(try run(["--help"]) == 0)
            #expect(try run(["--bogus"]) == 2)
            #expect(try run(["--fsync", "sometimes"]) == 2)
            #expect(try run(["--execution", "sideways"]) == 2)
            #expect(try run(["--max-clients"]) == 2)
        }
    }

    /// Under `always`, replies wait for fsyncs that finish on other threads: on the loop thread
    /// (`loop`) and on the cooperative pool (`pool`) every one of them must come back.
    @Test(arguments: ["loop", "pool"])
    func concurrentClientsOnDifferentNamespacesAllSucceed(execution: String) async throws {
        let server = try ServerProcess(arguments: ["--fsync", "always", "--execution", execution])
        defer { server.stop() }
        let path = server.socketPath
        try await withThrowingTaskGroup(of: Void.self) { group in
            for client in 0..<20 {
                group.addTask {
                    let c = try RawConnection(path: path)
                    for i in 0..<25 {
                        let reply = try c.command(["PUT", "ns\(client % 4)", "c\(client)-\(i)", "v"])
                        guard reply == .simple("OK") else { throw TestFailure("client \(client): \(reply)") }
                    }
                }
            }
            try await group.waitForAll()
        }
        let c = try RawConnection(path: path)
        var total: Int64 = 0
        for ns in 0..<4 { if case .integer(let n) = try c.command(["COUNT", "ns\(ns)"]) { total += n } }
        #expect(total == 500)
    }

    @Test func aServerThatCannotStartLeavesTheDataDirectoryUntouched() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            _ = FileManager.default.createFile(atPath: dir.path + "/plain-file", contents: Data("x".utf8))
            let p = try ChildProcess(try ServerProcess.executable(), ["--socket", dir.path + "/plain-file", "--data-dir", dir.path + "/data"],
                                     stderr: .pipe)
            let message = String(decoding: p.readOutputs().stderr, as: UTF8.self)
            #expect(p.waitForExit() == .exited(1))
            #expect(message.contains("exists and is not a socket"))
            #expect(!FileManager.default.fileExists(atPath: dir.path + "/data"))
        }
    }
}
