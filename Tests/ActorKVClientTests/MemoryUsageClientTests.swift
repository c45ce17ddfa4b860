import ActorKVClient
import ActorKVTestSupport
import Testing

/// ``ActorKVClient/memoryUsage(of:)`` and `actorkv memory`: the server's MEMORY USAGE of a
/// namespace, nil (exit 1) when it holds no key, growing with what is written, shrinking with
/// what is deleted. Through an etcd agent it is refused.
@Suite("A namespace's memory from the clients")
struct MemoryUsageClientTests {
    @Test("memoryUsage(of:) is nil for a namespace with no key, grows by at least what a write adds, and is nil again once every key is deleted",
          .localOnly("an agent refuses MEMORY USAGE (refusedByAnAgent)"))
    func swiftClient() async throws {
        try await withServer { _, kv in
            #expect(try await kv.memoryUsage(of: "sizes") == nil)
            try await kv.put("sizes", "theme", "dark")
            let one = try #require(try await kv.memoryUsage(of: "sizes"))
            #expect(one > 8192 + 9, "a namespace's own 8 KiB and the key's 9 bytes: \(one)")
            try await kv.put("sizes", "blob", String(repeating: "x", count: 1000))
            let two = try #require(try await kv.memoryUsage(of: "sizes"))
            #expect(two >= one + 1004, "grown by at least the new key's 1,004 bytes: \(one) → \(two)")
            try await kv.delete("sizes", "blob")
            #expect(try await kv.memoryUsage(of: "sizes") == one, "back to the one key's figure")
            try await kv.delete("sizes", "theme")
            #expect(try await kv.memoryUsage(of: "sizes") == nil)
        }
    }

    @Test("actorkv memory prints what memoryUsage(of:) answers, exit 0; nothing and exit 1 for a namespace with no key; 2 for a usage error",
          .localOnly("an agent refuses MEMORY USAGE (refusedByAnAgent)"))
    func cli() async throws {
        try await withServer { server, kv in
            try await kv.put("sizes", "a", "1")
            let expected = try #require(try await kv.memoryUsage(of: "sizes"))
            let printed = try await runCLI(["memory", "sizes"], socket: server.socketPath)
            #expect(printed.status == 0 && printed.text == "\(expected)\n" && printed.stderr.isEmpty, "\(printed)")
            let missing = try await runCLI(["memory", "nosuch"], socket: server.socketPath)
            #expect(missing.status == 1 && missing.text.isEmpty && missing.stderr.isEmpty, "\(missing)")
            let usage = try await runCLI(["memory", "a", "b"], socket: server.socketPath)
            #expect(usage.status == 2 && usage.stderr.contains("usage: actorkv memory NS"), "\(usage.stderr)")
        }
    }

    @Test("an agent of an etcd cluster refuses MEMORY USAGE: the client throws its error, actorkv memory exits 3",
          .enabled(if: ClusterTarget.active, "cluster mode only"))
    func refusedByAnAgent() async throws {
        try await withServer { server, kv in
            try await kv.put("sizes", "a", "1")
            try await expectRefusedByAnAgent("MEMORY USAGE") { () async throws(ActorKVError) in _ = try await kv.memoryUsage(of: "sizes") }
            let refused = try await runCLI(["memory", "sizes"], socket: server.socketPath)
            #expect(refused.status == 3 && refused.stderr.contains("not available in cluster mode"), "\(refused)")
        }
    }
}
