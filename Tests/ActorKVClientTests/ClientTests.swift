@testable import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// Expects `body` to throw an ``ActorKVError`` and returns it.
func expectActorKVError(_ body: () async throws -> Void,
                        sourceLocation: SourceLocation = #_sourceLocation) async -> ActorKVError? {
    await expectError(ActorKVError.self, body, sourceLocation: sourceLocation)
}

@Suite("ActorKVClient against a real actorkvd")
struct ClientTests {
    @Test("put/get round trips, binary keys and values, missing key is nil")
    func roundTrips() async throws {
        try await withServer { _, kv in
            try await kv.put("config", "theme", "dark")
            #expect(try await kv.getString("config", "theme") == "dark")
            #expect(try await kv.get("config", "theme") == "dark".bytes)

            let binaryValues: [[UInt8]] = [
                [0x00], [0x00, 0x00, 0x41, 0x00], Array("line1\r\nline2\r\n".utf8), [0x0D], [0x0A],
                [0xFF, 0xFE, 0xC3, 0x28, 0x80], Array("$3\r\nfoo\r\n*1\r\n-ERR x\r\n".utf8),
                (0...255).map { UInt8($0) }, [],
            ]
            for (i, value) in binaryValues.enumerated() {
                try await kv.put("bin", "v\(i)", value)
            }
            for (i, value) in binaryValues.enumerated() {
                #expect(try await kv.get("bin", "v\(i)") == value, "value \(i)")
            }
            let binaryKey: [UInt8] = [0x00, 0x0D, 0x0A, 0xFF, 0x20]
            try await kv.put("bin", binaryKey, [0xC0, 0xAF])
            #expect(try await kv.get("bin", binaryKey) == [0xC0, 0xAF])

            let big = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            try await kv.put("bin", "big", big)
            #expect(try await kv.get("bin", "big") == big)

            #expect(try await kv.get("config", "missing") == nil)
            #expect(try await kv.getString("no-such-namespace", "k") == nil)
            #expect(try await kv.ping() == "PONG")
            #expect(try await kv.ping([0x00, 0xFF, 0x0A]) == [0x00, 0xFF, 0x0A])
        }
    }

    @Test("delete and exists count keys; count; namespaces; info; compact",
          .localOnly("COMPACT compacts the whole etcd cluster's history, under the tests running beside it (protocol.md, Cluster mode)"))
    func countsAndServerCommands() async throws {
        try await withServer { _, kv in
            for key in ["a", "b", "c", "d"] { try await kv.put("n1", key, "value-\(key)") }
            #expect(try await kv.count("n1") == 4)
            #expect(try await kv.exists("n1", ["a", "b", "zz", "a"]) == 3)
            #expect(try await kv.exists("n1", "c"))
            #expect(try await kv.delete("n1", ["a", "b", "missing"]) == 2)
            #expect(try await kv.delete("n1", ["a"]) == 0)
            #expect(try await kv.delete("n1", "c") == true)
            #expect(try await kv.exists("n1", "c") == false)
            #expect(try await kv.count("n1") == 1)
            #expect(try await kv.count("never-written") == 0)

            try await kv.put("n2", "k", "v")
            let names = try await kv.namespaces()
            #expect(Set(names).isSuperset(of: ["n1", "n2"]))
            try await kv.compact("n1")
            #expect(try await kv.getString("n1", "d") == "value-d")
            let info = try await kv.info()
            #expect(info.contains("# Server"))
        }
    }

    @Test("scan follows the cursor over many pages; every key exactly once, in order, with prefix")
    func scanPages() async throws {
        try await withServer { _, kv in
            let wanted = (0..<50).map { String(format: "p:%03d", $0) }
            _ = try await kv.batch("scan", wanted.map { .put($0, "value of \($0)") })
            _ = try await kv.batch("scan", (0..<10).map { .put("q:\($0)", "other") } + [.put("o", "before")])

            var seen: [String] = []
            for try await entry in kv.scan("scan", prefix: "p:", pageSize: 7) {
                seen.append(entry.keyString)
                #expect(entry.valueString == "value of \(entry.keyString)")
            }
            #expect(seen == wanted)

            // The same walk, page by page: more than 3 pages, every key once.
            var pages = 0
            var cursor = ScanPage.start
            var keys: [String] = []
            repeat {
                let page = try await kv.scanPage("scan", cursor: cursor, prefix: "p:".bytes, count: 7)
                keys += page.entries.map(\.keyString)
                cursor = page.nextCursor
                pages += 1
            } while cursor != ScanPage.start
            #expect(pages > 3)
            #expect(keys == wanted)

            var all = 0
            for try await _ in kv.scan("scan", pageSize: 4) { all += 1 }
            #expect(all == 61)
            var none = 0
            for try await _ in kv.scan("scan", prefix: "zzz") { none += 1 }
            for try await _ in kv.scan("empty-namespace") { none += 1 }
            #expect(none == 0)
        }
    }

