import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// `actorkv backup DIR` and ``ActorKVClient/backup(to:)``: a relative path is the caller's, the
/// copy is served by another server as it is; an agent of an etcd cluster refuses.
@Suite("Backups from the clients")
struct BackupClientTests {
    @Test("actorkv backup takes a path relative to its own working directory, prints it absolute, and the copy serves what was there; a second backup to it is exit 3",
          .localOnly("an agent keeps no data directory: BACKUP is refused (backupRefusedByAnAgent)"))
    func cliBackup() async throws {
        // The backup goes where a second server finds its data directory: `copyDirectory.data`.
        let copyDirectory = TemporaryDirectory("bk-cli")
        var version: UInt64 = 0
        try await withServer { server, kv in
            try await kv.put("config", "theme", "dark")
            version = try #require(try await kv.getVersioned("config", "theme")).version
            // actorkv run from `copyDirectory`, through sh, for its working directory.
            let cli = try builtBinary("actorkv", environment: "ACTORKV_CLI")
            let r = try await runCLI(["-c", "cd '\(copyDirectory.path)' && exec '\(cli)' --socket '\(server.socketPath)' backup data"],
                                     socket: nil, executable: "/bin/sh")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.text == copyDirectory.data + "\n")
            try await kv.put("config", "theme", "light")
            let again = try await runCLI(["backup", copyDirectory.data], socket: server.socketPath)
            #expect(again.status == 3 && again.stderr.hasPrefix("ERR ") && again.stderr.contains("exists already"), "\(again.stderr)")
            let usage = try await runCLI(["backup"], socket: server.socketPath)
            #expect(usage.status == 2 && usage.stderr.contains("usage: actorkv backup DIR"), "\(usage.stderr)")
        }
        let copy = try await ServerProcess.started(directory: copyDirectory)
        defer { copy.stop() }
        let kv = ActorKVClient(socketPath: copy.socketPath)
        let found = try #require(try await kv.getVersioned("config", "theme"))
        #expect(found.value == Array("dark".utf8) && found.version == version)
        await kv.close()
    }

    @Test("an agent of an etcd cluster refuses BACKUP, pointing to etcdctl; nothing is written",
          .enabled(if: ClusterTarget.active, "cluster mode only (the local engine's backups: cliBackup)"))
    func backupRefusedByAnAgent() async throws {
        let work = TemporaryDirectory("bk-agent")
        try await withServer { server, kv in
            do throws(ActorKVError) {
                try await kv.backup(to: work.path + "/copy")
                Issue.record("BACKUP ran on an agent")
            } catch {
                guard case .server(let code, let message) = error else { throw error }
                #expect(code == "ERR" && message.contains("etcdctl snapshot save"), "\(message)")
            }
            #expect(!FileManager.default.fileExists(atPath: work.path + "/copy"))
            #expect(try await kv.ping() == "PONG")
        }
    }
}
