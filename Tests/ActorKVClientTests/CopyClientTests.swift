import ActorKVClient
import ActorKVTestSupport
import Testing

/// ``ActorKVClient/copyNamespace(_:to:replacing:)`` and `actorkv copy`: a template copied to a
/// new namespace, the source unchanged; a target that holds a key is replaced only when asked;
/// a source that holds no key copies nothing (exit 1). Through an etcd agent it is refused.
@Suite("Copying a namespace from the clients")
struct CopyClientTests {
    @Test("copyNamespace copies a namespace, the source unchanged; a target that holds a key stays unless replacing; no source copies nothing",
          .localOnly("an agent refuses COPY (copyRefusedByAnAgent)"))
    func swiftClient() async throws {
        try await withServer { _, kv in
            try await kv.put("template", "theme", "dark")
            try await kv.put("user:1", "theme", "light")
            try await kv.put("user:1", "stale", "x")
            #expect(try await kv.copyNamespace("template", to: "user:2"))
            #expect(try await kv.get("user:2", "theme") == Array("dark".utf8))
            #expect(try await !kv.copyNamespace("template", to: "user:1"), "not replacing, a target that holds a key stays")
            #expect(try await kv.get("user:1", "stale") == Array("x".utf8))
            #expect(try await kv.copyNamespace("template", to: "user:1", replacing: true))
            #expect(try await kv.get("user:1", "theme") == Array("dark".utf8))
            #expect(try await kv.get("user:1", "stale") == nil)
            #expect(try await kv.get("template", "theme") == Array("dark".utf8), "the source is unchanged")
            #expect(try await !kv.copyNamespace("nosuch", to: "user:3"))
            #expect(try await kv.count("user:3") == 0)
        }
    }

    @Test("actorkv copy: nothing printed, exit 0; 1 when NS holds no key; 5 when NEWNS holds a key without --replace; 2 for a usage error",
          .localOnly("an agent refuses COPY (copyRefusedByAnAgent)"))
    func cli() async throws {
        try await withServer { server, kv in
            try await kv.put("tmp", "a", "1")
            try await kv.put("live", "b", "2")
            let blocked = try await runCLI(["copy", "tmp", "live"], socket: server.socketPath)
            #expect(blocked.status == 5 && blocked.text.isEmpty && blocked.stderr.contains("live holds a key"), "\(blocked)")
            #expect(try await kv.get("live", "b") == Array("2".utf8))
            let copied = try await runCLI(["copy", "tmp", "live", "--replace"], socket: server.socketPath)
            #expect(copied.status == 0 && copied.text.isEmpty && copied.stderr.isEmpty, "\(copied)")
            #expect(try await kv.get("live", "a") == Array("1".utf8))
            #expect(try await kv.get("live", "b") == nil)
            #expect(try await kv.get("tmp", "a") == Array("1".utf8))
            let missing = try await runCLI(["copy", "--replace", "nosuch", "live"], socket: server.socketPath)
            #expect(missing.status == 1 && missing.stderr.contains("nosuch holds no key"), "\(missing)")
            let usage = try await runCLI(["copy", "live"], socket: server.socketPath)
            #expect(usage.status == 2 && usage.stderr.contains("usage: actorkv copy [--replace] NS NEWNS"), "\(usage.stderr)")
        }
    }

    @Test("an agent of an etcd cluster refuses COPY, nothing changed",
          .enabled(if: ClusterTarget.active, "cluster mode only"))
    func copyRefusedByAnAgent() async throws {
        try await withServer { _, kv in
            try await kv.put("tmp", "a", "1")
            try await expectRefusedByAnAgent("COPY") { () async throws(ActorKVError) in try await kv.copyNamespace("tmp", to: "live") }
            #expect(try await kv.count("live") == 0)
        }
    }
}
