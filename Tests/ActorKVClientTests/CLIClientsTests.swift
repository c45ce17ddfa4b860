import ActorKVClient
import ActorKVTestSupport
import Foundation
import Testing

/// `actorkv clients` and `actorkv kill-client ID` (CLIENT LIST, CLIENT KILL ID) and the Swift
/// client's ``ActorKVClient/clientList()`` and ``ActorKVClient/killClient(_:)``.
@Suite("Connections from the command line")
struct CLIClientsTests {
    @Test("actorkv clients lists the lock holder's connection; kill-client closes it, which releases its lock; a missing id is exit 1, a bad one exit 2")
    func killReleasesALock() async throws {
        try await withServer { server, kv in
            let holder = ActorKVClient(socketPath: server.socketPath)
            defer { Task { await holder.close() } }
            #expect(try await holder.send(["PUT", "locks", "job-7", "me", "IFVERSION", "0", "EPHEMERAL"]) != .null)
            guard case .integer(let id) = try await holder.send(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
            let listed = try await runCLI(["clients"], socket: server.socketPath)
            #expect(listed.status == 0 && listed.text.split(separator: "\n").contains { $0.hasPrefix("id=\(id) ") }, "\(listed.text)")
            #expect(try await kv.clientList().split(separator: "\n").contains { $0.hasPrefix("id=\(id) ") && $0.contains(" flags=U ") })

            let killed = try await runCLI(["kill-client", String(id)], socket: server.socketPath)
            #expect(killed.status == 0 && killed.text == "1\n", "\(killed.status) \(killed.text) \(killed.stderr)")
            var left: String? = "me"
            for _ in 0..<300 {
                left = try await kv.getString("locks", "job-7")
                if left == nil { break }
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            #expect(left == nil, "the killed holder's lock is released")
            #expect(try await kv.killClient(UInt64(id)) == false, "gone already")
            let missing = try await runCLI(["kill-client", String(id)], socket: server.socketPath)
            #expect(missing.status == 1 && missing.text == "0\n")
            let bad = try await runCLI(["kill-client", "x"], socket: server.socketPath)
            #expect(bad.status == 2 && bad.stderr.contains("usage: actorkv kill-client ID"), "\(bad.stderr)")
        }
    }
}
