import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// What one run of the `actorkv` binary produced.
struct CLIResult {
    var status: Int32
    var stdout: [UInt8]
    var stderr: String
    var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs the built `actorkv` with `arguments`, feeding `input` on standard input. A run that
/// takes more than `killAfter` seconds is killed (its status is then SIGKILL's number, 9), so a
/// CLI that hangs fails its test instead of hanging it. The run is waited for on a thread of its
/// own (`onOwnThread`), not on the cooperative pool. `executable`: another program to run with
/// `arguments` (a shell that runs `actorkv` itself).
func runCLI(_ arguments: [String], socket: String?, input: [UInt8] = [],
            environment: [String: String] = [:], stdout: ChildProcess.Stream = .pipe,
            killAfter: Double = 60, executable: String? = nil) async throws -> CLIResult {
    try await onOwnThread {
        var env = ProcessInfo.processInfo.environment
        env["ACTORKV_SOCKET"] = nil
        for (name, value) in environment { env[name] = value }
        let process = try ChildProcess(try executable ?? builtBinary("actorkv", environment: "ACTORKV_CLI"),
                                       (socket.map { ["--socket", $0] } ?? []) + arguments,
                                       environment: env, stdin: .pipe, stdout: stdout, stderr: .pipe)
        DispatchQueue.global().asyncAfter(deadline: .now() + killAfter) { process.signal(SIGKILL) }
        process.writeInput(input)
        process.closeInput()
        let (out, err) = process.readOutputs()
        return CLIResult(status: process.status, stdout: out, stderr: String(decoding: err, as: UTF8.self))
    }
}

@Suite("actorkv command-line client")
struct CLITests {
    @Test("get/put/del/exists/count/batch/ping/namespaces/info/compact, exit codes 0 1 2 3",
          .localOnly("COMPACT compacts the whole etcd cluster's history, under the tests running beside it (protocol.md, Cluster mode)"))
    func commands() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            var r = try await runCLI(["put", "config", "theme", "dark"], socket: s)
            #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty)
            r = try await runCLI(["get", "config", "theme"], socket: s)
            #expect(r.status == 0)
            #expect(r.stdout == Array("dark".utf8))  // exact bytes: no newline added
            #expect(try await kv.getString("config", "theme") == "dark")

            // Missing key: exit 1, nothing printed.
            r = try await runCLI(["get", "config", "missing"], socket: s)
            #expect(r.status == 1 && r.stdout.isEmpty)

            // The socket can come from $ACTORKV_SOCKET.
            r = try await runCLI(["get", "config", "theme"], socket: nil, environment: ["ACTORKV_SOCKET": s])
            #expect(r.status == 0 && r.text == "dark")