    @Test("batch returns one result per operation and is all-or-nothing")
    func batches() async throws {
        try await withServer { _, kv in
            try await kv.put("b", "old", "1")
            let results = try await kv.batch("b", [
                .put("new", "2"), .delete("old"), .delete("never"), .put(key: [0x00, 0x01], value: [0xFF]),
            ])
            #expect(results == [.stored, .deleted(true), .deleted(false), .stored])
            #expect(try await kv.getString("b", "new") == "2")
            #expect(try await kv.get("b", "old") == nil)
            #expect(try await kv.get("b", [0x00, 0x01]) == [0xFF])
            #expect(try await kv.batch("b", []) == [])

            let error = await expectActorKVError { _ = try await kv.batch("b", [.put("applied?", "no"), .put("", "x")]) }
            #expect(error?.serverCode == "BADKEY")
            #expect(try await kv.get("b", "applied?") == nil)
        }
    }

    @Test("server errors carry their code and message; the connection stays usable")
    func serverErrors() async throws {
        try await withServer { _, kv in
            let badNamespace = await expectActorKVError { _ = try await kv.get("a/b", "k") }
            #expect(badNamespace?.serverCode == "BADNS")
            if case .server(_, let message)? = badNamespace { #expect(message.contains("namespace")) }
            #expect(badNamespace?.isConnectionError == false)

            let badKey = await expectActorKVError { try await kv.put("ok", "", "v") }
            #expect(badKey?.serverCode == "BADKEY")
            let badCursor = await expectActorKVError { _ = try await kv.scanPage("ok", cursor: "zz".bytes) }
            #expect(badCursor?.serverCode == "BADCURSOR")
            let unknown = await expectActorKVError { _ = try await kv.send(["FROBNICATE"]) }
            #expect(unknown?.serverCode == "ERR")
            #expect(unknown?.description.hasPrefix("ERR unknown command") == true)

            // The same codes, typed.
            #expect(badNamespace?.wireCode == .badNS)
            #expect(badKey?.wireCode == .badKey)
            #expect(badCursor?.wireCode == .badCursor)
            #expect(unknown?.wireCode == .err)

            let pong = try await kv.ping()
            #expect(pong == "PONG")
        }
    }

    @Test("wireCode types the code of a server error or refusal; nil for an unknown code or another error")
    func wireCodeOfErrors() {
        #expect(ActorKVError.fromErrorReply("TOOBIG value too large").wireCode == .tooBig)
        #expect(ActorKVError.refused(path: "p", code: "NOPERM", message: "").wireCode == .noPerm)
        let newer = ActorKVError.fromErrorReply("NEWCODE from a newer server")
        #expect(newer.wireCode == nil)
        #expect(newer.serverCode == "NEWCODE")
        #expect(ActorKVError.timedOut("slow").wireCode == nil)
        #expect(ActorKVError.fromErrorReply("NOPERM no write permission on namespace 'config' for uid 33").isPermissionDenied)
        #expect(!ActorKVError.refused(path: "p", code: "NOPERM", message: "connection refused: uid 33 gid 33 is not allowed to connect").isPermissionDenied)
    }

    @Test("200 concurrent calls on one client each get their own reply (pipelining)")
    func concurrentCalls() async throws {
        try await withServer { _, kv in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<200 {
                    group.addTask {
                        switch i % 4 {
                        case 0:
                            try await kv.put("conc", "key-\(i)", "value-\(i)")
                            #expect(try await kv.getString("conc", "key-\(i)") == "value-\(i)")
                        case 1:
                            let echo = Array("echo-\(i)".utf8)
                            #expect(try await kv.ping(echo) == echo)
                        case 2:
                            #expect(try await kv.get("conc", "never-\(i)") == nil)
                        default:
                            let error = await expectActorKVError { _ = try await kv.get("bad/\(i)", "k") }
                            #expect(error?.serverCode == "BADNS")
                            if case .server(_, let message)? = error { #expect(message.contains("0x2f")) }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await kv.count("conc") == 50)
        }
    }

    @Test("no server: a connection error naming the path and errno")
    func cannotConnect() async throws {
        let path = "/tmp/akc-no-server-\(getpid()).sock"
        let kv = ActorKVClient(socketPath: path)
        let error = await expectActorKVError { try await kv.ping() }
        #expect(error?.isConnectionError == true)
        if case .cannotConnect(let reported, let code, let reason)? = error {
            #expect(reported == path)
            #expect(code == ENOENT)
            #expect(reason == "No such file or directory")
        } else {
            Issue.record("expected cannotConnect, got \(String(describing: error))")
        }
        #expect(error?.description.contains(path) == true)
        let tooLong = ActorKVClient(socketPath: "/tmp/" + String(repeating: "x", count: 200))
        #expect(await expectActorKVError { try await tooLong.ping() }?.isConnectionError == true)
    }

    /// Checked through `defaultSocketPath(environment:)` with dictionaries: tests run in
    /// parallel, so none of them sets this process's environment.
    @Test("without a socketPath: $ACTORKV_SOCKET when set and not empty, else ./actorkv.sock; a socketPath given wins")
    func defaultSocketPath() async throws {
        #expect(ActorKVClient.defaultSocketPath(environment: ["ACTORKV_SOCKET": "/run/app/kv.sock"]) == "/run/app/kv.sock")
        #expect(ActorKVClient.defaultSocketPath(environment: ["ACTORKV_SOCKET": ""]) == "./actorkv.sock")
        #expect(ActorKVClient.defaultSocketPath(environment: [:]) == "./actorkv.sock")
        #expect(ActorKVClient.defaultSocketPath(environment: ["SOCK": "/elsewhere"]) == "./actorkv.sock")
        // The initializer's default is this process's environment, read when the client is made.
        let environment = ProcessInfo.processInfo.environment
        #expect(ActorKVClient.defaultSocketPath == ActorKVClient.defaultSocketPath(environment: environment))
        #expect(ActorKVClient().socketPath == ActorKVClient.defaultSocketPath(environment: environment))
        #expect(ActorKVClient(socketPath: "/tmp/given.sock").socketPath == "/tmp/given.sock")
        // The path it names is the one connected to.
        try await withServer { server, _ in
            let kv = ActorKVClient(socketPath: ActorKVClient.defaultSocketPath(environment: ["ACTORKV_SOCKET": server.socketPath]))
            let pong = try await kv.ping()
            #expect(pong == "PONG")
            await kv.close()
        }
    }

    @Test("a killed server fails pending and next calls with a connection error; a restart reconnects")
    func killAndReconnect() async throws {
        try await withServer(fsync: "always") { server, kv in
            try await kv.put("durable", "k", "before the crash")

            // Freeze the server so that the next calls stay pending, then kill it.
            try await server.signal(SIGSTOP)
            let pending = Task {
                await withTaskGroup(of: ActorKVError?.self) { group in
                    for i in 0..<20 {
                        group.addTask {
                            do {
                                _ = try await kv.get("durable", "k\(i)")
                                return nil
                            } catch {
                                return error as? ActorKVError
                            }
                        }
                    }
                    var errors: [ActorKVError?] = []
                    for await error in group { errors.append(error) }
                    return errors
                }
            }
            // Wait (bounded) until all 20 requests are outstanding, so that they are pending when it dies.
            for _ in 0..<1000 where kv.pendingRequestCount < 20 { try await Task.sleep(for: .milliseconds(5)) }
            #expect(kv.pendingRequestCount == 20)
            try await server.signal(SIGKILL)
            let errors = await pending.value
            #expect(errors.count == 20)
            for error in errors {
                guard case .connectionLost? = error else {
                    Issue.record("expected connectionLost, got \(String(describing: error))")
                    continue
                }
            }

            let next = await expectActorKVError { _ = try await kv.get("durable", "k") }
            #expect(next?.isConnectionError == true, "got \(String(describing: next))")

            try await server.restart()
            #expect(try await kv.getString("durable", "k") == "before the crash")
            try await kv.put("durable", "after", "restart")
            #expect(try await kv.count("durable") == 2)
        }
    }

    @Test("close() lets calls in flight finish; calls racing it or after it use a new connection")
    func closeAndReuse() async throws {
        try await withServer { _, kv in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<50 {
                    group.addTask { try await kv.put("c", "k\(i)", "v\(i)") }
                    if i == 25 { group.addTask { await kv.close() } }
                }
                try await group.waitForAll()
            }
            await kv.close()
            await kv.close()
            #expect(try await kv.count("c") == 50)
            #expect(try await kv.getString("c", "k49") == "v49")
        }
    }
}
