import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// A delete of keys that do not exist changes nothing, over real sockets, locally and through an
/// agent (``ClusterTarget``): it takes no version, a follower of the namespace sees no change,
/// and a WATCH of the namespace still holds, as in Redis (protocol.md, "Transactions").
@Suite("Client: deleting keys that do not exist changes nothing")
struct MissingKeyDeleteTests {
    @Test("HDEL, DEL, a BATCH DEL and an HDEL in MULTI of missing keys: 0, and another connection's WATCH of the namespace holds; a delete of a key that exists breaks it")
    func watchHolds() async throws {
        try await withServer { server, watcher in
            let other = ActorKVClient(socketPath: server.socketPath)
            let ns = "nodel"
            _ = try await watcher.send(["HSET", ns, "a", "1"])
            #expect(try await watcher.send(["WATCH", ns]) == .simple("OK"))
            #expect(try await other.send(["HDEL", ns, "missing"]) == .integer(0))
            #expect(try await other.send(["DEL", ns, "missing", "gone"]) == .integer(0))
            #expect(try await other.send(["BATCH", ns, "DEL", "missing"]) == .array([.integer(0)]))
            #expect(try await other.send(["HDEL", "nothing-here", "missing"]) == .integer(0))
            _ = try await other.send(["MULTI"])
            _ = try await other.send(["HDEL", ns, "missing", "gone"])
            #expect(try await other.send(["EXEC"]) == .array([.integer(0)]))
            _ = try await watcher.send(["MULTI"])
            _ = try await watcher.send(["HSET", ns, "b", "2"])
            #expect(try await watcher.send(["EXEC"]) == .array([.integer(1)]), "the WATCH held: nothing was written")

            // A delete that finds one key is a write.
            #expect(try await watcher.send(["WATCH", ns]) == .simple("OK"))
            #expect(try await other.send(["HDEL", ns, "missing", "a"]) == .integer(1))
            _ = try await watcher.send(["MULTI"])
            _ = try await watcher.send(["HSET", ns, "c", "3"])
            #expect(try await watcher.send(["EXEC"]) == .null, "*-1: nothing applied")
            #expect(try await watcher.send(["HGETALL", ns]) == .array([.bulk(Array("b".utf8)), .bulk(Array("2".utf8))]))
            await other.close()
        }
    }

    @Test("a follower of the namespace gets no change for deletes of missing keys; a DEL of a missing key and one that exists is the delete of the one")
    func followersSeeNoChange() async throws {
        try await withServer { _, kv in
            let ns = "nodel-feed"
            try await kv.put(ns, "a", "1")
            let start = try #require(try await kv.getVersioned(ns, "a")).version
            let stream = kv.changes(ns, from: .after(start)).makeAsyncIterator()
            #expect(try await kv.delete(ns, "missing") == false)
            _ = try await kv.batch(ns, [.delete("missing"), .delete("gone")])
            #expect(try await kv.send(["DEL", ns, "missing", "a", "gone"]) == .integer(1))
            try await kv.put(ns, "b", "2")
            guard case .change(let first) = try await nextEvent(stream), case .change(let second) = try await nextEvent(stream) else {
                Issue.record("no change")
                return
            }
            #expect(first.keys == [ChangedKey(key: Array("a".utf8), value: nil)])
            #expect(second.keys == [ChangedKey(key: Array("b".utf8), value: Array("2".utf8))])
            // Locally each change is one record, and the deletes that found nothing took none.
            if !ClusterTarget.active { #expect(first.sequence == start + 1 && second.sequence == start + 2) }
        }
    }
}