            try await kv.put("config", "a", "1")
            try await kv.put("config", "b", "2")
            r = try await runCLI(["del", "config", "a", "b", "zz"], socket: s)
            #expect(r.status == 0 && r.text == "2\n")
            r = try await runCLI(["exists", "config", "theme"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")
            r = try await runCLI(["exists", "config", "theme", "a"], socket: s)
            #expect(r.status == 1 && r.text == "1\n")
            r = try await runCLI(["count", "config"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")

            r = try await runCLI(["batch", "config", "put", "k1", "v1", "del", "theme", "DEL", "nope"], socket: s)
            #expect(r.status == 0 && r.text == "OK\n1\n0\n")
            #expect(try await kv.getString("config", "k1") == "v1")

            r = try await runCLI(["ping"], socket: s)
            #expect(r.status == 0 && r.text == "PONG\n")
            r = try await runCLI(["namespaces"], socket: s)
            #expect(r.status == 0 && r.text.split(separator: "\n").contains("config"))
            r = try await runCLI(["info"], socket: s)
            #expect(r.status == 0 && r.text.contains("# Server"))
            r = try await runCLI(["compact", "config"], socket: s)
            #expect(r.status == 0)

            // Server errors: exit 3, "CODE message" on stderr.
            r = try await runCLI(["get", "a/b", "k"], socket: s)
            #expect(r.status == 3)
            #expect(r.stderr.hasPrefix("BADNS "))
            r = try await runCLI(["put", "config", "", "v"], socket: s)
            #expect(r.status == 3 && r.stderr.hasPrefix("BADKEY "))

            // Usage errors: exit 2.
            for arguments in [[], ["frobnicate"], ["get", "config"], ["put", "ns", "k"], ["--bogus", "ping"],
                              ["batch", "ns", "put", "k"], ["batch", "ns", "swap", "a", "b"], ["get", "--json", "a", "b"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
                #expect(!r.stderr.isEmpty)
            }
            r = try await runCLI(["--help"], socket: nil)
            #expect(r.status == 0 && r.text.contains("Exit status"))
        }
    }

    @Test("an unknown option of put or scan is a usage error, not data; --help after a command prints the usage; '--' passes both on as operands")
    func unknownOptionsAndHelp() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            try await kv.put("config", "--jsno-key", "x")
            for arguments in [["scan", "config", "--jsno"], ["scan", "--josn", "config"], ["put", "config", "k", "--bogus"]] {
                let r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2 && r.stderr.contains("unknown option '\(arguments.first { $0.hasPrefix("--") }!)'"),
                        "\(arguments): \(r.status) \(r.stderr)")
                #expect(r.stdout.isEmpty)
            }
            #expect(try await kv.getString("config", "k") == nil, "nothing stored")
            for arguments in [["count", "config", "--help"], ["ping", "--help"], ["scan", "--help"], ["put", "a", "b", "--help"],
                              ["changes", "config", "--help"], ["lock", "--help", "ns", "k", "true"],
                              ["lock", "--timeout", "1", "--help", "ns", "k", "true"]] {
                let r = try await runCLI(arguments, socket: s)
                #expect(r.status == 0 && r.text.contains("Exit status"), "\(arguments): \(r.status) \(r.stderr)")
            }
            var r = try await runCLI(["put", "config", "k", "--", "--bogus"], socket: s)
            let stored = try await kv.getString("config", "k")
            #expect(r.status == 0 && stored == "--bogus")
            r = try await runCLI(["scan", "config", "--", "--jsno"], socket: s)
            #expect(r.status == 0 && r.text == "--jsno-key\tx\n", "\(r.text)")
            // A command without options of its own reads '--' the same way: a key named --help is read after it.
            try await kv.put("config", "--help", "h")
            try await kv.put("config", "--", "dashes")
            r = try await runCLI(["get", "config", "--", "--help"], socket: s)
            #expect(r.status == 0 && r.text == "h", "\(r.status) \(r.text) \(r.stderr)")
            r = try await runCLI(["get", "config", "--jsno-key"], socket: s)
            #expect(r.status == 2 && r.stderr.contains("unknown option '--jsno-key'") && r.stdout.isEmpty, "\(r.status) \(r.stderr)")
            r = try await runCLI(["del", "config", "--", "--jsno-key"], socket: s)
            #expect(r.status == 0 && r.text == "1\n", "\(r.status) \(r.text) \(r.stderr)")
            #expect(try await kv.getString("config", "--") == "dashes", "'--' ended the options: it named no key to delete")
            r = try await runCLI(["lock", "ns", "k", "sh", "-c", "echo \"$0\"", "--help"], socket: s)
            #expect(r.status == 0 && r.text == "--help\n", "lock's COMMAND gets its own --help: \(r.text) \(r.stderr)")
            for seconds in ["0x10", "1e3", "-1", "inf", "1.2.3", "", "1000000001"] {
                r = try await runCLI(["put", "--ttl", seconds, "config", "t", "v"], socket: s)
                #expect(r.status == 2 && r.stderr.contains("--ttl needs a number of seconds"), "\(seconds): \(r.stderr)")
            }
            r = try await runCLI(["put", "--ttl", ".5", "config", "t", "v"], socket: s)
            #expect(r.status == 0, "\(r.stderr)")
            // flock(1)'s short options (and any '-x' where the namespace goes) are usage errors,
            // not a namespace '-t' made by the lock's write; after '--' such a name is taken.
            for arguments in [["lock", "-t", "1", "locks", "z", "--", "true"], ["lock", "--ttl", "5", "-n", "locks", "z", "true"],
                              ["put", "-n", "k", "v"], ["get", "-x", "k"], ["changes", "-w"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2 && r.stderr.contains("unknown option '-"), "\(arguments): \(r.status) \(r.stderr)")
            }
            #expect(try await kv.namespaces().allSatisfy { !$0.hasPrefix("-") }, "a refused '-x' made a namespace")
            r = try await runCLI(["put", "--", "-n", "k", "v"], socket: s)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try await kv.getString("-n", "k") == "v")
            r = try await runCLI(["incr", "config", "n", "-5"], socket: s)
            #expect(r.status == 0 && r.text == "-5\n", "a negative delta is no option: \(r.text) \(r.stderr)")
        }
    }

