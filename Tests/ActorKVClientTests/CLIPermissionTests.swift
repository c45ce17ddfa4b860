import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// `actorkv` against a server with `--acl` that runs as another user (see ``withNobodyServer``):
/// a command refused with `NOPERM` exits 8; a connection refused on accept still exits 4.
@Suite("actorkv and NOPERM (exit 8)", .enabled(if: ServerUser.canRunServers, "\(permissionTestsNeed)"))
struct CLIPermissionTests {
    @Test("a command without its right exits 8 with the server's error on standard error; other errors keep their codes")
    func commandDenied() async throws {
        try await withNobodyServer(rules: PermissionClientTests.rules) { server, kv, _ in
            let s = server.socketPath
            var r = try await runCLI(["put", "readable", "k", "v"], socket: s)
            #expect(r.status == 8, "\(r.status) \(r.stderr)")
            #expect(r.stderr == "NOPERM no write permission on namespace 'readable' for uid 0\n")
            #expect(r.stdout.isEmpty)
            #expect(try await kv.get("readable", "k") == nil, "nothing applied")

            r = try await runCLI(["get", "other", "k"], socket: s)
            #expect(r.status == 8 && r.stderr == "NOPERM no read permission on namespace 'other' for uid 0\n", "\(r.status) \(r.stderr)")
            r = try await runCLI(["batch", "readable", "put", "a", "1", "del", "b"], socket: s)
            #expect(r.status == 8 && r.stderr.hasPrefix("NOPERM no write permission"), "\(r.status) \(r.stderr)")
            r = try await runCLI(["compact", "writable"], socket: s)
            #expect(r.status == 8 && r.stderr.hasPrefix("NOPERM no admin permission"), "\(r.status) \(r.stderr)")
            r = try await runCLI(["scan", "other"], socket: s)
            #expect(r.status == 8 && r.stdout.isEmpty, "\(r.status) \(r.stderr)")

            // With the right: as ever; another server error is still 3.
            r = try await runCLI(["put", "writable", "k", "v"], socket: s)
            #expect(r.status == 0, "\(r.stderr)")
            r = try await runCLI(["get", "a/b", "k"], socket: s)
            #expect(r.status == 3 && r.stderr.hasPrefix("BADNS "), "\(r.status) \(r.stderr)")
        }
    }

    @Test("lock on a namespace without the write right exits 8 without running COMMAND")
    func lockDenied() async throws {
        try await withNobodyServer(rules: PermissionClientTests.rules) { server, _, _ in
            let marker = server.directory.path + "/ran"
            let r = try await runCLI(["lock", "readable", "job", "/bin/sh", "-c", "touch \(marker)"], socket: server.socketPath,
                                     killAfter: 30)
            #expect(r.status == 8, "\(r.status) \(r.stderr)")
            #expect(r.stderr == "NOPERM no write permission on namespace 'readable' for uid 0\n")
            #expect(!FileManager.default.fileExists(atPath: marker), "COMMAND did not run")
        }
    }

    @Test("changes exits 8 when it may not read NS: refused at once, or cut off by a reload (SIGHUP) after the lines before it")
    func changesDenied() async throws {
        try await withNobodyServer(rules: PermissionClientTests.rules + "uid:0 feed read write\n") { server, kv, aclPath in
            let s = server.socketPath
            // Reconnecting for ever (--timeout 0) would be killed after 30 s: status 9.
            let r = try await runCLI(["--timeout", "0", "changes", "other"], socket: s, killAfter: 30)
            #expect(r.status == 8, "\(r.status) \(r.stderr)")
            #expect(r.stderr == "NOPERM no read permission on namespace 'other' for uid 0\n")

            try await kv.put("feed", "k", "1")
            let cli = try FollowingCLI(["--timeout", "0", "changes", "--from", "0", "feed"], socket: s)
            defer { cli.kill() }
            #expect(try await cli.nextLine() == "1\tk\t1")
            try await reloadRules(PermissionClientTests.rules, at: aclPath, of: server)
            for _ in 0..<3000 where cli.process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
            #expect(!cli.process.isRunning, "actorkv changes still runs 30 s after the reload")
            let (rest, errors) = cli.stop()
            #expect(cli.process.termination == .exited(8), "\(String(describing: cli.process.termination)) \(errors)")
            #expect(errors == "NOPERM no read permission on namespace 'feed' for uid 0\n")
            #expect(rest.isEmpty, "\(rest)")
        }
    }

    @Test("a connection refused on accept (--allow-uid) is still exit 4 'cannot connect'; --help lists exit 8")
    func refusedOnAccept() async throws {
        try await withNobodyServer(rules: PermissionClientTests.rules, arguments: ["--allow-uid", "4242"]) { server, _, _ in
            for arguments in [["get", "readable", "k"], ["changes", "readable"]] {
                let r = try await runCLI(arguments, socket: server.socketPath, killAfter: 30)
                #expect(r.status == 4, "\(arguments): \(r.status) \(r.stderr)")
                #expect(r.stderr == "actorkv: cannot connect to \(server.socketPath): the server refused the connection: "
                            + "NOPERM connection refused: uid 0 gid 0 is not allowed to connect\n", "\(r.stderr)")
            }
        }
        let r = try await runCLI(["--help"], socket: nil)
        #expect(r.text.contains("\n  8  the server denied a right this command needs on its namespace (NOPERM"))
    }
}
