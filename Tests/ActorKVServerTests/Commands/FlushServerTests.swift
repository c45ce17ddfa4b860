import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// `FLUSHDB` and `FLUSHALL` on a real server: every namespace removed as UNLINK removes one
/// (durably, followers told, numbers going on), a corrupt one left and named while the others
/// go, and bad options and MULTI refused with nothing removed.
@Suite struct FlushServerTests {
    @Test("FLUSHDB and FLUSHALL remove every namespace, empty ones too, and they stay removed after a restart; names used again number after the removal")
    func removesEveryNamespace() async throws {
        let directory = TemporaryDirectory("flush")
        do {
            let server = try await ServerProcess.started(directory: directory)
            try await onOwnThread {
                let c = try RawConnection(path: server.socketPath)
                #expect(try c.command(["PUT", "a", "k", "v"]) == .simple("OK"))
                #expect(try c.command(["HSET", "b", "f", "1", "g", "2"]) == .integer(2))
                #expect(try c.command(["HSET", "b", "h", "3"]) == .integer(1))
                #expect(try c.command(["HSET", "empty", "f", "1"]) == .integer(1))
                #expect(try c.command(["HDEL", "empty", "f"]) == .integer(1))
                #expect(try c.command(["NAMESPACES"]) == .array([.bulk("a"), .bulk("b"), .bulk("empty")]))
                #expect(try c.command(["FLUSHDB"]) == .simple("OK"))
                #expect(try c.command(["NAMESPACES"]) == .array([]))
                #expect(try c.command(["DBSIZE"]) == .integer(0))
                #expect(try c.command(["GET", "a", "k"]) == .null)
                #expect(try c.command(["HGETALL", "b"]) == .array([]))
                // a's write was 1 and its removal 2; b's removal 3 (after its two writes): the floor is the highest.
                #expect(try c.command(["PUT", "a", "k", "again", "IFVERSION", "0"]) == .integer(4))
                #expect(try c.command(["flushall", "async"]) == .simple("OK"))
                #expect(try c.command(["PUT", "c", "k", "kept"]) == .simple("OK"))
                #expect(try c.command(["FLUSHDB", "sync"]) == .simple("OK"))
                #expect(try c.command(["PUT", "survivor", "k", "v"]) == .simple("OK"))
            }
            #expect(server.stop() == 0)
        }
        let contents = try FileManager.default.contentsOfDirectory(atPath: directory.data).filter { !$0.hasPrefix(".") }
        #expect(contents == ["survivor"], "only the namespace written after the flushes is on disk: \(contents)")
        let server = try await ServerProcess.started(directory: directory)
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("survivor")]))
            #expect(try c.command(["GET", "c", "k"]) == .null)
            #expect(try c.command(["FLUSHDB"]) == .simple("OK"), "with nothing but one namespace")
            #expect(try c.command(["FLUSHDB"]) == .simple("OK"), "with no namespace at all")
            #expect(try c.command(["NAMESPACES"]) == .array([]))
        }
    }

    @Test("an unknown option, extra arguments and MULTI are refused, nothing removed, the connection usable")
    func refusals() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "keep", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["FLUSHDB", "NOW"]) == .error("ERR syntax error: the only option is ASYNC or SYNC (both remove every namespace before replying)"))
            #expect(try c.command(["FLUSHALL", "ASYNC", "SYNC"]) == .error("ERR wrong number of arguments for 'FLUSHALL' (usage: FLUSHALL [ASYNC|SYNC])"))
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            let queued = try c.command(["FLUSHDB"])
            if case .error(let text) = queued { #expect(text.hasPrefix("ERR "), "\(text)") } else { Issue.record("FLUSHDB queued: \(queued)") }
            #expect(try c.command(["EXEC"]) == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(try c.command(["GET", "keep", "k"]) == .bulk("v"))
        }
    }

    @Test("followers of each namespace get the change deleting its keys, then LAGGING, as after UNLINK")
    func followersAreTold() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            typealias M = ChangesServerTests.Message
            let writer = try RawConnection(path: server.socketPath)
            #expect(try writer.command(["PUT", "s", "k1", "v1"]) == .simple("OK"))
            #expect(try writer.command(["PUT", "t", "k2", "v2"]) == .simple("OK"))
            let watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES t\r\n")
            #expect(try ChangesServerTests.read(watcher) { if case .synced = $0 { true } else { false } } == [.header("t", 1), .synced("t", 1)])
            #expect(try writer.command(["FLUSHALL"]) == .simple("OK"))
            #expect(M(try watcher.reply()) == .change("t", 2, [(Array("k2".utf8), nil)]))
            #expect(try watcher.reply() == .error("LAGGING resume from sequence 2 of namespace 't' (the namespace was removed)"))
            #expect(watcher.isClosedByServer())
        }
    }

    @Test("a namespace whose files are corrupt is left, named in the error with how many were removed; the others are removed")
    func corruptNamespaceLeft() async throws {
        let directory = TemporaryDirectory("flush-corrupt")
        let log = try await seedWithCorruptNamespace(directory, namespaces: ["a", "b", "c"], corrupt: "b")
        let server = try await ServerProcess.started(directory: directory)
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            let reply = try c.command(["FLUSHDB"])
            guard case .error(let text) = reply else { throw TestFailure("not refused: \(reply)") }
            #expect(text.hasPrefix("CORRUPT "), "\(text)")
            #expect(text.hasSuffix("; 2 of 3 namespaces were removed, not 'b'"), "\(text)")
            #expect(try c.command(["GET", "a", "k"]) == .null)
            #expect(try c.command(["GET", "c", "k"]) == .null)
            #expect(try c.command(["PING"]) == .simple("PONG"))
        }
        #expect(FileManager.default.fileExists(atPath: log), "the corrupt namespace's files are left for the operator")
    }
}
