import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// `actorkv changes` as a child process against a real server: its lines as writes happen
/// (read while it runs, so unflushed output would fail), resuming across a kill -9, and its
/// exits on bad arguments, COMPACTED and no server.
@Suite("actorkv changes")
struct CLIChangesTests {
    @Test("--snapshot prints the snapshot, then each change's lines as it is written (flushed): deletes as \\N, escapes as scan",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func linesAsWritten() async throws {
        try await withServer { server, kv in
            try await kv.put("config", "a", "1")                                       // 1
            try await kv.put("config", "b", "x\ty")                                    // 2
            let cli = try FollowingCLI(["changes", "config", "--snapshot"], socket: server.socketPath)
            defer { cli.kill() }
            #expect(try await cli.nextLine() == "2\ta\t1")
            #expect(try await cli.nextLine() == "2\tb\tx\\ty")
            // Each write's lines are read before the next write is made.
            try await kv.put("config", "c", "3")                                       // 3
            #expect(try await cli.nextLine() == "3\tc\t3")
            _ = try await kv.batch("config", [.delete("a"), .put("d", "two\nlines")])  // 4
            #expect(try await cli.nextLine() == "4\ta\t\\N")
            #expect(try await cli.nextLine() == "4\td\ttwo\\nlines")
            #expect(try await kv.delete("config", "c"))                                // 5
            #expect(try await cli.nextLine() == "5\tc\t\\N")
            try await kv.put("config", "e", "\\N")                                     // 6: a value that is backslash N
            #expect(try await cli.nextLine() == "6\te\t\\\\N")
            let (rest, errors) = cli.stop()
            #expect(rest.isEmpty, "nothing more: \(rest)")
            #expect(errors.isEmpty, "\(errors)")
        }
    }

    @Test("--from 0 of a namespace made after another was removed prints its whole history, numbered after the removal",
          .localOnly("checks the local engine's sequence numbers; an agent's sequences are etcd revisions (protocol.md, Cluster mode)"))
    func fromZeroAfterARemoval() async throws {
        try await withServer { server, kv in
            try await kv.put("old", "k", "v")                                          // 1
            #expect(try await kv.removeNamespace("old"))                               // 2
            try await kv.put("fresh", "a", "1")                                        // 3
            try await kv.put("fresh", "b", "2")                                        // 4
            let cli = try FollowingCLI(["changes", "--from", "0", "fresh"], socket: server.socketPath)
            defer { cli.kill() }
            #expect(try await cli.nextLine() == "3\ta\t1")
            #expect(try await cli.nextLine() == "4\tb\t2")
            let (rest, errors) = cli.stop()
            #expect(rest.isEmpty && errors.isEmpty, "\(rest) \(errors)")
        }
    }

    @Test("--from SEQ with a PREFIX resumes after a kill -9 and restart: the changes written meanwhile are printed, once",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func resumesAfterKill() async throws {
        try await withServer(fsync: "always") { server, kv in
            try await kv.put("jobs", "job:1", "a")                                     // 1
            try await kv.put("jobs", "other", "b")                                     // 2
            try await kv.put("jobs", "job:2", "c")                                     // 3
            // --timeout 0: it never gives up reconnecting. The server is down while another starts,
            // writes and stops, and restarts; on a loaded machine that can take longer than the
            // default 10 s, after which actorkv would exit 4 as its --help says.
            let cli = try FollowingCLI(["--timeout", "0", "changes", "--from", "1", "jobs", "job:"], socket: server.socketPath)
            defer { cli.kill() }
            #expect(try await cli.nextLine() == "3\tjob:2\tc")
            try await server.signal(SIGKILL)
            // Written while the CLI cannot reach the server (by another on the same data).
            let side = try await ServerProcess.started(arguments: ["--data-dir", server.dataPath, "--fsync", "always"])
            let other = ActorKVClient(socketPath: side.socketPath)
            try await other.put("jobs", "job:3", "d")                                  // 4
            try await other.put("jobs", "elsewhere", "e")                              // 5
            await other.close()
            try await side.signal(SIGTERM)
            try await server.restart()
            await kv.close()
            try await kv.put("jobs", "job:1", "f")                                     // 6
            #expect(try await cli.nextLine() == "4\tjob:3\td")
            #expect(try await cli.nextLine() == "6\tjob:1\tf")
            let (rest, _) = cli.stop()
            #expect(rest.isEmpty, "nothing more: \(rest)")
        }
    }

    @Test("a snapshot cut short by a kill -9 is taken again, printing only what changed: no line twice; a key printed from the first that is gone gets a deleted line",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func snapshotCutShort() async throws {
        // A small output limit, so that the snapshot stays mostly on the server while the CLI,
        // whose standard output is not read, is blocked.
        try await withServer(fsync: "always", arguments: ["--max-output-bytes", "65536"]) { server, kv in
            let value = String(repeating: "v", count: 100)
            for batch in 0..<50 {
                _ = try await kv.batch("big", (0..<1000).map { .put(String(format: "k%05d", batch * 1000 + $0), value) })
            }
            let cli = try FollowingCLI(["--timeout", "0", "changes", "big", "--snapshot"], socket: server.socketPath)
            defer { cli.kill() }
            #expect(try await cli.nextLine() == "50\tk00000\t\(value)")
            try await Task.sleep(for: .milliseconds(200))  // it prints until its output pipe is full, and blocks
            try await server.signal(SIGKILL)
            let side = try await ServerProcess.started(arguments: ["--data-dir", server.dataPath, "--fsync", "always"])
            let other = ActorKVClient(socketPath: side.socketPath)
            #expect(try await other.delete("big", "k00000"))                           // 51
            try await other.put("big", "k00001", "changed")                            // 52
            await other.close()
            try await side.signal(SIGTERM)
            try await server.restart()
            var firstKeys: Set<String> = ["k00000"], secondKeys: Set<String> = [], printedAgain: [String] = []
            while true {
                let fields = try await cli.nextLine().split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
                try #require(fields.count == 3, "\(fields)")
                if fields[0] == "50" {
                    #expect(secondKeys.isEmpty, "the first snapshot's lines come before the second's")
                    #expect(fields[2] == value && firstKeys.insert(fields[1]).inserted, "\(fields)")
                } else if fields == ["52", "k00000", "\\N"] {
                    break
                } else {
                    #expect(fields[0] == "52" && secondKeys.insert(fields[1]).inserted, "\(fields)")
                    #expect(fields[2] == (fields[1] == "k00001" ? "changed" : value), "\(fields)")
                    if fields[1] != "k00001" && firstKeys.contains(fields[1]) { printedAgain.append(fields[1]) }
                }
            }
            #expect(printedAgain.isEmpty, "printed again unchanged: \(printedAgain.count) keys, from \(printedAgain.first ?? "")")
            #expect(firstKeys.count < 50_000, "the first snapshot was cut short (\(firstKeys.count) lines)")
            #expect(secondKeys.contains("k00001"), "the key changed meanwhile is printed with its new value")
            #expect(firstKeys.union(secondKeys).count == 50_000, "every key printed: \(firstKeys.count) + \(secondKeys.count)")
            let (rest, _) = cli.stop()
            #expect(rest.isEmpty)
        }
    }

    @Test("once its reader has gone (`| head -n 1`), it ends by SIGPIPE without waiting for another change to write")
    func endsWhenReaderLeaves() async throws {
        try await withServer { server, kv in
            try await kv.put("config", "theme", "dark")
            let cli = try FollowingCLI(["changes", "config", "--snapshot"], socket: server.socketPath)
            defer { cli.kill() }
            #expect(try await cli.nextLine().hasSuffix("\ttheme\tdark"))
            // As head does after its line. Nothing is written after this, so no write of the
            // CLI's can fail: only its noticing the reader's leaving can end it.
            cli.process.closeOutput()
            for _ in 0..<3000 where cli.process.isRunning { try await Task.sleep(for: .milliseconds(10)) }
            #expect(cli.process.termination == .signalled(SIGPIPE), "\(String(describing: cli.process.termination))")
        }
    }

    @Test("bad arguments exit 2 with a message; COMPACTED exits 6; a FROM after the last sequence 3; no server 4; --help",
          .localOnly("COMPACT compacts the whole etcd cluster's history, under the tests running beside it (protocol.md, Cluster mode)"))
    func exits() async throws {
        try await withServer(arguments: ["--changes-history", "1"]) { server, kv in
            let s = server.socketPath
            for arguments in [["changes"], ["changes", "ns", "p", "extra"], ["changes", "--from", "abc", "ns"],
                              ["changes", "ns", "--from", "-1"], ["changes", "ns", "--from"], ["changes", "--from=1.5", "ns"],
                              ["changes", "ns", "--from", "1", "--snapshot"], ["changes", "ns", "--snapshot", "--snapshot"],
                              ["changes", "ns", "--bogus"]] {
                let r = try await runCLI(arguments, socket: s, killAfter: 20)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
                #expect(r.stderr.hasPrefix("actorkv: "), "\(arguments): \(r.stderr)")
                #expect(r.stdout.isEmpty)
            }
            var r = try await runCLI(["changes", "--from", "abc", "ns"], socket: s, killAfter: 20)
            #expect(r.stderr.contains("--from needs a sequence number (an integer from 0 up), not 'abc'"))

            try await writeAndCompactTwice(kv, "old")
            r = try await runCLI(["changes", "old", "--from", "0"], socket: s, killAfter: 20)
            #expect(r.status == 6, "\(r.status) \(r.stderr)")
            #expect(r.stderr.contains("COMPACTED") && r.stderr.contains("oldest available sequence is 4"), "\(r.stderr)")
            #expect(r.stdout.isEmpty)

            r = try await runCLI(["changes", "old", "--from=99"], socket: s, killAfter: 20)
            #expect(r.status == 3 && r.stderr.hasPrefix("ERR FROM sequence 99 is after the last sequence"), "\(r.status) \(r.stderr)")

            r = try await runCLI(["changes", "old"], socket: TemporaryDirectory("chg").path + "/none.sock", killAfter: 20)
            #expect(r.status == 4 && r.stderr.contains("cannot connect"), "\(r.status) \(r.stderr)")

            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("changes [--from SEQ | --snapshot] [--] NS [PREFIX]") && r.text.contains("\n  6  changes"))
        }
    }
}

/// A running `actorkv changes`, whose standard output is read line by line as it comes.
final class FollowingCLI {
    let process: ChildProcess
    private var buffered: [UInt8] = []

    /// Starts `actorkv --socket socket arguments...`.
    init(_ arguments: [String], socket: String) throws {
        process = try ChildProcess(try builtBinary("actorkv", environment: "ACTORKV_CLI"), ["--socket", socket] + arguments,
                                   stdout: .pipe, stderr: .pipe)
        _ = fcntl(process.stdoutFD, F_SETFL, fcntl(process.stdoutFD, F_GETFL) | O_NONBLOCK)
    }

    /// The next line of its standard output, without the newline. Throws if none comes within
    /// `seconds`, or it exits first.
    func nextLine(within seconds: Double = 20) async throws -> String {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if let newline = buffered.firstIndex(of: 0x0A) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeSubrange(...newline)
                return line
            }
            let n = chunk.withUnsafeMutableBytes { read(process.stdoutFD, $0.baseAddress, $0.count) }
            if n > 0 {
                buffered += chunk[0..<n]
                continue
            }
            if n == 0 {
                let (_, errors) = stop()
                throw TestFailure("actorkv changes ended (\(String(describing: process.termination))): \(errors)")
            }
            guard errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else {
                throw TestFailure("read: \(String(cString: strerror(errno)))")
            }
            if ContinuousClock.now > deadline {
                throw TestFailure("no line from actorkv changes within \(seconds) s; so far: \(String(decoding: buffered, as: UTF8.self))")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Stops it (SIGTERM) and returns the rest of its standard output and its standard error.
    func stop() -> (rest: String, errors: String) {
        process.signal(SIGTERM)
        process.waitForExit()
        let (out, err) = process.readOutputs()
        return (String(decoding: buffered + out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }

    /// Kills it if it still runs (for `defer`).
    func kill() {
        process.signal(SIGKILL)
    }
}