    @Test("actorkv --version prints the version actorkvd --version prints (it used to be an unknown option)")
    func version() async throws {
        let server = try await onOwnThread {
            let process = try ChildProcess(try builtBinary("actorkvd", environment: "ACTORKVD"), ["--version"], stdout: .pipe)
            let (out, _) = process.readOutputs()
            #expect(process.status == 0)
            return String(decoding: out, as: UTF8.self)
        }
        let version = try #require(server.split(separator: " ").last, "actorkvd --version: \(server)")
        #expect(server == "actorkvd \(version)")
        let r = try await runCLI(["--version"], socket: nil)
        #expect(r.status == 0 && r.text == "actorkv \(version)" && r.stderr.isEmpty, "\(r.status) \(r.text) \(r.stderr)")
    }

    @Test("getv, incr, put --if-version and batch ifversion/incr; exit 5 when a condition does not hold, nothing written")
    func versionsAndCounters() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            var r = try await runCLI(["getv", "jobs", "next"], socket: s)
            #expect(r.status == 1 && r.text == "0\n", "missing: version 0, exit 1")
            r = try await runCLI(["put", "--if-version", "0", "jobs", "next", "7"], socket: s)
            #expect(r.status == 0)
            let version = try #require(UInt64(r.text.dropLast()), "the new version: \(r.text)")
            #expect(try await kv.getVersioned("jobs", "next") == VersionedValue(value: "7".bytes, version: version))
            r = try await runCLI(["getv", "jobs", "next"], socket: s)
            #expect(r.status == 0 && r.text == "\(version)\n7", "the version line, then the exact value")
            r = try await runCLI(["put", "jobs", "next", "8", "--if-version=0"], socket: s)
            #expect(r.status == 5 && r.stdout.isEmpty && r.stderr.contains("not written"))
            #expect(try await kv.getString("jobs", "next") == "7")

