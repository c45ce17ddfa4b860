import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

/// `BACKUP path` on a real server: the copy is a data directory another server opens as it is,
/// taken of every namespace at one moment while clients write.
@Suite struct BackupServerTests {
    @Test("BACKUP writes a data directory that a second server serves as the first did; bad paths and MULTI are refused with the connection left usable")
    func backupServedByAnotherServer() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        // Written where a second server finds its data directory.
        let copyDirectory = TemporaryDirectory("bk-copy")
        let target = copyDirectory.data
        let version = try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "config", "theme", "dark"]) == .simple("OK"))
            #expect(try c.command(["HSET", "jobs", "a", "1", "b", "2"]) == .integer(2))
            #expect(try c.command(["INCR", "jobs", "n", "5"]) == .integer(5))
            #expect(try c.command(["PUT", "jobs", "ttl", "x", "PX", "600000"]) == .simple("OK"))
            let version = try c.command(["GETV", "config", "theme"])
            #expect(try c.command(["BACKUP", target]) == .simple("OK"))
            #expect(try c.command(["PUT", "config", "theme", "light"]) == .simple("OK"), "written after the backup")
            for (path, reason) in [("relative", "needs an absolute path"), (target, "exists already"),
                                   (server.dataPath + "/inside", "cannot go inside the data directory")] {
                guard case .error(let text) = try c.command(["BACKUP", path]) else {
                    Issue.record("BACKUP \(path) was not refused")
                    continue
                }
                #expect(text.hasPrefix("ERR ") && text.contains(reason), "\(path): \(text)")
            }
            #expect(try c.command(["BACKUP"]) == .error("ERR wrong number of arguments for 'BACKUP' (usage: BACKUP path)"))
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            let queued = try c.command(["BACKUP", server.directory.path + "/in-multi"])
            if case .error(let text) = queued { #expect(text.hasPrefix("ERR "), "\(text)") } else { Issue.record("BACKUP queued: \(queued)") }
            #expect(try c.command(["EXEC"]) == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(!FileManager.default.fileExists(atPath: server.directory.path + "/in-multi"))
            #expect(try c.command(["GET", "config", "theme"]) == .bulk("light"))
            return version
        }
        let copy = try await ServerProcess.started(directory: copyDirectory)
        defer { copy.stop() }
        try await onOwnThread {
            let d = try RawConnection(path: copy.socketPath)
            #expect(try d.command(["GETV", "config", "theme"]) == version, "the value and its version")
            #expect(try d.command(["HGETALL", "jobs"]) == .array([.bulk("a"), .bulk("1"), .bulk("b"), .bulk("2"), .bulk("n"), .bulk("5"), .bulk("ttl"), .bulk("x")]))
            guard case .integer(let left) = try d.command(["PTTL", "jobs", "ttl"]) else { throw TestFailure("PTTL") }
            #expect(left > 500_000 && left <= 600_000, "the deadline kept: \(left)")
            #expect(try d.command(["NAMESPACES"]) == .array([.bulk("config"), .bulk("jobs")]))
        }
    }

    @Test("every namespace is copied at one moment: while clients increment a counter in one namespace and then in another, each backup holds the first at least as far as the second, and at most one increment a client further")
    func oneMomentForEveryNamespace() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        let writers = 2, backups = 20
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            // Namespaces between the two, each copied on its own: without one moment for all,
            // the counters move between the copy of `a` and that of `z`.
            for i in 0..<40 { #expect(try c.command(["PUT", "m\(i)", "k", "v"]) == .simple("OK")) }
        }
        let stop = Atomic<Bool>(false)
        let finished = Mutex<[Thread]>([])
        let threads = (0..<writers).map { _ in
            Thread { [socketPath = server.socketPath] in
                defer { finished.withLock { $0.append(Thread.current) } }
                guard let w = try? RawConnection(path: socketPath) else { return }
                while !stop.load(ordering: .relaxed) {
                    // Each acknowledged before the next is sent.
                    guard (try? w.command(["INCR", "a", "c"])) != nil, (try? w.command(["INCR", "z", "c"])) != nil else { return }
                }
            }
        }
        for thread in threads { thread.start() }
        defer { stop.store(true, ordering: .relaxed) }
        let paths = (0..<backups).map { server.directory.path + "/b\($0)" }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            for path in paths {
                #expect(try c.command(["BACKUP", path]) == .simple("OK"))
                usleep(5_000)
            }
        }
        stop.store(true, ordering: .relaxed)
        while finished.withLock({ $0.count }) < writers { try await Task.sleep(nanoseconds: 5_000_000) }
        var moved = 0
        for path in paths {
            let store = try Store(directory: path)
            let a = try await counter(store, "a"), z = try await counter(store, "z")
            #expect(a >= z && a - z <= writers, "\(path): a \(a), z \(z)")
            moved += a
            await store.close()
        }
        #expect(moved > 0, "the writers wrote during the backups")
    }

    @Test("a namespace whose files are corrupt is left out and named in the error; the backup holds the others")
    func corruptNamespaceNamed() async throws {
        let directory = TemporaryDirectory("bk-corrupt")
        _ = try await seedWithCorruptNamespace(directory, namespaces: ["a", "b"], corrupt: "b")
        let server = try await ServerProcess.started(directory: directory)
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            let reply = try c.command(["BACKUP", directory.path + "/copy"])
            guard case .error(let text) = reply else { throw TestFailure("not refused: \(reply)") }
            #expect(text.hasPrefix("CORRUPT backup written to \(directory.path)/copy with 1 namespace(s) but without 'b' ("), "\(text)")
            #expect(text.contains("000001.log is corrupt at byte offset"), "\(text)")
            #expect(try c.command(["GET", "a", "k"]) == .bulk("a"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path + "/copy") == ["a"])
    }

    /// The integer under key `c` of namespace `name` in `store` (0 when absent).
    @Test("a backup cut short by kill -9 leaves its hidden directory; the restarted server's next BACKUP of the same path removes it, says so in its log, and writes a whole backup")
    func killedBackupLeftoverRemoved() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        let parent = server.directory.path + "/backups"
        try FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        let fields = 1000, commands = 300
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            let value = String(repeating: "v", count: 100)
            for i in 0..<commands {
                let pairs = (0..<fields).flatMap { ["k\(i)-\($0)", value] }
                #expect(try c.command(["HSET", "big"] + pairs) == .integer(Int64(fields)))
            }
        }
        // Killed once its hidden directory appears, before the rename: tried again (on a new
        // path) in the rare case the backup was done before the kill.
        var cut: (target: String, hidden: String)?
        for attempt in 0..<5 where cut == nil {
            let target = parent + "/copy\(attempt)", prefix = ".copy\(attempt).partial-"
            let hidden = try await onOwnThread { () throws -> String? in
                let c = try RawConnection(path: server.socketPath)
                try c.send("BACKUP \(target)\r\n")
                let deadline = ContinuousClock.now + .seconds(30)
                while ContinuousClock.now < deadline {
                    let found = (try? FileManager.default.contentsOfDirectory(atPath: parent))?.first { $0.hasPrefix(prefix) }
                    if found != nil || FileManager.default.fileExists(atPath: target) {
                        kill(server.pid, SIGKILL)
                        return found
                    }
                }
                return nil
            }
            server.stop(signal: SIGKILL)
            if let hidden, !FileManager.default.fileExists(atPath: target),
               FileManager.default.fileExists(atPath: parent + "/" + hidden) {
                cut = (target, parent + "/" + hidden)
            }
            try await server.restart()
        }
        let (target, hidden) = try #require(cut, "no backup was caught before its rename in 5 tries")
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["BACKUP", target]) == .simple("OK"))
        }
        #expect(!FileManager.default.fileExists(atPath: hidden), "the leftover is removed")
        #expect(server.log.contains("backup: removed \(hidden),"), "\(server.log)")
        let copyDirectory = TemporaryDirectory("bk-killed")
        defer { copyDirectory.remove() }
        try FileManager.default.moveItem(atPath: target, toPath: copyDirectory.data)
        let copy = try await ServerProcess.started(directory: copyDirectory)
        defer { copy.stop() }
        try await onOwnThread {
            let d = try RawConnection(path: copy.socketPath)
            #expect(try d.command(["HLEN", "big"]) == .integer(Int64(fields * commands)))
        }
    }

    private func counter(_ store: Store, _ name: String) async throws -> Int {
        guard let namespace = try await store.existingNamespace(name), let value = await namespace.get(Array("c".utf8)) else { return 0 }
        return Int(String(decoding: value, as: UTF8.self)) ?? -1
    }
}
