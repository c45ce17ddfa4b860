import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `RENAME ns newns` and `RENAMENX ns newns` on a real server (protocol.md, "RENAME,
/// RENAMENX"): Redis's replies and errors, the keys and deadlines moved and the target's old
/// keys gone, every key at a version after all earlier ones, lasting a restart and a kill -9;
/// followers of both names told and ended; refusals leave everything as it was.
@Suite struct RenameServerTests {
    @Test("RENAME moves the keys, deadlines and versions on, replacing the target; RENAMENX leaves a target that holds a key; Redis's errors; it lasts a kill -9")
    func renamesOverTheWire() async throws {
        let directory = TemporaryDirectory("rename-srv")
        do {
            let server = try await ServerProcess.started(directory: directory, arguments: ["--fsync", "always"])
            try await onOwnThread {
                let c = try RawConnection(path: server.socketPath)
                #expect(try c.command(["HSET", "tmp", "a", "1", "b", "2"]) == .integer(2))
                #expect(try c.command(["PUT", "tmp", "c", "3", "PX", "600000"]) == .simple("OK"))
                #expect(try c.command(["EXPIRE", "tmp", "3600"]) == .integer(1))
                #expect(try c.command(["HSET", "live", "old", "x"]) == .integer(1))
                guard case .array(let before) = try c.command(["GETV", "live", "old"]), case .integer(let oldVersion) = before[1] else {
                    Issue.record("GETV")
                    return
                }
                #expect(try c.command(["RENAME", "tmp", "live"]) == .simple("OK"))
                #expect(try c.command(["HGETALL", "live"]) == .array(["a", "1", "b", "2", "c", "3"].map { .bulk($0) }))
                #expect(try c.command(["TTL", "live"]) == .integer(3600))
                guard case .integer(let left) = try c.command(["PTTL", "live", "c"]) else {
                    Issue.record("PTTL")
                    return
                }
                #expect(left > 590_000, "the key's own deadline moved with it")
                #expect(try c.command(["EXISTS", "tmp"]) == .integer(0))
                #expect(try c.command(["KEYS", "*"]) == .array([.bulk("live")]))
                #expect(try c.command(["PUT", "live", "old", "y", "IFVERSION", String(oldVersion)]) == .null, "an old version guards nothing")
                #expect(try c.command(["RENAME", "tmp", "live"]) == .error("ERR no such key"))
                #expect(try c.command(["RENAMENX", "tmp", "live"]) == .error("ERR no such key"))
                #expect(try c.command(["HSET", "other", "f", "v"]) == .integer(1))
                #expect(try c.command(["RENAMENX", "live", "other"]) == .integer(0))
                #expect(try c.command(["HGET", "other", "f"]) == .bulk("v"), "RENAMENX changed nothing")
                #expect(try c.command(["RENAMENX", "other", "fresh"]) == .integer(1))
                #expect(try c.command(["RENAME", "live", "live"]) == .simple("OK"))
                #expect(try c.command(["RENAMENX", "live", "live"]) == .integer(0))
                #expect(try c.command(["NAMESPACES"]) == .array([.bulk("fresh"), .bulk("live")]))
            }
            #expect(server.stop(signal: SIGKILL) != 0)
        }
        let server = try await ServerProcess.started(directory: directory)
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["HGETALL", "live"]) == .array(["a", "1", "b", "2", "c", "3"].map { .bulk($0) }), "after kill -9")
            #expect(try c.command(["HGET", "fresh", "f"]) == .bulk("v"))
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("fresh"), .bulk("live")]))
        }
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: directory.data).filter { $0.hasPrefix(".") && $0 != ".lock" && $0 != ".sequence-floor" }
        #expect(leftovers.isEmpty, "\(leftovers)")
    }

    @Test("bad names, wrong arity, a namespace holding a lock, and MULTI are refused, nothing renamed, the connection usable")
    func refusals() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["HSET", "a", "f", "1"]) == .integer(1))
            #expect(try c.command(["RENAME", "a"]) == .error("ERR wrong number of arguments for 'RENAME' (usage: RENAME ns newns)"))
            #expect(try c.command(["RENAMENX", "a", "b", "c"]) == .error("ERR wrong number of arguments for 'RENAMENX' (usage: RENAMENX ns newns)"))
            #expect(try c.command(["RENAME", "a", "bad/ns"]) == .error("BADNS namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x2f)"))
            #expect(try c.command(["PUT", "locks", "job", "me", "IFVERSION", "0", "EPHEMERAL"]).errorCode == nil)
            let refused = try c.command(["RENAME", "locks", "a"])
            #expect(refused.errorCode == "ERR" && "\(refused)".contains("keys of a connection"), "\(refused)")
            #expect(try c.command(["GET", "locks", "job"]) == .bulk("me"))
            #expect(try c.command(["HGET", "a", "f"]) == .bulk("1"))
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            #expect(try c.command(["RENAME", "a", "b"]).errorCode == "ERR")
            #expect(try c.command(["EXEC"]) == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(try c.command(["HGET", "a", "f"]) == .bulk("1"))
            #expect(try c.command(["EXISTS", "b"]) == .integer(0))
        }
    }

    @Test("followers of both names get the change deleting their keys and LAGGING; resuming into the target's new life is COMPACTED")
    func followersAreTold() async throws {
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
            #expect(try writer.command(["RENAME", "src", "dst"]) == .simple("OK"))
            #expect(M(try src.reply()) == .change("src", 2, [(Array("k".utf8), nil)]))
            #expect(try src.reply() == .error("LAGGING resume from sequence 2 of namespace 'src' (the namespace was renamed to 'dst')"))
            #expect(M(try dst.reply()) == .change("dst", 2, [(Array("old".utf8), nil)]))
            #expect(try dst.reply() == .error("LAGGING resume from sequence 2 of namespace 'dst' (the namespace was replaced by 'src', renamed to it)"))
            let resumed = try RawConnection(path: server.socketPath)
            try resumed.send("CHANGES dst FROM 2\r\n")
            #expect(try resumed.reply().errorCode == "COMPACTED", "its new life starts at the rename: follow it with SNAPSHOT")
            #expect(try writer.command(["HGETALL", "dst"]) == .array([.bulk("k"), .bulk("v")]))
        }
    }
}
