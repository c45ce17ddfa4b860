import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

/// Namespaces are bounded as connections are: each keeps its log open, so a client creating them
/// without end used to take every file descriptor (new connections, compactions and, at last, the
/// process itself failed; a restart could not even create its epoll descriptor).
@Suite struct NamespaceLimitTests {
    /// Whether `reply` refuses creating namespace `name` past `limit`, naming what sets it
    /// (`source`: the flag, or the open files limit when that binds).
    static func isTooMany(_ reply: Reply, _ name: String, limit: Int, source: String = "actorkvd --max-namespaces") -> Bool {
        guard case .error(let text) = reply else { return false }
        return text == "ERR namespace '\(name)' would be one more than the \(limit) this server holds (\(source)); nothing was written"
    }

    /// What the refusal names when the open files limit `openFiles` leaves room for `limit`
    /// namespaces, fewer than `--max-namespaces` `configured`.
    static func descriptorSource(openFiles: Int, limit: Int, configured: Int) -> String {
        "the open files limit, ulimit -n \(openFiles), leaves descriptors for \(limit) namespaces, fewer than --max-namespaces \(configured)"
    }

    @Test func aWriteThatWouldCreateOneNamespaceTooManyIsRefusedAndNothingIsCreated() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-namespaces", "3"])
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            for name in ["a", "b", "c"] { #expect(try c.command(["PUT", name, "k", "v"]) == .simple("OK")) }
            let refused = try c.command(["PUT", "d", "k", "v"])
            #expect(Self.isTooMany(refused, "d", limit: 3), "PUT d: \(refused)")
            let hset = try c.command(["HSET", "d", "f", "v"])
            #expect(Self.isTooMany(hset, "d", limit: 3), "HSET d: \(hset)")
            #expect(try c.command(["GET", "d", "k"]) == .null)
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("a"), .bulk("b"), .bulk("c")]))
            #expect(!FileManager.default.fileExists(atPath: server.dataPath + "/d"))
            // The namespaces there take writes as before; the connection is still usable.
            #expect(try c.command(["PUT", "a", "k2", "v2"]) == .simple("OK"))
            #expect(try c.command(["GET", "a", "k2"]) == .bulk("v2"))
        }
    }

    @Test func namespacesBeyondALoweredLimitStillOpen() async throws {
        let directory = TemporaryDirectory("nslimit")
        do {
            let first = try await ServerProcess.started(directory: directory)
            try await onOwnThread {
                let c = try RawConnection(path: first.socketPath)
                for name in ["a", "b", "c"] { #expect(try c.command(["PUT", name, "k", name]) == .simple("OK")) }
            }
            #expect(first.stop() == 0)
        }
        let second = try await ServerProcess.started(directory: directory, arguments: ["--max-namespaces", "2"])
        defer { second.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: second.socketPath)
            for name in ["a", "b", "c"] {
                #expect(try c.command(["GET", name, "k"]) == .bulk(name))
                #expect(try c.command(["PUT", name, "k2", "v"]) == .simple("OK"))
            }
            #expect(Self.isTooMany(try c.command(["PUT", "d", "k", "v"]), "d", limit: 2))
        }
        #expect(second.log.contains("warning: the data directory holds 3 namespaces, more than the limit of 2 (actorkvd --max-namespaces): all were opened, but no new one can be created"))
    }

    /// Under an open files limit too low for the default 1,024 namespaces, the server limits them
    /// to half of what is left after its own files, so namespaces never take the descriptors that
    /// connections, compactions and a restart need.
    @Test func aLowOpenFilesLimitBoundsNamespacesBeforeDescriptorsRunOut() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-clients", "10"], openFiles: 400)
        defer { server.stop() }
        let expected = (400 - 256) / 2
        #expect(server.log.contains("namespaces are limited to \(expected)"), "log: \(server.log)")
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            var created = 0
            for i in 0..<400 {
                let reply = try c.command(["PUT", "n\(i)", "k", "v"])
                if reply == .simple("OK") { created += 1; continue }
                let source = Self.descriptorSource(openFiles: 400, limit: expected, configured: 1024)
                #expect(Self.isTooMany(reply, "n\(i)", limit: expected, source: source), "PUT n\(i): \(reply)")
                break
            }
            #expect(created == expected)
            // Descriptors are left for what the server does next: more connections, a snapshot.
            let others = try (0..<5).map { _ in try RawConnection(path: server.socketPath) }
            for other in others { #expect(try other.command(["PING"]) == .simple("PONG")) }
            #expect(try c.command(["COMPACT", "n0"]) == .simple("OK"))
        }
        // And a restart opens every namespace and serves.
        #expect(server.stop() == 0)
        try await server.restart()
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["GET", "n\(expected - 1)", "k"]) == .bulk("v"))
        }
        #expect(server.log.contains("ready: \(expected) namespaces (0 unavailable)"), "log: \(server.log)")
    }

    /// An operator's `ulimit -n 64` with `--max-namespaces 30`: the open files limit, not the
    /// flag, bounds the namespaces (to 16), and the refusal says so instead of blaming the flag.
    @Test func aRefusalUnderALowOpenFilesLimitNamesThatLimit() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-namespaces", "30"], openFiles: 64)
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            for i in 1...16 { #expect(try c.command(["PUT", "ns\(i)", "k", "v"]) == .simple("OK"), "ns\(i)") }
            let refused = try c.command(["PUT", "ns17", "k", "v"])
            let source = Self.descriptorSource(openFiles: 64, limit: 16, configured: 30)
            #expect(Self.isTooMany(refused, "ns17", limit: 16, source: source), "\(refused)")
        }
    }

    /// A data directory holding more namespaces than the descriptors of a low open files limit
    /// can keep open: the startup warning counts those that opened and those unavailable, as the
    /// ready line does (it used to say that all were opened).
    @Test func theStartupLinesAgreeOnHowManyNamespacesOpened() async throws {
        let directory = TemporaryDirectory("nsfds")
        do {
            let first = try await ServerProcess.started(directory: directory)
            try await onOwnThread {
                let c = try RawConnection(path: first.socketPath)
                for i in 0..<60 { #expect(try c.command(["PUT", "n\(i)", "k", "v"]) == .simple("OK")) }
            }
            #expect(first.stop() == 0)
        }
        let second = try await ServerProcess.started(directory: directory, arguments: ["--max-namespaces", "30"], openFiles: 64)
        defer { second.stop() }
        let log = second.log
        let ready = try #require(log.split(separator: "\n").last { $0.contains("ready: ") }, "log: \(log)")
        let unavailable = try #require(Int(ready.split(separator: "(").last!.prefix { $0.isNumber }), "\(ready)")
        #expect(ready.contains("ready: 60 namespaces (\(unavailable) unavailable)"), "\(ready)")
        #expect(unavailable > 0, "64 descriptors cannot hold 60 logs: \(log)")
        let source = Self.descriptorSource(openFiles: 64, limit: 16, configured: 30)
        #expect(log.contains("warning: the data directory holds 60 namespaces, more than the limit of 16 (\(source)): \(60 - unavailable) were opened and \(unavailable) are unavailable (see above); no new one can be created"), "log: \(log)")
        #expect(!log.contains("all were opened"), "log: \(log)")
    }

    @Test("at the limit, a write that would create a namespace first removes those that hold no key; with none, it is refused")
    func emptyNamespacesMakeRoom() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-namespaces", "3"])
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            for name in ["a", "b", "c"] { #expect(try c.command(["HSET", name, "f", name]) == .integer(1)) }
            #expect(try c.command(["HDEL", "b", "f"]) == .integer(1))
            #expect(try c.command(["HSET", "d", "f", "d"]) == .integer(1))
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("a"), .bulk("c"), .bulk("d")]))
            for name in ["a", "c", "d"] { #expect(try c.command(["HGET", name, "f"]) == .bulk(name)) }
            #expect(Self.isTooMany(try c.command(["HSET", "e", "f", "e"]), "e", limit: 3))
            // A name made again after its removal numbers on from it: no version comes back.
            #expect(try c.command(["DEL", "a", "f"]) == .integer(1))
            #expect(try c.command(["PUT", "b", "k", "v"]) == .simple("OK"))
            guard case .array(let pair) = try c.command(["GETV", "b", "k"]), case .integer(let version)? = pair.last else {
                throw TestFailure("GETV b k")
            }
            #expect(version > 2, "b's version after its removal: \(version)")
        }
        #expect(server.log.contains("namespace b: removed (0 keys, last sequence 2, to make room for a new one: it held no key)"), "log: \(server.log)")
        #expect(!FileManager.default.fileExists(atPath: server.dataPath + "/a"))
    }

    @Test("an empty namespace somebody follows (CHANGES) is not removed to make room")
    func aFollowedEmptyNamespaceStays() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-namespaces", "2"])
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "a", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["DEL", "a", "k"]) == .integer(1))
            #expect(try c.command(["PUT", "b", "k", "v"]) == .simple("OK"))
            let follower = try RawConnection(path: server.socketPath)
            try follower.send("CHANGES a\r\n")
            _ = try ChangesServerTests.read(follower) { if case .synced = $0 { true } else { false } }
            #expect(Self.isTooMany(try c.command(["PUT", "c", "k", "v"]), "c", limit: 2))
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("a"), .bulk("b")]))
            #expect(try c.command(["PUT", "a", "k", "again"]) == .simple("OK"))
            guard case .array(let change) = try follower.reply(), change.count >= 3 else { throw TestFailure("the follower's change") }
        }
    }

    /// Under `--execution pool` (namespaces on Swift's pool, the store's actor apart) a removal
    /// that checked emptiness a step before detaching lost writes here, every run.
    @Test("writes to a namespace that empties and fills while others are created at the limit: each is kept, read back at once",
          arguments: ["loop", "pool"])
    func writesRacingTheRoomMakingAreKept(execution: String) async throws {
        let server = try await ServerProcess.started(arguments: ["--max-namespaces", "2", "--execution", execution])
        defer { server.stop() }
        let failures = Mutex<[String]>([])
        let done = Atomic<Bool>(false)
        let creator = Thread { [socketPath = server.socketPath] in
            do {
                let c = try RawConnection(path: socketPath)
                var i = 0
                while !done.load(ordering: .acquiring) {
                    // Each new name takes the place of the empty one before it, or of "hot" when empty.
                    let reply = try c.command(["PUT", "n\(i)", "k", "v"])
                    if reply != .simple("OK") && !Self.isTooMany(reply, "n\(i)", limit: 2) { failures.withLock { $0.append("PUT n\(i): \(reply)") } }
                    _ = try c.command(["DEL", "n\(i)", "k"])
                    i += 1
                }
            } catch {
                failures.withLock { $0.append("creator: \(error)") }
            }
        }
        creator.start()
        try await onOwnThread {
            let w = try RawConnection(path: server.socketPath)
            for round in 0..<300 {
                _ = try w.command(["DEL", "hot", "k"])
                let put = try w.command(["PUT", "hot", "k", "v\(round)"])
                if Self.isTooMany(put, "hot", limit: 2) { continue }  // the creator's namespace held a key then
                #expect(put == .simple("OK"), "round \(round): \(put)")
                let read = try w.command(["GET", "hot", "k"])
                #expect(read == .bulk("v\(round)"), "round \(round): \(read)")
            }
            done.store(true, ordering: .releasing)
        }
        while creator.isExecuting { usleep(10_000) }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0.prefix(3) })")
        #expect(server.log.contains("to make room for a new one"), "no namespace was removed to make room")
    }
}
