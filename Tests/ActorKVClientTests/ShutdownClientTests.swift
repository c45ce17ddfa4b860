import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// `SHUTDOWN` from ActorKV's own clients: the Swift client's `shutdown()` and `actorkv shutdown`
/// return once the server (or agent, in cluster mode) has shut down.
@Suite("SHUTDOWN from the Swift client and the command line")
struct ShutdownClientTests {
    @Test("shutdown() returns once the server has shut down: its socket gone, its exit 0; the next call cannot connect")
    func swiftClientShutdown() async throws {
        try await withServer { server, kv in
            try await kv.put("cfg", "theme", "dark")
            try await kv.shutdown()
            #expect(!FileManager.default.fileExists(atPath: server.socketPath), "the socket is gone when shutdown() returns")
            #expect(server.process.status == 0, "\(server.log)")
            #expect(server.log.contains("shut down cleanly (SHUTDOWN from connection "), "\(server.log)")
            do throws(ActorKVError) {
                try await kv.shutdown()
                Issue.record("a second shutdown() with no server succeeded")
            } catch {
                guard case .cannotConnect = error else { throw error }
            }
        }
    }

    @Test("shutdown() on a connection the server closed meanwhile (it was restarted) asks the server now there, as any call would")
    func shutdownAfterARestart() async throws {
        try await withServer { server, kv in
            try await kv.put("cfg", "theme", "dark")
            try await server.signal(SIGTERM)
            try await server.restart()
            try await kv.shutdown()
            #expect(!FileManager.default.fileExists(atPath: server.socketPath))
            #expect(server.process.status == 0, "\(server.log)")
        }
    }

    @Test("actorkv shutdown: exit 0 with nothing printed once the server has shut down; an operand is a usage error (exit 2)")
    func commandLineShutdown() async throws {
        try await withServer { server, _ in
            var r = try await runCLI(["shutdown", "now"], socket: server.socketPath)
            #expect(r.status == 2 && r.stderr.hasPrefix("actorkv: usage: actorkv shutdown"), "\(r.stderr)")
            #expect(server.process.isRunning)
            r = try await runCLI(["shutdown"], socket: server.socketPath)
            #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(r.status) \(r.stderr)")
            #expect(!FileManager.default.fileExists(atPath: server.socketPath), "the socket is gone when actorkv returns")
            #expect(server.process.status == 0, "\(server.log)")
            r = try await runCLI(["shutdown"], socket: server.socketPath)
            #expect(r.status == 4 && r.stderr.contains("cannot connect"), "\(r.status) \(r.stderr)")
        }
    }
}