            r = try await runCLI(["incr", "jobs", "hits"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")
            r = try await runCLI(["incr", "jobs", "hits", "-5"], socket: s)
            #expect(r.status == 0 && r.text == "-4\n")
            try await kv.put("jobs", "text", "abc")
            r = try await runCLI(["incr", "jobs", "text"], socket: s)
            #expect(r.status == 3 && r.stderr.hasPrefix("ERR value is not an integer"))

            r = try await runCLI(["batch", "jobs", "ifversion", "next", String(version), "put", "next", "9", "incr", "hits", "10"], socket: s)
            #expect(r.status == 0 && r.text == "OK\nOK\n6\n")
            r = try await runCLI(["batch", "jobs", "ifversion", "next", String(version), "del", "next"], socket: s)
            #expect(r.status == 5 && r.stdout.isEmpty && r.stderr.contains("nothing applied"))
            #expect(try await kv.getString("jobs", "next") == "9")

            for arguments in [["incr", "jobs"], ["incr", "jobs", "k", "1.5"], ["incr", "jobs", "k", "1", "2"],
                              ["put", "--if-version", "-1", "jobs", "k", "v"], ["put", "--if-version", "jobs", "k", "v"],
                              ["put", "--if-version", "1", "--if-version", "2", "jobs", "k", "v"], ["getv", "jobs"],
                              ["batch", "jobs", "ifversion", "k"], ["batch", "jobs", "incr", "k", "x"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
            }
        }
    }

    @Test("put - reads standard input; binary values round-trip exactly through put and get")
    func standardInputAndBinary() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            let binary: [UInt8] = [0x00, 0xFF, 0x0D, 0x0A, 0x41, 0x00, 0x0A] + Array((0...255).map { UInt8($0) })
            var r = try await runCLI(["put", "bin", "blob", "-"], socket: s, input: binary)
            #expect(r.status == 0)
            #expect(try await kv.get("bin", "blob") == binary)
            r = try await runCLI(["get", "bin", "blob"], socket: s)
            #expect(r.status == 0 && r.stdout == binary)

            let large = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 * 7) }
            r = try await runCLI(["put", "bin", "large", "-"], socket: s, input: large)
            #expect(r.status == 0)
            r = try await runCLI(["get", "bin", "large"], socket: s)
            #expect(r.stdout == large)

            r = try await runCLI(["put", "bin", "empty", "-"], socket: s, input: [])
            #expect(r.status == 0)
            #expect(try await kv.get("bin", "empty") == [])
            r = try await runCLI(["get", "bin", "empty"], socket: s)
            #expect(r.status == 0 && r.stdout.isEmpty)
        }
    }

    @Test("scan prints KEY TAB VALUE lines (escaped) and --json; prefix filters")
    func scan() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            try await kv.put("s", "user:1", "alice")
            try await kv.put("s", "user:2", "tab\there\nnew\\line")
            try await kv.put("s", "user:3", [0xFF, 0x00])
            try await kv.put("s", "zeta", "last")
            for start in stride(from: 0, to: 1200, by: 600) {  // two batches: an etcd txn holds at most --max-txn-ops writes
                _ = try await kv.batch("s", (start..<(start + 600)).map { .put(String(format: "many:%04d", $0), "v\($0)") })
            }

            var r = try await runCLI(["scan", "s", "user:"], socket: s)
            #expect(r.status == 0)
            #expect(r.stdout == Array("user:1\talice\nuser:2\ttab\\there\\nnew\\\\line\nuser:3\t".utf8) + [0xFF, 0x00, 0x0A])

            r = try await runCLI(["scan", "--json", "s", "user:"], socket: s)
            #expect(r.status == 0)
            let json = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [[String: String]])
            #expect(json.count == 3)
            #expect(json[0] == ["key": "user:1", "value": "alice"])
            #expect(json[1] == ["key": "user:2", "value": "tab\there\nnew\\line"])
            #expect(json[2] == ["key": "user:3", "value_base64": Data([0xFF, 0x00]).base64EncodedString()])

            r = try await runCLI(["scan", "s", "--json"], socket: s)
            let everything = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [[String: String]])
            #expect(everything.count == 1204)
            #expect(everything.last?["key"] == "zeta")

            r = try await runCLI(["scan", "s", "many:"], socket: s)
            let lines = r.text.split(separator: "\n")
            #expect(lines.count == 1200)
            #expect(lines.first == "many:0000\tv0")
            #expect(lines.last == "many:1199\tv1199")

            r = try await runCLI(["scan", "--json", "empty"], socket: s)
            #expect(r.status == 0 && r.text == "[]\n")
        }
    }

    @Test("info prints LF lines, as every other command does: a value cut from a line has no CR")
    func infoLines() async throws {
        try await withServer { server, kv in
            let r = try await runCLI(["info"], socket: server.socketPath)
            #expect(r.status == 0 && r.text.hasPrefix("# Server\n") && r.text.hasSuffix("\n"), "\(r.status) \(r.stderr)")
            let carriageReturn = r.stdout.contains(0x0D)
            #expect(!carriageReturn, "no carriage return: \(r.text.debugDescription)")
            let pid = r.stdout.split(separator: 0x0A).first { $0.starts(with: Array("process_id:".utf8)) }
                .map { String(decoding: $0.dropFirst("process_id:".count), as: UTF8.self) }
            #expect(pid.flatMap { Int32($0) } != nil, "process_id is a number: \(pid.debugDescription)")
            let help = try await runCLI(["--help"], socket: nil)
            #expect(help.text.contains("the server's CRLF line ends made LF"))
        }
    }

    @Test("-- ends the options of put and scan: a key, value or prefix that looks like an option is an operand after it")
    func endOfOptions() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            // Each: the arguments, then the key and value stored.
            let puts: [([String], String, String)] = [
                (["put", "o", "k1", "--", "--ttl"], "k1", "--ttl"),
                (["put", "o", "k2", "--", "--if-version=3"], "k2", "--if-version=3"),
                (["put", "o", "--", "--ephemeral", "--ttl=5"], "--ephemeral", "--ttl=5"),
                (["put", "--", "o", "k3", "--"], "k3", "--"),           // only the first -- ends the options
                (["put", "o", "k4", "--", "-"], "k4", "from stdin"),    // '-' still reads standard input
            ]
            for (arguments, key, value) in puts {
                let r = try await runCLI(arguments, socket: s, input: Array("from stdin".utf8))
                #expect(r.status == 0 && r.stdout.isEmpty && r.stderr.isEmpty, "\(arguments): \(r.status) \(r.stderr)")
                #expect(try await kv.getString("o", key) == value, "\(arguments)")
                #expect(try await kv.pttl("o", key) == .persistent, "\(arguments): no ttl")
            }
            // Options before -- still apply; those after it are operands.
            var r = try await runCLI(["put", "--ttl", "60", "o", "--if-version", "--", "--if-version", "0"], socket: s)
            #expect(r.status == 2, "--if-version before -- takes '--' as its value, and refuses it: \(r.status) \(r.stderr)")
            r = try await runCLI(["put", "--ttl", "60", "--if-version=0", "--", "o", "--json", "--ttl"], socket: s)
            #expect(r.status == 0 && UInt64(r.text.dropLast()) != nil, "\(r.status) \(r.text) \(r.stderr)")
            #expect(try await kv.getString("o", "--json") == "--ttl")
            guard case .remaining = try await kv.pttl("o", "--json") else { throw TestFailure("--ttl before -- set no ttl") }
            r = try await runCLI(["put", "o", "k5", "v", "--ttl"], socket: s)  // no -- : still the option, without its value
            #expect(r.status == 2 && r.stderr.contains("--ttl needs a number of seconds"), "\(r.status) \(r.stderr)")

            // scan: after --, --json is the prefix (the key --json was put above; k1 is not under it).
            try await kv.put("o", "--json-2", "two")
            r = try await runCLI(["scan", "o", "--", "--json"], socket: s)
            #expect(r.status == 0 && r.text == "--json\t--ttl\n--json-2\ttwo\n", "\(r.status) \(r.text) \(r.stderr)")
            r = try await runCLI(["scan", "--json", "o", "--", "--json-"], socket: s)
            let json = try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [[String: String]]
            #expect(r.status == 0 && json == [["key": "--json-2", "value": "two"]], "\(r.text) \(r.stderr)")
            r = try await runCLI(["scan", "--", "o", "--"], socket: s)  // the prefix '--'
            #expect(r.status == 0 && r.text == "--ephemeral\t--ttl=5\n--json\t--ttl\n--json-2\ttwo\n", "\(r.text)")
            r = try await runCLI(["scan", "o", "--json"], socket: s)  // no --: the flag, as before
            #expect((try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [[String: String]])?.count == 7, "\(r.text)")

            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("The first '--' ends them") && r.text.contains("actorkv put ns key -- --ttl")
                    && r.text.contains("scan [--json] [--] NS [PREFIX]"))
        }
    }

    @Test("exit 4 when no server listens on the socket")
    func cannotConnect() async throws {
        let path = "/tmp/akc-cli-none-\(getpid()).sock"
        for arguments in [["ping"], ["get", "ns", "k"], ["put", "ns", "k", "v"], ["scan", "ns"]] {
            let r = try await runCLI(arguments, socket: path)
            #expect(r.status == 4, "\(arguments)")
            #expect(r.stderr.contains("cannot connect to \(path)"))
            #expect(r.stdout.isEmpty)
        }
    }

    @Test("--timeout: a stopped server gives exit 4 'timed out', not a hang (a write's message: it may have been applied); bad values are usage errors")
    func timeout() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            try await kv.put("c", "theme", "dark")
            try await server.signal(SIGSTOP)
            for arguments in [["--timeout", "0.3", "get", "c", "theme"], ["-t", "0.3", "ping"],
                              ["--timeout=0.3", "scan", "c"], ["--timeout", "0.3", "put", "c", "k", "v"]] {
                let r = try await runCLI(arguments, socket: s, killAfter: 8)
                #expect(r.status == 4, "\(arguments): \(r.status) \(r.stderr)")
                #expect(r.stderr.contains("timed out: no reply from the server at \(s) within 0.3 s"), "\(r.stderr)")
                #expect(r.stderr.contains("may or may not have been applied") == (arguments.contains("put")), "\(r.stderr)")
                #expect(r.stdout.isEmpty)
            }
            try await server.signal(SIGCONT)
            // Applied once the server went on: at once by the local engine, a moment later by an
            // agent (ClusterTarget), whose etcd request another connection's reads do not wait for.
            try await eventually("the put that timed out was applied once the server went on") {
                try await kv.getString("c", "k") == "v"
            }
            var r = try await runCLI(["--timeout", "10", "get", "c", "theme"], socket: s)
            #expect(r.status == 0 && r.text == "dark")
            r = try await runCLI(["--timeout", "0", "get", "c", "theme"], socket: s)  // 0: no timeout
            #expect(r.status == 0 && r.text == "dark")
            for arguments in [["--timeout", "x", "ping"], ["--timeout", "-1", "ping"], ["--timeout=", "ping"],
                              ["--timeout", "nan", "ping"], ["--timeout"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
            }
            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("--timeout SECS"))
        }
    }

    @Test("every command --help lists is one actorkv runs: without operands, its own usage (exit 2) or, needing none, an attempt to connect (exit 4); never 'unknown command'")
    func helpListsOnlyCommandsThatRun() async throws {
        let help = try await runCLI(["--help"], socket: nil)
        #expect(help.status == 0)
        // The lines of the Commands section that start with a command: "  get NS KEY   print ...".
        let section = help.text.components(separatedBy: "\nCommands:\n").last?.components(separatedBy: "\n\n").first ?? ""
        let commands = Set(section.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  "), let first = line.dropFirst(2).first, first.isLowercase else { return nil }
            return line.dropFirst(2).split(separator: " ").first.map(String.init)
        })
        #expect(commands.count >= 18, "the Commands section as read: \(commands.sorted())")
        let missing = TemporaryDirectory("nosock")
        defer { missing.remove() }
        for command in commands.sorted() {
            let r = try await runCLI([command], socket: missing.path + "/none.sock")
            #expect(!r.stderr.contains("unknown command"), "\(command): \(r.stderr)")
            if r.status == 2 {
                #expect(r.stderr.hasPrefix("actorkv: usage: actorkv \(command)"), "\(command): \(r.stderr)")
            } else {
                #expect(r.status == 4 && r.stderr.contains("cannot connect"), "\(command): \(r.status) \(r.stderr)")
            }
        }
    }

    @Test("output that cannot be written (disk full, stdout closed) gives exit 3 and a message")
    func outputWriteFailure() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            try await kv.put("t", "big", [UInt8](repeating: 0x61, count: 200_000))
            try await kv.put("t", "small", "x")
            for arguments in [["get", "t", "big"], ["get", "t", "small"], ["scan", "t"], ["scan", "--json", "t"],
                              ["ping"], ["info"], ["count", "t"], ["--help"]] {
                let r = try await runCLI(arguments, socket: s, stdout: .file("/dev/full"))
                #expect(r.status == 3, "\(arguments): \(r.status) \(r.stderr)")
                #expect(r.stderr == "actorkv: cannot write standard output: No space left on device\n", "\(arguments)")
            }
            // Standard output closed: the socket must not take its place (a write to it fails).
            let cli = try builtBinary("actorkv", environment: "ACTORKV_CLI")
            for command in ["ping", "get t small", "scan t"] {
                let (status, err) = try await onOwnThread {
                    let shell = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" --socket \"$1\" \(command) >&-", cli, s],
                                                 stderr: .pipe)
                    let err = shell.readOutputs().stderr
                    return (shell.status, err)
                }
                #expect(status == 3, "\(command)")
                #expect(String(decoding: err, as: UTF8.self) == "actorkv: cannot write standard output: Bad file descriptor\n")
            }
            // Nothing to print: nothing to fail.
            let r = try await runCLI(["put", "t", "k", "v"], socket: s, stdout: .file("/dev/full"))
            #expect(r.status == 0 && r.stderr.isEmpty)
        }
    }

    @Test("a non-blocking standard output (inherited from the parent) is waited on, not taken for an error")
    func nonBlockingStandardOutput() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { return }
        try await withServer { server, kv in
            try await kv.put("t", "big", [UInt8](repeating: 0x61, count: 1 << 20))
            let cli = try builtBinary("actorkv", environment: "ACTORKV_CLI")
            // A pipe whose write end is O_NONBLOCK, read slowly: the CLI meets EAGAIN many times.
            let script = """
            import fcntl, os, subprocess, sys, time
            r, w = os.pipe()
            fcntl.fcntl(w, fcntl.F_SETFL, fcntl.fcntl(w, fcntl.F_GETFL) | os.O_NONBLOCK)
            p = subprocess.Popen([sys.argv[1], "--socket", sys.argv[2], "get", "t", "big"], stdout=w, stderr=subprocess.PIPE)
            os.close(w)
            total = 0
            while True:
                time.sleep(0.002)
                chunk = os.read(r, 65536)
                if not chunk: break
                total += len(chunk)
            err = p.stderr.read().decode()
            print(p.wait(), total, repr(err))
            """
            let socket = server.socketPath
            let out = try await onOwnThread {
                let p = try ChildProcess("/usr/bin/python3", ["-c", script, cli, socket], stdout: .pipe)
                defer { p.waitForExit() }
                return String(decoding: p.readOutputs().stdout, as: UTF8.self)
            }
            #expect(out == "0 1048576 ''\n", "exit status, bytes read, standard error: \(out)")
        }
    }

    @Test("a refused connection (MAXCLIENTS, NOPERM) is exit 4 'cannot connect', every time")
    func refusedConnection() async throws {
        try await withServer(arguments: ["--max-clients", "1"]) { server, kv in
            for _ in 0..<500 {  // take the only place (the startup probe may hold it for a moment)
                if (try? await kv.ping()) != nil { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(try await kv.ping() == "PONG")
            for arguments in Array(repeating: ["get", "c", "theme"], count: 8) + [["ping"], ["put", "c", "k", "v"]] {
                let r = try await runCLI(arguments, socket: server.socketPath)
                #expect(r.status == 4, "\(arguments): \(r.status) \(r.stderr)")
                #expect(r.stderr.hasPrefix("actorkv: cannot connect to \(server.socketPath): the server refused the connection: MAXCLIENTS"),
                        "\(r.stderr)")
            }
        }
        // What a server started with --allow-uid sends a peer it does not allow (this test's own
        // uid is always allowed by a real server), at once on accept, then it closes.
        let fake = try FakeServer { fd in
            writeBytes(fd, Array("-NOPERM connection refused: uid 4242 is not allowed\r\n".utf8))
            return false
        }
        defer { fake.stop() }
        for arguments in Array(repeating: ["get", "c", "theme"], count: 8) + [["ping"], ["scan", "c"]] {
            let r = try await runCLI(arguments, socket: fake.path)
            #expect(r.status == 4, "\(arguments): \(r.status) \(r.stderr)")
            #expect(r.stderr == "actorkv: cannot connect to \(fake.path): the server refused the connection: "
                        + "NOPERM connection refused: uid 4242 is not allowed\n", "\(r.stderr)")
        }
    }
}
