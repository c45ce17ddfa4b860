import ActorKVClient
import ActorKVTestSupport
import Foundation
import Testing

/// `actorkv unlink NS...` and the Swift client's ``ActorKVClient/removeNamespaces(_:)`` (UNLINK),
/// locally and through an etcd agent.
@Suite("Removing namespaces from the command line")
struct CLIUnlinkTests {
    @Test("actorkv unlink prints how many namespaces existed and removes them; a version of the earlier life guards nothing; no name is exit 2")
    func unlinkRemoves() async throws {
        try await withServer { server, kv in
            try await kv.put("u1", "k", "v")
            try await kv.put("u2", "k", "v")
            let version = try #require(try await kv.getVersioned("u1", "k")).version
            let removed = try await runCLI(["unlink", "u1", "u2", "u3"], socket: server.socketPath)
            #expect(removed.status == 0 && removed.text == "2\n", "\(removed.status) \(removed.text) \(removed.stderr)")
            #expect(try await !kv.namespaces().contains("u1"))
            #expect(try await kv.getString("u1", "k") == nil)
            #expect(try await kv.put("u1", "k", "again", ifVersion: version) == nil, "the earlier life's version guards nothing")
            let again = try #require(try await kv.put("u1", "k", "again", ifVersion: 0))
            #expect(again > version)
            #expect(try await kv.removeNamespace("u1"))
            #expect(try await kv.removeNamespaces(["u1", "u2"]) == 0)
            let none = try await runCLI(["unlink"], socket: server.socketPath)
            #expect(none.status == 2 && none.stderr.contains("usage: actorkv unlink NS..."), "\(none.stderr)")
        }
    }
}
