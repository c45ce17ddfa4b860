import ActorKVClient
import ActorKVTestSupport
import Testing

/// ``ActorKVClient/renameNamespace(_:to:replacing:)`` and `actorkv rename`/`renamenx`: a
/// namespace built under one name and swapped in under another; RENAMENX onto a namespace that
/// holds a key does nothing; a source that holds no key is an error (exit 1). Through an etcd
/// agent both are refused.
@Suite("Renaming a namespace from the clients")
struct RenameClientTests {
    @Test("renameNamespace swaps a namespace in, replacing the target's keys; not replacing, a target that holds a key stays; no source throws ERR no such key",
          .localOnly("an agent refuses RENAME (renameRefusedByAnAgent)"))
    func swiftClient() async throws {
        try await withServer { _, kv in
            try await kv.put("config:next", "theme", "dark")
            try await kv.put("config", "theme", "light")
            try await kv.put("config", "stale", "x")
            #expect(try await kv.renameNamespace("config:next", to: "config"))
            #expect(try await kv.get("config", "theme") == Array("dark".utf8))
            #expect(try await kv.get("config", "stale") == nil)
            try await kv.put("config:next", "theme", "blue")
            #expect(try await !kv.renameNamespace("config:next", to: "config", replacing: false))
            #expect(try await kv.get("config", "theme") == Array("dark".utf8), "RENAMENX changed nothing")
            do throws(ActorKVError) {
                try await kv.renameNamespace("nosuch", to: "config")
                Issue.record("renamed a namespace that does not exist")
            } catch {
                guard case .server(let code, let message) = error else { throw error }
                #expect(code == "ERR" && message == "no such key")
            }
        }
    }

    @Test("actorkv rename and renamenx: nothing printed, exit 0; 1 when NS holds no key; 5 when renamenx finds NEWNS holding a key; 2 for a usage error",
          .localOnly("an agent refuses RENAME (renameRefusedByAnAgent)"))
    func cli() async throws {
        try await withServer { server, kv in
            try await kv.put("tmp", "a", "1")
            try await kv.put("live", "b", "2")
            let blocked = try await runCLI(["renamenx", "tmp", "live"], socket: server.socketPath)
            #expect(blocked.status == 5 && blocked.text.isEmpty && blocked.stderr.contains("live holds a key"), "\(blocked)")
            let renamed = try await runCLI(["rename", "tmp", "live"], socket: server.socketPath)
            #expect(renamed.status == 0 && renamed.text.isEmpty && renamed.stderr.isEmpty, "\(renamed)")
            #expect(try await kv.get("live", "a") == Array("1".utf8))
            #expect(try await kv.get("live", "b") == nil)
            let missing = try await runCLI(["rename", "tmp", "live"], socket: server.socketPath)
            #expect(missing.status == 1 && missing.stderr.contains("tmp holds no key"), "\(missing)")
            let usage = try await runCLI(["rename", "live"], socket: server.socketPath)
            #expect(usage.status == 2 && usage.stderr.contains("usage: actorkv rename NS NEWNS"), "\(usage.stderr)")
        }
    }

    @Test("an agent of an etcd cluster refuses RENAME, nothing changed",
          .enabled(if: ClusterTarget.active, "cluster mode only"))
    func renameRefusedByAnAgent() async throws {
        try await withServer { _, kv in
            try await kv.put("tmp", "a", "1")
            try await expectRefusedByAnAgent("RENAME") { () async throws(ActorKVError) in try await kv.renameNamespace("tmp", to: "live") }
            #expect(try await kv.get("tmp", "a") == Array("1".utf8))
        }
    }
}
