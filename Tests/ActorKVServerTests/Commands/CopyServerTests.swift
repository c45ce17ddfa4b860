import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `COPY ns newns [DB 0] [REPLACE]` on a real server (protocol.md, "COPY"): Redis's replies and
/// errors, the keys and deadlines copied and the source unchanged, the target's old keys gone
/// only with REPLACE, lasting a kill -9; the target's followers told and ended, the source's
/// not; refusals leave everything as it was.
@Suite struct CopyServerTests {
    @Test("COPY copies keys, deadlines and the namespace's deadline, keeps the source, replaces the target only with REPLACE; Redis's replies; it lasts a kill -9")
    func copiesOverTheWire() async throws {
        let directory = TemporaryDirectory("copy-srv")
        let template = ["a", "1", "b", "2", "c", "3"].map { Reply.bulk($0) }
        do {
            let server = try await ServerProcess.started(directory: directory, arguments: ["--fsync", "always"])
            try await onOwnThread {
                let c = try RawConnection(path: server.socketPath)
                #expect(try c.command(["HSET", "template", "a", "1", "b", "2"]) == .integer(2))
                #expect(try c.command(["PUT", "template", "c", "3", "PX", "600000"]) == .simple("OK"))
                #expect(try c.command(["EXPIRE", "template", "3600"]) == .integer(1))
                #expect(try c.command(["HSET", "live", "old", "x"]) == .integer(1))
                #expect(try c.command(["COPY", "template", "live"]) == .integer(0), "without REPLACE, a target holding a key stays")
                #expect(try c.command(["HGETALL", "live"]) == .array([.bulk("old"), .bulk("x")]))
                #expect(try c.command(["COPY", "template", "live", "REPLACE"]) == .integer(1))
                #expect(try c.command(["HGETALL", "live"]) == .array(template))
                #expect(try c.command(["HGETALL", "template"]) == .array(template), "the source is unchanged")
                #expect(try c.command(["TTL", "live"]) == .integer(3600))
                guard case .integer(let left) = try c.command(["PTTL", "live", "c"]) else {
                    Issue.record("PTTL")
                    return
                }
                #expect(left > 590_000, "the key's own deadline was copied with it")
                #expect(try c.command(["COPY", "template", "fresh", "db", "0"]) == .integer(1))
                #expect(try c.command(["COPY", "nosuch", "fresh2"]) == .integer(0))
                #expect(try c.command(["HSET", "fresh", "mine", "1"]) == .integer(1))
                #expect(try c.command(["HLEN", "template"]) == .integer(3), "a write to the copy is not the source's")
                #expect(try c.command(["NAMESPACES"]) == .array([.bulk("fresh"), .bulk("live"), .bulk("template")]))
            }
            #expect(server.stop(signal: SIGKILL) != 0)
        }
        let server = try await ServerProcess.started(directory: directory)
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["HGETALL", "live"]) == .array(template), "after kill -9")
            #expect(try c.command(["HGETALL", "template"]) == .array(template))
            #expect(try c.command(["HLEN", "fresh"]) == .integer(4))
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.data).filter { $0.hasPrefix(".") && $0 != ".lock" && $0 != ".sequence-floor" }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("INFO shows a namespace that COPY or RENAME made before anything reads it: its line, the namespace count, db0's keys")
    func infoShowsTargets() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["HSET", "src", "a", "1", "b", "2", "c", "3"]) == .integer(3))
            #expect(try c.command(["COPY", "src", "copied"]) == .integer(1))
            #expect(try c.command(["RENAME", "copied", "moved"]) == .simple("OK"))
            guard case .bulk(let bytes) = try c.command(["INFO"]) else { Issue.record("INFO"); return }
            let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\r\n")
            #expect(lines.contains { $0.hasPrefix("ns_moved:keys=3,") }, "\(lines)")
            #expect(lines.contains("namespaces:2") && lines.contains { $0.hasPrefix("db0:keys=6,") }, "\(lines)")
        }
    }

    @Test("one name twice, bad options, bad names, wrong arity, a namespace holding a lock, and MULTI are refused with Redis's texts, nothing copied, the connection usable")
    func refusals() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["HSET", "a", "f", "1"]) == .integer(1))
            #expect(try c.command(["COPY", "a"]) == .error("ERR wrong number of arguments for 'COPY' (usage: COPY ns newns [DB 0] [REPLACE])"))
            for same in [["COPY", "a", "a"], ["COPY", "nosuch", "nosuch", "REPLACE"]] {
                let reply = try c.command(same)
                #expect(reply.errorCode == "ERR" && "\(reply)".contains("source and destination objects are the same"), "\(same): \(reply)")
            }
            #expect(try c.command(["COPY", "a", "b", "DB", "1"]) == .error("ERR ActorKV has one database, 0; namespaces take the place of Redis's numbered databases"))
            #expect(try c.command(["COPY", "a", "b", "DB", "x"]) == .error("ERR value is not an integer or out of range"))
            for bad in [["COPY", "a", "b", "DB"], ["COPY", "a", "b", "NX"], ["COPY", "a", "b", "REPLACE", "0"]] {
                #expect(try c.command(bad) == .error("ERR syntax error: COPY takes REPLACE and DB 0"), "\(bad)")
            }
            #expect(try c.command(["COPY", "a", "bad/ns"]) == .error("BADNS namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x2f)"))
            #expect(try c.command(["PUT", "locks", "job", "me", "IFVERSION", "0", "EPHEMERAL"]).errorCode == nil)
            let refused = try c.command(["COPY", "locks", "b"])
            #expect(refused.errorCode == "ERR" && "\(refused)".contains("keys of a connection"), "\(refused)")
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            #expect(try c.command(["COPY", "a", "b"]).errorCode == "ERR")
            #expect(try c.command(["EXEC"]) == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(try c.command(["EXISTS", "b"]) == .integer(0))
            #expect(try c.command(["HGET", "a", "f"]) == .bulk("1"))
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("a"), .bulk("locks")]))
        }
    }

    @Test("the target's followers get the change deleting its keys and LAGGING; the source's followers see nothing; a WATCH of the target sees a write")
    func followersAndWatchers() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            typealias M = ChangesServerTests.Message
            let writer = try RawConnection(path: server.socketPath)
            #expect(try writer.command(["PUT", "src", "k", "v"]) == .simple("OK"))
            #expect(try writer.command(["PUT", "dst", "old", "x"]) == .simple("OK"))
            let src = try RawConnection(path: server.socketPath), dst = try RawConnection(path: server.socketPath)
            try src.send("CHANGES src\r\n")
            try dst.send("CHANGES dst\r\n")
            #expect(try ChangesServerTests.read(src) { if case .synced = $0 { true } else { false } } == [.header("src", 1), .synced("src", 1)])
            #expect(try ChangesServerTests.read(dst) { if case .synced = $0 { true } else { false } } == [.header("dst", 1), .synced("dst", 1)])
            let watcher = try RawConnection(path: server.socketPath)
            #expect(try watcher.command(["WATCH", "dst"]) == .simple("OK"))
            #expect(try writer.command(["COPY", "src", "dst", "REPLACE"]) == .integer(1))
            #expect(M(try dst.reply()) == .change("dst", 2, [(Array("old".utf8), nil)]))
            #expect(try dst.reply() == .error("LAGGING resume from sequence 2 of namespace 'dst' (the namespace was replaced by a copy of 'src')"))
            #expect(try writer.command(["PUT", "src", "k2", "w"]) == .simple("OK"))
            #expect(M(try src.reply()) == .change("src", 2, [(Array("k2".utf8), Array("w".utf8))]), "the source's stream goes on with its next write only")
            #expect(try watcher.command(["MULTI"]) == .simple("OK"))
            #expect(try watcher.command(["HGET", "dst", "k"]) == .simple("QUEUED"))
            let exec = try watcher.command(["EXEC"])
            #expect(exec == .null, "the copy wrote the target (*-1): \(exec)")
            let fresh = try RawConnection(path: server.socketPath)
            #expect(try fresh.command(["WATCH", "src"]) == .simple("OK"))
            #expect(try writer.command(["COPY", "src", "dst2"]) == .integer(1))
            #expect(try fresh.command(["MULTI"]) == .simple("OK"))
            #expect(try fresh.command(["HGET", "src", "k"]) == .simple("QUEUED"))
            #expect(try fresh.command(["EXEC"]) == .array([.bulk("v")]), "copying a namespace is no write to it")
        }
    }
}
