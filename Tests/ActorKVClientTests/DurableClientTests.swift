import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// ``ActorKVClient/waitDurable(timeoutMilliseconds:)`` (`WAITAOF 1 0 timeout`) against a server
/// under `--fsync no`, where nothing else fsyncs: a raw connection's `WAITAOF 0 0 0` says `:0`
/// after a write and `:1` once the client's call returned. (Through an etcd agent every
/// acknowledged write is durable already: `:1` throughout.)
@Suite("Waiting for durability from the Swift client")
struct DurableClientTests {
    @Test("waitDurable() makes the writes before it durable: WAITAOF 0 0 0 says 0 before and 1 after")
    func waitsForTheFsync() async throws {
        try await withServer(fsync: "no") { server, kv in
            try await kv.put("jobs", "17", "done")
            let asked = try await kv.send(["WAITAOF", "0", "0", "0"])
            let expected: Int64 = ClusterTarget.active ? 1 : 0
            #expect(asked == .array([.integer(expected), .integer(0)]), "before: only asked")
            #expect(try await kv.waitDurable())
            #expect(try await kv.waitDurable(timeoutMilliseconds: 5000))
            let after = try await kv.send(["WAITAOF", "0", "0", "0"])
            #expect(after == .array([.integer(1), .integer(0)]))
            #expect(try await kv.get("jobs", "17") == Array("done".utf8))
        }
    }

    @Test("actorkv sync makes the writes before it durable: WAITAOF 0 0 0 says 0 before and 1 after; an argument is a usage error")
    func cliSync() async throws {
        try await withServer(fsync: "no") { server, kv in
            let put = try await runCLI(["put", "jobs", "18", "done"], socket: server.socketPath)
            #expect(put.status == 0, "\(put.stderr)")
            let asked = try await kv.send(["WAITAOF", "0", "0", "0"])
            #expect(asked == .array([.integer(ClusterTarget.active ? 1 : 0), .integer(0)]))
            let sync = try await runCLI(["sync"], socket: server.socketPath)
            #expect(sync.status == 0 && sync.text.isEmpty && sync.stderr.isEmpty, "\(sync)")
            let after = try await kv.send(["WAITAOF", "0", "0", "0"])
            #expect(after == .array([.integer(1), .integer(0)]))
            let usage = try await runCLI(["sync", "jobs"], socket: server.socketPath)
            #expect(usage.status == 2 && usage.stderr.contains("usage: actorkv sync"), "\(usage.stderr)")
        }
    }
}
