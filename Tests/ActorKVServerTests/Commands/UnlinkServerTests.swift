import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

/// `UNLINK ns [ns ...]` on a real server: namespaces removed with their place among
/// `--max-namespaces`, their followers told and ended, their names used again without reusing a
/// version or change number, and the event loop's fast path never running on a removed one.
@Suite struct UnlinkServerTests {
    @Test("UNLINK counts the namespaces it removed; they are gone from every listing; bad names, no names and MULTI are refused with the connection left usable")
    func removesOverTheWire() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "a", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["HSET", "b", "f", "1", "g", "2"]) == .integer(2))
            #expect(try c.command(["PUT", "keep", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["UNLINK", "a", "b", "missing", "a"]) == .integer(2))
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("keep")]))
            #expect(try c.command(["KEYS", "*"]) == .array([.bulk("keep")]))
            #expect(try c.command(["GET", "a", "k"]) == .null)
            #expect(try c.command(["HGETALL", "b"]) == .array([]))
            #expect(try c.command(["EXISTS", "b"]) == .integer(0))
            #expect(!FileManager.default.fileExists(atPath: server.dataPath + "/a"))
            #expect(try c.command(["UNLINK"]) == .error("ERR wrong number of arguments for 'UNLINK' (usage: UNLINK ns [ns ...])"))
            #expect(try c.command(["UNLINK", "keep", "bad/ns"]) == .error("BADNS namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x2f)"))
            #expect(try c.command(["GET", "keep", "k"]) == .bulk("v"), "nothing removed when a name is bad")
            #expect(try c.command(["DEL", "keep"]) == .error("ERR wrong number of arguments for 'DEL' (usage: DEL ns key [key ...]); a namespace (Redis's hash) is removed with UNLINK ns"))
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            let queued = try c.command(["UNLINK", "keep"])
            if case .error(let text) = queued { #expect(text.hasPrefix("ERR "), "\(text)") } else { Issue.record("UNLINK queued: \(queued)") }
            #expect(try c.command(["EXEC"]) == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(try c.command(["GET", "keep", "k"]) == .bulk("v"))
            // The name used again numbers after the removal.
            #expect(try c.command(["PUT", "a", "k", "again", "IFVERSION", "0"]) == .integer(3), "after a's write (1) and its removal's change (2)")
        }
    }

    @Test("a follower gets the change deleting every key, then LAGGING naming it and the end; a resume from it follows the new life, one from before gets COMPACTED")
    func followersAreToldAndEnded() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            typealias M = ChangesServerTests.Message
            let writer = try RawConnection(path: server.socketPath)
            #expect(try writer.command(["PUT", "s", "k1", "v1"]) == .simple("OK"))
            #expect(try writer.command(["PUT", "s", "k2", "v2"]) == .simple("OK"))
            let watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES s\r\n")
            #expect(try ChangesServerTests.read(watcher) { if case .synced = $0 { true } else { false } } == [.header("s", 2), .synced("s", 2)])
            #expect(try writer.command(["UNLINK", "s"]) == .integer(1))
            #expect(M(try watcher.reply()) == .change("s", 3, [(Array("k1".utf8), nil), (Array("k2".utf8), nil)]))
            #expect(try watcher.reply() == .error("LAGGING resume from sequence 3 of namespace 's' (the namespace was removed)"))
            #expect(watcher.isClosedByServer())
            #expect(try writer.command(["PUT", "s", "k1", "again"]) == .simple("OK"))
            let resumed = try RawConnection(path: server.socketPath)
            try resumed.send("CHANGES s FROM 3\r\n")
            #expect(try ChangesServerTests.read(resumed) { if case .synced = $0 { true } else { false } }
                    == [.header("s", 3), .change("s", 4, [(Array("k1".utf8), Array("again".utf8))]), .synced("s", 4)])
            let late = try RawConnection(path: server.socketPath)
            #expect(try late.command(["CHANGES", "s", "FROM", "2"]) == .error("COMPACTED oldest available sequence is 4"))
            #expect(try late.command(["GETV", "s", "k1"]) == .array([.bulk("again"), .integer(4)]))
        }
    }

    @Test("WATCH sees a removal: of a watched namespace, and of one created and removed after the WATCH")
    func watchSeesRemoval() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            let other = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "w", "k", "v"]) == .simple("OK"))
            for setup in [[["UNLINK", "w"]], [["PUT", "fresh", "k", "v"], ["UNLINK", "fresh"]]] {
                let watched = setup.first![1]
                #expect(try c.command(["WATCH", watched]) == .simple("OK"))
                for request in setup { _ = try other.command(request) }
                #expect(try c.command(["MULTI"]) == .simple("OK"))
                #expect(try c.command(["PUT", watched, "k", "mine"]) == .simple("QUEUED"))
                let executed = try c.command(["EXEC"])
                #expect(executed == .null, "\(setup): \(executed) (the test client reads *-1 as null)")
                #expect(try c.command(["GET", watched, "k"]) == .null)
            }
        }
    }

    @Test("after a removal, a transaction WATCHing a name that does not exist yet commits when nothing touched it, as before any removal; a removal in between aborts it")
    func watchOfANewNameAfterARemoval() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            let other = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "old", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["UNLINK", "old"]) == .integer(1))
            for (name, queued) in [("new1", ["HSET", "new1", "f", "1"]), ("new2", ["HDEL", "new2", "f"])] {
                #expect(try c.command(["WATCH", name]) == .simple("OK"))
                #expect(try c.command(["MULTI"]) == .simple("OK"))
                #expect(try c.command(queued) == .simple("QUEUED"))
                let executed = try c.command(["EXEC"])
                #expect(executed == .array([.integer(queued[0] == "HSET" ? 1 : 0)]), "\(queued): \(executed)")
            }
            // Another namespace removed between WATCH and EXEC: the watched name may have lived
            // and gone meanwhile, so EXEC applies nothing (as for any write to it).
            for queued in [["HSET", "new3", "f", "1"], ["HDEL", "new3", "f"]] {
                #expect(try c.command(["WATCH", "new3"]) == .simple("OK"))
                #expect(try other.command(["PUT", "gone", "k", "v"]) == .simple("OK"))
                #expect(try other.command(["UNLINK", "gone"]) == .integer(1))
                #expect(try c.command(["MULTI"]) == .simple("OK"))
                #expect(try c.command(queued) == .simple("QUEUED"))
                let executed = try c.command(["EXEC"])
                #expect(executed == .null, "\(queued): \(executed)")
            }
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("new1")]), "the aborted and the delete-only transactions created nothing")
        }
    }

    @Test("a removed namespace frees its place among --max-namespaces")
    func freesItsPlace() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-namespaces", "2"])
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "a", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["PUT", "b", "k", "v"]) == .simple("OK"))
            #expect(NamespaceLimitTests.isTooMany(try c.command(["PUT", "c", "k", "v"]), "c", limit: 2))
            #expect(try c.command(["UNLINK", "a"]) == .integer(1))
            #expect(try c.command(["PUT", "c", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["NAMESPACES"]) == .array([.bulk("b"), .bulk("c")]))
        }
    }

    @Test("removals while clients pipeline writes to the same namespace: every write is acknowledged, none runs on a removed namespace, and the server goes on")
    func removalsAmidPipelinedWrites() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        let writers = 3, rounds = 200, depth = 8
        let failures = Mutex<[String]>([])
        let finished = Atomic<Int>(0)
        let threads = (0..<writers).map { writer in
            Thread { [socketPath = server.socketPath] in
                defer { finished.add(1, ordering: .releasing) }
                do {
                    let w = try RawConnection(path: socketPath)
                    for round in 0..<rounds {
                        // Several writes in one send: the loop runs them at once on the namespace it remembers.
                        try w.send((0..<depth).map { "PUT hot w\(writer)-\(round)-\($0) v\r\n" }.joined())
                        for _ in 0..<depth {
                            let reply = try w.reply()
                            if reply != .simple("OK") { failures.withLock { $0.append("\(reply)") } }
                        }
                    }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        for thread in threads { thread.start() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            for _ in 0..<40 {
                let reply = try c.command(["UNLINK", "hot"])
                #expect(reply == .integer(0) || reply == .integer(1), "\(reply)")
            }
            while finished.load(ordering: .acquiring) < writers { usleep(10_000) }
            #expect(try c.command(["PING"]) == .simple("PONG"))
            // Whatever is left numbers after every removal: its keys' versions are above the floor.
            guard case .array(let names) = try c.command(["NAMESPACES"]) else { throw TestFailure("NAMESPACES") }
            #expect(names == [] || names == [.bulk("hot")])
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0.prefix(3) })")
    }
}
