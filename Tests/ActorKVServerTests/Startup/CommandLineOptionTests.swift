import ActorKVServer
import ActorKVTestSupport
import Foundation
import Testing

/// `actorkvd`'s options that parse as numbers but cannot mean what they say are usage errors
/// (exit 2, with the message and a pointer to `--help`), as every other bad option is.
@Suite("actorkvd command line: options that cannot work are refused")
struct CommandLineOptionTests {
    /// The usage error `arguments` give, or nil if they parse.
    static func usageError(_ arguments: [String]) -> String? {
        do {
            _ = try ServerConfiguration.parse(arguments)
            return nil
        } catch {
            return error.description
        }
    }

    @Test("--socket-mode without a write bit (0: nobody could connect), an empty --allow-uid/--allow-gid item, and id 4294967295 ((uid_t)-1, (gid_t)-1) are refused",
          arguments: [
            (["--socket-mode", "0"], "--socket-mode 0 lets no one connect, not even the server's own user"),
            (["--socket-mode", "444"], "--socket-mode 444 lets no one connect"),
            (["--allow-uid", "1,,2"], "--allow-uid has an empty item in '1,,2'"),
            (["--allow-uid", "1,"], "--allow-uid has an empty item in '1,'"),
            (["--allow-gid", ",4"], "--allow-gid has an empty item in ',4'"),
            (["--allow-gid", "4294967295"], "--allow-gid 4294967295 is (gid_t)-1, which means no group"),
            (["--allow-uid", "5,4294967295"], "--allow-uid 4294967295 is (uid_t)-1, which means no user"),
            (["--allow-uid", ""], "--allow-uid needs at least one id"),
            (["--max-bulk-bytes", "1000", "--max-value-bytes", "1001"], "--max-value-bytes 1001 is more than --max-bulk-bytes 1000"),
            (["--max-value-bytes", "70000000"], "--max-value-bytes 70000000 is more than --max-bulk-bytes 67108864"),
            (["--etcd-prefix", "x/"], "--etcd-prefix is for cluster mode and needs --etcd"),
            (["--ephemeral-ttl", "5", "--data-dir", "d"], "--ephemeral-ttl is for cluster mode and needs --etcd"),
            (["--check", "--etcd", "http://127.0.0.1:2379"], "--check reads a local data directory; with --etcd there is none"),
          ])
    func refused(arguments: [String], message: String) {
        let error = Self.usageError(arguments)
        #expect(error?.hasPrefix(message) == true, "\(arguments): \(error ?? "accepted")")
    }

    @Test("the modes and ids that can work still parse")
    func accepted() throws {
        for arguments in [["--socket-mode", "600"], ["--socket-mode", "200"], ["--socket-mode", "020"],
                          ["--allow-uid", "0,1000"], ["--allow-gid", "4294967294"]] {
            #expect(Self.usageError(arguments) == nil, "\(arguments)")
        }
        guard case .run(let configuration) = try ServerConfiguration.parse(["--allow-gid", "4294967294,7", "--socket-mode", "660"]) else {
            throw TestFailure("did not parse to a configuration")
        }
        #expect(configuration.allowGIDs == [4_294_967_294, 7])
        #expect(configuration.socketMode == 0o660)
        // A bulk limit under the default value limit lowers it: a value too long stays -TOOBIG.
        guard case .run(let lowered) = try ServerConfiguration.parse(["--max-bulk-bytes", "65536"]),
              case .run(let equal) = try ServerConfiguration.parse(["--max-bulk-bytes", "1000", "--max-value-bytes", "1000"]) else {
            throw TestFailure("did not parse to a configuration")
        }
        #expect(lowered.maxValueBytes == 65536 && equal.maxValueBytes == 1000)
        // Local data's flags with --etcd start, noted for the start's warning; none without --etcd.
        guard case .run(let agent) = try ServerConfiguration.parse(["--data-dir", "d", "--etcd", "http://127.0.0.1:2379", "--fsync", "always", "--max-clients", "9"]),
              case .run(let local) = try ServerConfiguration.parse(["--data-dir", "d", "--fsync", "always"]) else {
            throw TestFailure("did not parse to a configuration")
        }
        #expect(agent.ignoredLocalFlags == ["--data-dir", "--fsync"] && local.ignoredLocalFlags.isEmpty)
    }

    @Test("actorkvd exits 2 on each, with the message and the pointer to --help, as on any bad option")
    func exitStatus() async throws {
        let executable = try ServerProcess.executable()
        let directory = TemporaryDirectory("options")
        defer { directory.remove() }
        for arguments in [["--socket-mode", "0"], ["--allow-uid", "1,,2"], ["--allow-gid", "4294967295"]] {
            let (status, stderr) = try await onOwnThread {
                // A server that accepts the option serves here, and is killed rather than waited for.
                let process = try ChildProcess(executable, arguments + ["--socket", directory.path + "/s.sock", "--data-dir", directory.data],
                                               stderr: .pipe)
                DispatchQueue.global().asyncAfter(deadline: .now() + 30) { process.signal(SIGKILL) }
                let (_, err) = process.readOutputs()
                return (process.status, String(decoding: err, as: UTF8.self))
            }
            #expect(status == 2, "\(arguments): \(stderr)")
            #expect(stderr.hasPrefix("actorkvd: \(arguments[0])") && stderr.contains("Run 'actorkvd --help' for usage."),
                    "\(arguments): \(stderr)")
        }
    }
}
