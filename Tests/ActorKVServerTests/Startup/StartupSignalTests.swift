import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A shutdown signal that comes while `actorkvd` is still starting.
@Suite struct StartupSignalTests {
    /// Records written before the server starts: replaying them keeps the namespaces opening for
    /// about a second and a half in a debug build (longer under a sanitizer), far longer than a
    /// signal takes to arrive once the server says it is starting.
    static let records = 200_000

    /// SIGTERM while a large log is replayed: the server does not start serving. It closes every
    /// namespace it opened (fsync'd), says so, exits 0 and leaves no socket; started again, it
    /// has every key.
    @Test func sigtermWhileTheNamespacesOpenEndsTheStartupCleanly() async throws {
        let dir = TemporaryDirectory("startsig")
        defer { dir.remove() }
        let store = try Store(directory: dir.data)
        let namespace = try await store.namespace("big")
        for run in 0..<Self.records / 1000 {
            let puts = (0..<1000).map { i in Operation.put(key: Array("k\(run)-\(i)".utf8)[...], value: Array("v".utf8)[...]) }
            let execution = await namespace.execute(puts)
            #expect(execution.outcomes.allSatisfy { if case .stored = $0 { true } else { false } })
        }
        await store.close()

        let socket = dir.path + "/s.sock", logPath = dir.path + "/startup.log"
        let server = try ChildProcess(try ServerProcess.executable(), ["--socket", socket, "--data-dir", dir.data],
                                      stderr: .file(logPath))
        func log() -> String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }
        // "starting" is logged once the signal handlers are in place, before the namespaces open.
        for _ in 0..<7500 where !log().contains("actorkvd starting") && server.isRunning { usleep(2_000) }
        #expect(log().contains("actorkvd starting"), "\(log())")
        server.signal(SIGTERM)
        #expect(server.status == 0, "\(log())")
        let text = log()
        #expect(text.contains("shut down cleanly during startup (signal \(SIGTERM)); every namespace fsync'd"), "\(text)")
        #expect(!text.contains("ready:"), "it must not have started serving: \(text)")
        #expect(!FileManager.default.fileExists(atPath: socket), "no socket bound")

        let again = try await ServerProcess.started(directory: dir)
        defer { again.stop() }
        let c = try RawConnection(path: again.socketPath)
        #expect(try c.command(["COUNT", "big"]) == .integer(Int64(Self.records)))
        #expect(try c.command(["GET", "big", "k199-999"]) == .bulk(Array("v".utf8)))
    }
}
