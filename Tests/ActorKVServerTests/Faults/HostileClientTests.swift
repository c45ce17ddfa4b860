import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Clients that misbehave: the server answers with errors, keeps memory bounded and keeps
/// serving everyone else.
@Suite struct HostileClientTests {
    @Test func aThousandConcurrentConnectionsAreHeldAndServed() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            var connections: [RawConnection] = []
            for _ in 0..<1000 { connections.append(try RawConnection(path: server.socketPath)) }
            for (i, c) in connections.enumerated() { try c.send("PUT many k\(i) v\(i)\r\n") }
            for c in connections { #expect(try c.reply() == .simple("OK")) }
            #expect(try connections[999].command(["COUNT", "many"]) == .integer(1000))
            #expect(try connections[0].command(["INFO"]).bulkText?.contains("connected_clients:1000") == true)
        }
    }

    @Test func maxClientsRefusesTheExtraConnectionWithAnError() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--max-clients", "3"])
            defer { server.stop() }
            let held = try (0..<3).map { _ in try RawConnection(path: server.socketPath) }
            for c in held { #expect(try c.command(["PING"]) == .simple("PONG")) }
            let extra = try RawConnection(path: server.socketPath)
            #expect(try extra.reply().errorCode == "MAXCLIENTS")
            #expect(extra.isClosedByServer())
            // A client that writes before it reads (as `printf … | nc -U -N` does), after the server
            // has already refused it, can still send and then read the refusal: the server half-closes
            // and drains instead of closing with unread input.
            let eager = try RawConnection(path: server.socketPath)
            usleep(200_000)
            try eager.send("PING\r\n")
            #expect(try eager.reply().errorCode == "MAXCLIENTS")
            #expect(eager.isClosedByServer())
            #expect(try held[0].command(["PING"]) == .simple("PONG"))
        }
    }

    /// A MULTI queue holds at most `--max-request-bytes` (each command counted 256 bytes besides
    /// its keys and values): without a bound, one client queueing 3,000,000 HSETs grew the server
    /// to 1 GB and then some at EXEC. Past it, queueing refuses (TOOBIG) and EXEC applies nothing,
    /// whether the transaction arrives command by command or whole in one write.
    @Test func aTransactionQueueIsBoundedByTheRequestLimit() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--max-request-bytes", "4096"])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            let value = String(repeating: "v", count: 100)
            func hset(_ i: Int) -> String { "*4\r\n$4\r\nHSET\r\n$2\r\ntx\r\n$4\r\nf\(100 + i)\r\n$100\r\n\(value)\r\n" }
            // 362 bytes each (256 + tx, f1NN and the value): 11 fit in 4,096, the 12th does not.
            for whole in [false, true] {
                if whole {
                    try c.send("MULTI\r\n" + (0..<20).map(hset).joined() + "EXEC\r\n")
                    #expect(try c.reply() == .simple("OK"))
                } else {
                    #expect(try c.command(["MULTI"]) == .simple("OK"))
                }
                for i in 0..<20 {
                    if !whole { try c.send(hset(i)) }
                    let reply = try c.reply()
                    if i < 11 {
                        #expect(reply == .simple("QUEUED"), "command \(i)")
                    } else {
                        #expect(reply == .error("TOOBIG transaction too large: its watched namespaces and queued commands would hold more than 4096 bytes (--max-request-bytes); EXEC will apply nothing"), "command \(i): \(reply)")
                    }
                }
                if !whole { try c.send("EXEC\r\n") }
                #expect(try c.reply().errorCode == "EXECABORT", whole ? "sent whole" : "sent one by one")
                #expect(try c.command(["HLEN", "tx"]) == .integer(0), "nothing applied")
            }
            // The connection, out of MULTI, starts a new queue that fits.
            try c.send("MULTI\r\n" + (0..<11).map(hset).joined() + "EXEC\r\n")
            #expect(try c.reply() == .simple("OK"))
            for _ in 0..<11 { #expect(try c.reply() == .simple("QUEUED")) }
            #expect(try c.reply() == .array(Array(repeating: .integer(1), count: 11)))
        }
    }

    @Test func aHugeBulkHeaderIsRefusedBeforeAllocating() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let before = server.residentKiB()
            let c = try RawConnection(path: server.socketPath)
            try c.send("*3\r\n$3\r\nPUT\r\n$1\r\na\r\n$9999999999\r\n")
            #expect(try c.reply().errorCode == "PROTO")
            #expect(c.isClosedByServer())
            if ServerProcess.residentMemoryIsMeaningful { #expect(server.residentKiB() - before < 16 * 1024) }
            #expect(try RawConnection(path: server.socketPath).command(["PING"]) == .simple("PONG"))
        }
    }

    @Test func anEndlessInlineLineIsCutOffAtTheLimit() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 16 * 1024)
            var refused = false
            for _ in 0..<64 {
                do { try c.send(chunk) } catch { refused = true; break }
            }
            _ = refused
            #expect(try c.reply().errorCode == "PROTO")
            #expect(c.isClosedByServer())
        }
    }

    @Test func aClientTricklingOneByteAtATimeIsServedAndOthersAreNotDelayed() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let slow = try RawConnection(path: server.socketPath)
            let fast = try RawConnection(path: server.socketPath)
            var request: [UInt8] = []
            RequestEncoder.encode(["PUT", "trickle", "key", "value"], into: &request)
            for (i, byte) in request.enumerated() {
                try slow.send([byte])
                if i % 8 == 0 { #expect(try fast.command(["PING"]) == .simple("PONG")) }
            }
            #expect(try slow.reply() == .simple("OK"))
        }
    }

    @Test func aConnectionDroppedMidCommandAppliesNothing() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            do {
                let c = try RawConnection(path: server.socketPath)
                try c.send("*4\r\n$3\r\nPUT\r\n$4\r\ndrop\r\n$1\r\nk\r\n$10\r\nhalf")
            }
            do {
                let c = try RawConnection(path: server.socketPath)
                try c.send("BATCH drop PUT a 1 PUT b")
            }
            usleep(200_000)
            let check = try RawConnection(path: server.socketPath)
            #expect(try check.command(["GET", "drop", "k"]) == .null)
            #expect(try check.command(["COUNT", "drop"]) == .integer(0))
        }
    }

    @Test func clientsThatNeverReadGetBackpressureNotUnboundedBuffers() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let setup = try RawConnection(path: server.socketPath)
            let big = String(repeating: "x", count: 256 * 1024)
            #expect(try setup.command(["PUT", "bp", "big", big]) == .simple("OK"))
            let before = server.residentKiB()
            // Five clients each ask for 2000 copies of a 256 KiB value (about 500 MiB each) and never read.
            var request: [UInt8] = []
            for _ in 0..<2000 { RequestEncoder.encode(["GET", "bp", "big"], into: &request) }
            var hogs: [RawConnection] = []
            for _ in 0..<5 {
                let hog = try RawConnection(path: server.socketPath, timeoutSeconds: 2)
                _ = try? hog.send(request)
                hogs.append(hog)
            }
            usleep(500_000)
            let grown = server.residentKiB() - before
            if ServerProcess.residentMemoryIsMeaningful {
                #expect(grown < 64 * 1024, "server grew by \(grown) KiB while clients did not read")
            }
            #expect(try setup.command(["PING"]) == .simple("PONG"))
            #expect(try setup.command(["GET", "bp", "big"]) == .bulk(big))
        }
    }

    @Test func aLargeValueIsNotCopiedWholeForClientsThatDoNotRead() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let setup = try RawConnection(path: server.socketPath)
            let big = [UInt8](repeating: 0x61, count: 8 * 1024 * 1024)
            var put: [UInt8] = []
            RequestEncoder.encode([Array("PUT".utf8), Array("lv".utf8), Array("k".utf8), big], into: &put)
            try setup.send(put)
            #expect(try setup.reply() == .simple("OK"))
            let before = server.residentKiB()
            // Twenty clients each ask for the 8 MiB value once and never read: 160 MiB if each reply
            // were copied whole into its connection's output, about 1 MiB each when it goes out in pieces.
            var hogs: [RawConnection] = []
            for _ in 0..<20 {
                let hog = try RawConnection(path: server.socketPath, timeoutSeconds: 2)
                try hog.send("GET lv k\r\n")
                hogs.append(hog)
            }
            usleep(1_000_000)
            let grown = server.residentKiB() - before
            if ServerProcess.residentMemoryIsMeaningful {
                #expect(grown < 64 * 1024, "server grew by \(grown) KiB while clients did not read")
            }
            #expect(try setup.command(["PING"]) == .simple("PONG"))
            let reader = try RawConnection(path: server.socketPath)
            #expect(try reader.command(["GET", "lv", "k"]) == .bulk(big), "a reader still gets the whole value")
        }
    }

    @Test func pipelinedLargeScansFromClientsThatNeverReadStayBounded() async throws {
        // Three clients each pipeline 200 SCANs of 20,000 entries (about 500 MB of replies each)
        // in one write of under 5 KB, and never read.
        try await expectBoundedWhileClientsDoNotRead(namespace: "sc", request: String(repeating: "SCAN sc 0 COUNT 20000\r\n", count: 200),
                                                     waitSeconds: 1, limitMiB: 32) { (_, setup) throws in
            #expect(try setup.command(["COUNT", "sc"]) == .integer(20000))
        }
    }

    /// HGETALL, HKEYS and HVALS each reply with a whole namespace, and weigh its keys: of one
    /// larger than a connection's budget, a connection runs one at a time, and the next only
    /// once its reply has been sent. Before (2026-11-29), each counted as
    /// one reply entry, so a connection ran thousands of them at once: 30 pipelined HGETALLs of a
    /// 173,000-key namespace, never read, held 570 MB.
    @Test func pipelinedWholeNamespaceReadsFromClientsThatNeverReadStayBounded() async throws {
        // Three clients each pipeline 300 whole-namespace reads (about 2.5 MB of reply each, 750
        // MB in all) in one write of under 5 KB, and never read; a third of them queued in MULTI,
        // which EXEC replies with (each weighs as much when queued).
        let request = String(repeating: "HGETALL whole\r\nHKEYS whole\r\nMULTI\r\nHVALS whole\r\nEXEC\r\n", count: 100)
        try await expectBoundedWhileClientsDoNotRead(namespace: "whole", request: request,
                                                     waitSeconds: 2, limitMiB: 48) { (server, _) throws in
            // A client that reads gets every reply whole, in order.
            let reader = try RawConnection(path: server.socketPath)
            try reader.send("HLEN whole\r\nHKEYS whole\r\nHLEN whole\r\n")
            #expect(try reader.reply() == .integer(20000))
            guard case .array(let keys) = try reader.reply() else { Issue.record("HKEYS did not reply an array"); return }
            #expect(keys.count == 20000)
            #expect(try reader.reply() == .integer(20000))
        }
    }

    /// A read of a small namespace of large values (four fields of 60 KB: it weighs five reply
    /// entries) replies with arrays that share the values with the map: packing them into one
    /// buffer, as the replies of small values are, would copy 240 KB per reply, and a connection
    /// runs thousands of such reads in one turn.
    @Test func pipelinedReadsOfLargeValuesFromClientsThatNeverReadStayBounded() async throws {
        // Three clients each pipeline 300 reads of 240 KB (72 MB of reply each) in one write of
        // under 8 KB, and never read.
        let value = String(repeating: "w", count: 60_000)
        let request = String(repeating: "HGETALL wide\r\nHVALS wide\r\n", count: 150)
        try await expectBoundedWhileClientsDoNotRead(namespace: "rf", request: request, waitSeconds: 2, limitMiB: 48,
                                                     setup: [["HSET", "wide", "a", value, "b", value, "c", value, "d", value]]) { (server, _) throws in
            let reader = try RawConnection(path: server.socketPath)
            guard case .array(let values) = try reader.command(["HVALS", "wide"]) else { Issue.record("not an array"); return }
            #expect(values == Array(repeating: .bulk(Array(value.utf8)), count: 4))
        }
    }

    /// HRANDFIELD weighs its count: a negative one of 100,000 replies with that many fields
    /// however small the namespace, from a request of 30 bytes.
    @Test func pipelinedRandomFieldsFromClientsThatNeverReadStayBounded() async throws {
        // Three clients each pipeline 300 draws of 20,000 fields with their values (about 2.5 MB
        // of reply each, 750 MB in all) in one write of under 10 KB, and never read; a third of
        // them queued in MULTI.
        let request = String(repeating: "HRANDFIELD rf -20000 WITHVALUES\r\nMULTI\r\nHRANDFIELD rf 20000 WITHVALUES\r\nEXEC\r\nHRANDFIELD rf -20000\r\n", count: 100)
        try await expectBoundedWhileClientsDoNotRead(namespace: "rf", request: request, waitSeconds: 2, limitMiB: 48) { (server, _) throws in
            let reader = try RawConnection(path: server.socketPath)
            guard case .array(let drawn) = try reader.command(["HRANDFIELD", "rf", "-20000", "WITHVALUES"]) else { Issue.record("not an array"); return }
            #expect(drawn.count == 40000)
        }
    }

    /// Fills `namespace` with 20,000 keys of 100 bytes and runs the `setup` commands, has three
    /// clients each send `request` and never read, and expects the server to grow by less than
    /// `limitMiB` within `waitSeconds` and still answer; then runs `afterwards` with the server and
    /// the connection that filled it.
    private func expectBoundedWhileClientsDoNotRead(namespace: String, request: String, waitSeconds: Double, limitMiB: Int,
                                                   setup commands: [[String]] = [],
                                                   afterwards: @escaping @Sendable (ServerProcess, RawConnection) throws -> Void) async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let setup = try RawConnection(path: server.socketPath)
            let value = String(repeating: "v", count: 100)
            for batch in 0..<20 {
                var arguments = ["BATCH", namespace]
                for i in 0..<1000 { arguments += ["PUT", "key\(batch * 1000 + i)", value] }
                guard case .array(let replies) = try setup.command(arguments), replies.count == 1000 else {
                    Issue.record("BATCH \(batch) did not answer 1000 replies"); return
                }
            }
            for command in commands {
                if case .error(let message) = try setup.command(command) { Issue.record("\(command[0]): \(message)"); return }
            }
            let before = server.residentKiB()
            var hogs: [RawConnection] = []
            for _ in 0..<3 {
                let hog = try RawConnection(path: server.socketPath, timeoutSeconds: 2)
                try hog.send(Array(request.utf8))
                hogs.append(hog)
            }
            usleep(UInt32(waitSeconds * 1_000_000))
            let grown = server.residentKiB() - before
            if ServerProcess.residentMemoryIsMeaningful {
                #expect(grown < limitMiB * 1024, "server grew by \(grown) KiB while clients did not read")
            }
            #expect(try setup.command(["PING"]) == .simple("PONG"))
            try afterwards(server, setup)
        }
    }

    @Test func allowListRejectsOtherUsersWithNoPerm() async throws {
        try await onOwnThread {
            guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
                  FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") || FileManager.default.isExecutableFile(atPath: "/bin/nc") else {
                return
            }
            let dir = TemporaryDirectory()
            chmod(dir.path, 0o755)
            let server = try ServerProcess(directory: dir, arguments: ["--socket-mode", "666", "--allow-uid", "4242", "--allow-gid", "4343"])
            defer { server.stop() }
            func connectAs(_ uid: String, groups: String? = nil) throws -> String {
                let groupArguments = groups.map { ["--groups", $0] } ?? ["--clear-groups"]
                let p = try ChildProcess("/usr/bin/setpriv", ["--reuid", uid, "--regid", uid] + groupArguments + ["/bin/sh", "-c",
                                                              "printf 'PING\\r\\n' | timeout 30 nc -U -N \(server.socketPath)"],
                                         stdout: .pipe)
                let data = p.readOutputs().stdout
                p.waitForExit()
                return String(decoding: data, as: UTF8.self)
            }
            #expect(try connectAs("65534").hasPrefix("-NOPERM"))
            #expect(try connectAs("4242").hasPrefix("+PONG"))
            #expect(try connectAs("4343").hasPrefix("+PONG"), "primary group allowed")
            #expect(try connectAs("65534", groups: "100,4343").hasPrefix("+PONG"), "supplementary group allowed")
            #expect(try connectAs("65534", groups: "100,4344").hasPrefix("-NOPERM"), "other groups refused")
            #expect(try RawConnection(path: server.socketPath).command(["PING"]) == .simple("PONG"), "own uid is always allowed")
        }
    }
}

extension Reply {
    var bulkText: String? {
        if case .bulk(let b) = self { return String(decoding: b, as: UTF8.self) }
        return nil
    }
}
