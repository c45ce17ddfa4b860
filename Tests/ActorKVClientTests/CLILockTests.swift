import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// `actorkv lock`, `put --ttl` and `pttl` as child processes against a real server: mutual
/// exclusion of many processes around a read-increment-write of a plain file, also while
/// holders are killed with kill -9; the lock kept while the command runs even when actorkv is
/// killed; exit status passthrough and the token in the environment; the timeout and
/// lost-lock exit codes.
@Suite("actorkv lock, put --ttl, pttl")
struct CLILockTests {
    /// One round: read the count, add one, write it back, then log the count and the token.
    /// Two rounds at once would lose an update (and log a count twice).
    static let round = #"n=$(cat "$F"); echo $((n + 1)) > "$F"; echo "$((n + 1)) $ACTORKV_LOCK_TOKEN" >> "$F.log""#

    @Test("10 processes x 50 rounds of a read-increment-write of a file under actorkv lock: the count is exactly 500, tokens increase")
    func mutualExclusion() async throws {
        try await withServer { server, kv in
            let dir = TemporaryDirectory("lck")
            let file = dir.path + "/count"
            try "0\n".write(toFile: file, atomically: true, encoding: .utf8)
            let worker = #"""
                i=0
                while [ $i -lt 50 ]; do
                    "$CLI" --socket "$S" lock --timeout 120 locks file -- /bin/sh -c "$ROUND" || exit $?
                    i=$((i + 1))
                done
                """#
            let statuses = try await runWorkers(10, worker, environment: [
                "CLI": try cliPath(), "S": server.socketPath, "F": file, "ROUND": Self.round,
            ], logDirectory: dir.path)
            #expect(statuses == Array(repeating: 0, count: 10), "workers' exit statuses")
            #expect(try String(contentsOfFile: file, encoding: .utf8) == "500\n")
            let log = try LockLog(file + ".log")
            #expect(log.counts == Array(1...500), "each round saw the one before it")
            #expect(log.tokensIncrease, "each holder's token is larger than the one before")
            #expect(try await kv.getVersioned("locks", "file") == nil, "released")
        }
    }

    @Test("holders killed with kill -9 at random: the count equals the rounds completed, and the lock is always released",
          .tags(.slow), .skippedWhenQuick)
    func killedHolders() async throws {
        try await withServer { server, kv in
            let dir = TemporaryDirectory("lck")
            let file = dir.path + "/count"
            try "0\n".write(toFile: file, atomically: true, encoding: .utf8)
            // Each worker runs actorkv in the background, so that the test can find its pid, until
            // told to stop (or 100 attempts); a round sleeps between its read and its write, so
            // that kills land in the middle of rounds too.
            let worker = #"""
                i=0
                while [ ! -e "$D/stop" ] && [ $i -lt 100 ]; do
                    i=$((i + 1))
                    echo >> "$D/attempts.$ID"
                    "$CLI" --socket "$S" lock --timeout 120 locks kill -- /bin/sh -c "$ROUND" &
                    echo $! > "$D/pid.$ID"
                    wait $!
                    status=$?
                    case $status in
                        0) ;;
                        137) echo >> "$D/killed.$ID" ;;
                        *) exit $status ;;
                    esac
                done
                """#
            let slowRound = Self.round.replacingOccurrences(of: #"n=$(cat "$F"); "#, with: #"n=$(cat "$F"); sleep 0.03; "#)
            let workers = 5
            let children = try startWorkers(workers, worker, environment: [
                "CLI": try cliPath(), "S": server.socketPath, "F": file, "ROUND": slowRound, "D": dir.path,
            ], logDirectory: dir.path)
            // 15 kills of running `actorkv lock` processes, 20 to 100 ms apart, then stop. (Not on
            // a thread of its own: onOwnThread may have to wait for a place, and the workers go on.)
            var random = SeededGenerator(seed: 20)
            var sent = 0
            while sent < 15 && children.allSatisfy(\.isRunning) {
                try await Task.sleep(for: .milliseconds(Int.random(in: 20...100, using: &random)))
                let id = Int.random(in: 0..<workers, using: &random)
                guard let text = try? String(contentsOfFile: "\(dir.path)/pid.\(id)", encoding: .utf8),
                      let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)),
                      (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) == "actorkv\n" else { continue }
                if kill(pid, SIGKILL) == 0 { sent += 1 }
            }
            _ = FileManager.default.createFile(atPath: dir.path + "/stop", contents: nil)
            let statuses = try await onOwnThread { children.map(\.status) }
            #expect(statuses == Array(repeating: 0, count: workers), "workers' exit statuses (see \(dir.path)/worker.*.log)")
            // Always released: a round whose actorkv was killed still ends (its command finishes
            // holding the lock), and then the lock is free.
            let r = try await runCLI(["lock", "--timeout", "60", "locks", "kill", "--", "true"], socket: server.socketPath)
            #expect(r.status == 0, "\(r.stderr)")
            #expect(try await kv.getVersioned("locks", "kill") == nil)
            func lines(_ name: String) -> Int {
                (0..<workers).reduce(0) { total, id in
                    total + ((try? String(contentsOfFile: "\(dir.path)/\(name).\(id)", encoding: .utf8)) ?? "").filter { $0 == "\n" }.count
                }
            }
            let attempts = lines("attempts"), killed = lines("killed")
            #expect(killed >= 1 && killed <= sent, "\(killed) holders killed (of \(sent) kill -9 sent)")
            let count = Int(try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
            let log = try LockLog(file + ".log")
            #expect(count == log.counts.count, "the count equals the rounds completed")
            #expect(log.counts == (0..<log.counts.count).map { $0 + 1 }, "no round lost another's update")
            #expect(log.tokensIncrease)
            #expect(log.counts.count >= attempts - killed, "a round is lost only when its actorkv was killed while waiting")
            print("actorkv lock killed with kill -9: \(sent) sent, \(killed) holders killed, \(log.counts.count) of \(attempts) rounds completed")
        }
    }

    @Test("actorkv killed (kill -9) while its command runs: the lock stays held until the command exits, then it is released")
    func killedWhileCommandRuns() async throws {
        try await withServer { server, kv in
            let dir = TemporaryDirectory("lck")
            let pidFile = dir.path + "/command.pid"
            let holder = try ChildProcess(try cliPath(), ["--socket", server.socketPath, "lock", "locks", "held", "--",
                                                          "/bin/sh", "-c", "echo $$ > \(pidFile).tmp && mv \(pidFile).tmp \(pidFile) && exec sleep 120"])
            var commandPid: Int32 = 0
            try await eventually("the command runs") {
                commandPid = Int32(((try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
                return commandPid > 0
            }
            let token = try #require(try await kv.getVersioned("locks", "held")).version
            holder.signal(SIGKILL)
            #expect(try await onOwnThread { holder.status } == SIGKILL)
            var r = try await runCLI(["lock", "--timeout", "0", "locks", "held", "--", "true"], socket: server.socketPath)
            #expect(r.status == 7, "still held by the running command: \(r.status) \(r.stderr)")
            #expect(try await kv.getVersioned("locks", "held")?.version == token)
            kill(commandPid, SIGKILL)
            r = try await runCLI(["lock", "--timeout", "30", "locks", "held", "--", "/bin/sh", "-c", "echo $ACTORKV_LOCK_TOKEN"],
                                 socket: server.socketPath)
            #expect(r.status == 0, "released once the command is gone too: \(r.stderr)")
            #expect(UInt64(r.text.trimmingCharacters(in: .whitespacesAndNewlines)).map { $0 > token } == true, "\(r.text)")
        }
    }

    @Test("a process the command starts in the background keeps the lock while it has the lock's connection, as with flock(1): lock --timeout 0 exits 7 meanwhile, and the lock is free once it exits; lost meanwhile (--ttl): exit 4")
    func backgroundProcessKeepsLock() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            let cli = try cliPath()
            let dir = TemporaryDirectory("lck")
            func pid(_ file: String) -> Int32 {
                Int32(((try? String(contentsOfFile: file, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            }
            // The daemon: a sleep in the background, its standard streams not actorkv's (which
            // would keep runCLI reading); it inherits the command's other descriptors, among
            // them the lock's connection.
            let daemon = #"sleep 120 </dev/null >/dev/null 2>&1 & echo $! > "$0"; echo "$ACTORKV_LOCK_TOKEN""#
            var r = try await runCLI(["lock", "--timeout", "0", "locks", "daemon", "--", "/bin/sh", "-c", daemon, dir.path + "/1.pid"],
                                     socket: s)
            let first = pid(dir.path + "/1.pid")
            defer { if first > 0 { kill(first, SIGKILL) } }
            #expect(r.status == 0 && r.stderr.isEmpty, "actorkv exits with the command's status at once: \(r.status) \(r.stderr)")
            let token = UInt64(r.text.trimmingCharacters(in: .whitespacesAndNewlines))
            #expect(token != nil && first > 0, "\(r.text)")
            r = try await runCLI(["lock", "--timeout", "0", "locks", "daemon", "--", "true"], socket: s)
            #expect(r.status == 7 && r.stderr.contains("(held by "), "held while the daemon lives: \(r.status) \(r.stderr)")
            #expect(try await kv.getVersioned("locks", "daemon")?.version == token)
            kill(first, SIGKILL)
            try await eventually("the lock is released once the daemon is gone") { try await kv.getVersioned("locks", "daemon") == nil }
            r = try await runCLI(["lock", "--timeout", "0", "locks", "daemon", "--", "true"], socket: s)
            #expect(r.status == 0, "free: \(r.status) \(r.stderr)")
            #expect(try await kv.getVersioned("locks", "daemon") == nil, "and released at once when nothing else holds it")

            // The lock's --ttl runs out before the command exits (it waits for that), the daemon
            // still running: lost, exit 4, as when nothing else holds the connection.
            let expiring = #"sleep 120 </dev/null >/dev/null 2>&1 & echo $! > "$0"; while "$1" --socket "$2" exists locks daemon >/dev/null; do sleep 0.05; done"#
            r = try await runCLI(["lock", "--ttl", "0.3", "locks", "daemon", "--", "/bin/sh", "-c", expiring, dir.path + "/2.pid", cli, s],
                                 socket: s)
            let second = pid(dir.path + "/2.pid")
            defer { if second > 0 { kill(second, SIGKILL) } }
            #expect(second > 0 && r.status == 4, "\(r.status) \(r.stderr)")
            #expect(r.stderr.contains("lock lost") && r.stderr.contains("expired") && r.stderr.contains("exited with status 0"), "\(r.stderr)")

            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("keeps the lock, as with flock"))
        }
    }

    @Test("the command's exit status (128+N for signal N), ACTORKV_LOCK_TOKEN = the key's version, host:pid; 126, 127; usage errors")
    func commandAndStatus() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            let cli = try cliPath()
            var r = try await runCLI(["lock", "locks", "st", "--", "/bin/sh", "-c", "exit 3"], socket: s)
            #expect(r.status == 3 && r.stderr.isEmpty, "\(r.status) \(r.stderr)")
            r = try await runCLI(["lock", "locks", "st", "--", "/bin/sh", "-c", "kill -TERM $$"], socket: s)
            #expect(r.status == 128 + SIGTERM, "\(r.status)")
            r = try await runCLI(["lock", "locks", "st", "true"], socket: s)  // no "--"; PATH lookup
            #expect(r.status == 0, "\(r.stderr)")
            r = try await runCLI(["lock", "locks", "st", "--", "/bin/sh", "-c", #"echo "$ACTORKV_LOCK_TOKEN"; "$0" --socket "$1" getv locks st; echo; echo "$PPID""#, cli, s],
                                 socket: s, input: [], environment: ["ACTORKV_LOCK_TOKEN": "stale"])
            #expect(r.status == 0, "\(r.stderr)")
            let lines = r.text.split(separator: "\n").map(String.init)
            #expect(lines.count == 4, "\(lines)")
            if lines.count == 4 {
                #expect(UInt64(lines[0]) != nil && lines[0] == lines[1], "the token is the key's version while held: \(lines)")
                #expect(lines[2].hasSuffix(":" + lines[3]), "the key's value is host:pid of actorkv (the command's parent): \(lines)")
            }
            // Standard input and output are the command's.
            r = try await runCLI(["lock", "locks", "st", "--", "cat"], socket: s, input: Array("through\n".utf8))
            #expect(r.status == 0 && r.text == "through\n")
            #expect(try await kv.getVersioned("locks", "st") == nil, "released after each command")

            r = try await runCLI(["lock", "locks", "st", "--", "/nonexistent/command"], socket: s)
            #expect(r.status == 127 && r.stderr.contains("cannot run '/nonexistent/command'"), "\(r.status) \(r.stderr)")
            let dir = TemporaryDirectory("lck")
            let notExecutable = dir.path + "/plain"
            #expect(FileManager.default.createFile(atPath: notExecutable, contents: Data("x".utf8), attributes: [.posixPermissions: 0o644]))
            r = try await runCLI(["lock", "locks", "st", "--", notExecutable], socket: s)
            #expect(r.status == 126, "\(r.status) \(r.stderr)")
            #expect(try await kv.getVersioned("locks", "st") == nil, "released when the command could not run")

            for arguments in [["lock", "locks", "st"], ["lock", "locks", "st", "--"], ["lock", "locks"], ["lock"],
                              ["lock", "--timeout", "x", "locks", "st", "true"], ["lock", "--timeout", "-1", "locks", "st", "true"],
                              ["lock", "--ttl", "0", "locks", "st", "true"], ["lock", "--ttl=", "locks", "st", "true"],
                              ["lock", "--timeout", "1", "--timeout", "2", "locks", "st", "true"],
                              ["lock", "--bogus", "locks", "st", "true"], ["lock", "--timeout"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2 && r.stderr.hasPrefix("actorkv: "), "\(arguments): \(r.status) \(r.stderr)")
            }
            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("lock [--timeout SECS] [--ttl SECS] NS KEY [--] COMMAND [ARG...]"))
            #expect(r.text.contains("\n  7  lock: the lock was not acquired within"))
            #expect(r.text.contains("pttl NS KEY") && r.text.contains("put --ttl SECS NS KEY VALUE")
                    && r.text.contains("There is no --ephemeral"))
        }
    }

    @Test("a command file without #! (nor a binary) is run with /bin/sh, as flock(1)'s execvp runs it: by path and found in PATH")
    func scriptWithoutInterpreterLine() async throws {
        try await withServer { server, kv in
            let dir = TemporaryDirectory("lck")
            let script = dir.path + "/no-shebang"
            let body = #"echo "ran $0 [$1] token=${ACTORKV_LOCK_TOKEN:+set}"; exit 3"# + "\n"
            #expect(FileManager.default.createFile(atPath: script, contents: Data(body.utf8), attributes: [.posixPermissions: 0o755]))
            var r = try await runCLI(["lock", "locks", "sh", "--", script, "one arg"], socket: server.socketPath)
            #expect(r.status == 3 && r.text == "ran \(script) [one arg] token=set\n", "\(r.status) \(r.text) \(r.stderr)")
            let path = dir.path + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            r = try await runCLI(["lock", "locks", "sh", "no-shebang", "x"], socket: server.socketPath, environment: ["PATH": path])
            #expect(r.status == 3 && r.text == "ran \(script) [x] token=set\n", "found in PATH: \(r.status) \(r.text) \(r.stderr)")
            #expect(try await kv.getVersioned("locks", "sh") == nil, "released")
            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("is run with /bin/sh"))
        }
    }

    @Test("--timeout: exit 7 and the command not run while another holds the lock (0: one attempt); no server: exit 4")
    func timeoutAndNoServer() async throws {
        try await withServer { server, kv in
            let dir = TemporaryDirectory("lck")
            let marker = dir.path + "/ran"
            let held = try await kv.acquireLock("locks", "busy", timeout: .zero)
            for timeout in ["0.3", "0"] {
                let r = try await runCLI(["lock", "--timeout", timeout, "locks", "busy", "--", "/bin/sh", "-c", "touch \(marker)"],
                                         socket: server.socketPath)
                #expect(r.status == 7, "\(timeout): \(r.status) \(r.stderr)")
                #expect(r.stderr.contains("lock not acquired: key 'busy' in namespace 'locks'"), "\(r.stderr)")
                #expect(r.stderr.contains("(held by ") && r.stderr.contains(":\(getpid()))"), "names the holder: \(r.stderr)")
            }
            #expect(!FileManager.default.fileExists(atPath: marker), "the command did not run")
            try await held.release()
            let r = try await runCLI(["lock", "--timeout=0", "locks", "busy", "--", "/bin/sh", "-c", "touch \(marker)"],
                                     socket: server.socketPath)
            #expect(r.status == 0 && FileManager.default.fileExists(atPath: marker), "\(r.stderr)")
        }
        let r = try await runCLI(["lock", "locks", "k", "--", "true"], socket: TemporaryDirectory("lck").path + "/none.sock")
        #expect(r.status == 4 && r.stderr.contains("cannot connect"), "\(r.status) \(r.stderr)")
    }

    @Test("the lock lost while the command runs (server killed and restarted, or --ttl ran out): exit 4, naming the command's status")
    func lockLost() async throws {
        try await withServer(fsync: "always") { server, kv in
            let dir = TemporaryDirectory("lck")
            let script = "touch \(dir.path)/started; while [ ! -e \(dir.path)/go ]; do sleep 0.02; done; exit 0"
            let holder = try ChildProcess(try cliPath(), ["--socket", server.socketPath, "lock", "locks", "lost", "--", "/bin/sh", "-c", script],
                                          stderr: .pipe)
            try await eventually("the command runs") { FileManager.default.fileExists(atPath: dir.path + "/started") }
            try await server.signal(SIGKILL)
            try await server.restart()
            #expect(FileManager.default.createFile(atPath: dir.path + "/go", contents: nil))
            let (status, errors) = try await onOwnThread { (holder.status, String(decoding: holder.readOutputs().stderr, as: UTF8.self)) }
            #expect(status == 4, "\(errors)")
            #expect(errors.hasPrefix("actorkv: lock lost: key 'lost' in namespace 'locks'") && errors.contains("exited with status 0"),
                    "\(errors)")
            // An agent's lease outlives its kill -9 by up to --ephemeral-ttl (protocol.md, Cluster mode).
            try await eventually("the lock's key is gone") { try await kv.getVersioned("locks", "lost") == nil }

            // --ttl: the lock expires while the command runs; another actorkv lock gets it meanwhile.
            let cli = try cliPath()
            var r = try await runCLI(["lock", "--ttl", "0.3", "locks", "ttl", "--", "/bin/sh", "-c",
                                      #""$0" --socket "$1" lock --timeout 30 locks ttl -- true"#, cli, server.socketPath],
                                     socket: server.socketPath)
            #expect(r.status == 4, "\(r.status) \(r.stderr)")
            #expect(r.stderr.contains("lock lost") && r.stderr.contains("expired") && r.stderr.contains("exited with status 0"),
                    "\(r.stderr)")
            // The ttl is on the lock's key (a long one, so that it cannot run out before pttl).
            r = try await runCLI(["lock", "--ttl=60", "locks", "ttl", "--", "/bin/sh", "-c", #""$0" --socket "$1" pttl locks ttl"#,
                                  cli, server.socketPath], socket: server.socketPath)
            let left = Int(r.text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
            #expect(r.status == 0 && left > 0 && left <= 60_000 + (ClusterTarget.active ? 1000 : 0), "pttl of the lock inside its command: \(r.text) \(r.stderr)")
        }
    }

    @Test("put --ttl and pttl: the milliseconds left, -1 without expiry, -2 and exit 1 when missing; the key expires; no --ephemeral")
    func putTTLAndPttl() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            var r = try await runCLI(["put", "--ttl", "60", "t", "k", "v"], socket: s)
            #expect(r.status == 0 && r.stdout.isEmpty, "\(r.stderr)")
            r = try await runCLI(["pttl", "t", "k"], socket: s)
            let left = Int(r.text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -100
            // An agent keeps deadlines to the second: up to a second more (protocol.md, Cluster mode).
            #expect(r.status == 0 && left > 0 && left <= 60_000 + Int(ClusterTarget.deadlineSlack / .milliseconds(1)), "\(r.text)")
            r = try await runCLI(["put", "t", "k", "v2"], socket: s)
            r = try await runCLI(["pttl", "t", "k"], socket: s)
            #expect(r.status == 0 && r.text == "-1\n")
            r = try await runCLI(["pttl", "t", "missing"], socket: s)
            #expect(r.status == 1 && r.text == "-2\n")
            r = try await runCLI(["put", "--if-version", "0", "--ttl=60", "t", "new", "v"], socket: s)
            #expect(r.status == 0 && UInt64(r.text.trimmingCharacters(in: .whitespacesAndNewlines)) != nil, "\(r.text) \(r.stderr)")
            guard case .remaining = try await kv.pttl("t", "new") else { throw TestFailure("put --if-version --ttl set no ttl") }

            r = try await runCLI(["put", "--ttl", "0.2", "t", "short", "v"], socket: s)
            #expect(r.status == 0)
            try await eventually("the key expires") { try await runCLI(["get", "t", "short"], socket: s).status == 1 }

            for arguments in [["put", "--ttl", "0", "t", "k", "v"], ["put", "--ttl", "x", "t", "k", "v"], ["put", "t", "k", "v", "--ttl"],
                              ["put", "--ttl", "1", "--ttl", "2", "t", "k", "v"], ["pttl"], ["pttl", "t", "k", "x"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
            }
            r = try await runCLI(["put", "--ephemeral", "t", "k", "v"], socket: s)
            #expect(r.status == 2 && r.stderr.contains("--ephemeral is not offered"), "\(r.stderr)")
        }
    }

    @Test("expire NS SECS, pttl NS and persist NS: the whole namespace's deadline (0 and exit 1 without keys, -2 likewise); every key goes at it; refused through an etcd agent")
    func namespaceDeadline() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            try await kv.put("job", "a", "1")
            guard !ClusterTarget.active else {
                for arguments in [["expire", "job", "60"], ["pttl", "job"], ["persist", "job"]] {
                    let r = try await runCLI(arguments, socket: s)
                    #expect(r.status != 0 && r.stderr.contains("not available in cluster mode"), "\(arguments): \(r.status) \(r.stderr)")
                }
                return
            }
            var r = try await runCLI(["expire", "none", "60"], socket: s)
            #expect(r.status == 1 && r.text == "0\n", "no key: \(r.status) \(r.text) \(r.stderr)")
            r = try await runCLI(["pttl", "none"], socket: s)
            #expect(r.status == 1 && r.text == "-2\n", "\(r.status) \(r.text)")
            r = try await runCLI(["expire", "job", "60"], socket: s)
            #expect(r.status == 0 && r.text == "1\n", "\(r.status) \(r.text) \(r.stderr)")
            r = try await runCLI(["pttl", "job"], socket: s)
            let left = Int(r.text.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -100
            #expect(r.status == 0 && left > 50_000 && left <= 60_000, "\(r.text)")
            #expect(try await kv.pttl("job", "a") == .persistent, "the key's own deadline is another")
            r = try await runCLI(["persist", "job"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")
            #expect(try await kv.pttl("job") == .persistent)
            r = try await runCLI(["expire", "job", "0.2"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")
            try await eventually("every key goes") { try await kv.count("job") == 0 }
            for arguments in [["expire", "job", "0"], ["expire", "job", "x"], ["expire", "job"], ["persist"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
            }
        }
    }

    @Test("expire gives a key a ttl (1; 0 and exit 1 when missing) and keeps its value; persist removes it (1, else 0); incr keeps it, so a shell's counter window ends; bad SECS are usage errors")
    func expireAndPersist() async throws {
        try await withServer { server, kv in
            let s = server.socketPath
            try await kv.put("t", "k", "v")
            let before = try #require(try await kv.getVersioned("t", "k"))
            var r = try await runCLI(["expire", "t", "k", "60"], socket: s)
            #expect(r.status == 0 && r.text == "1\n", "\(r.status) \(r.text) \(r.stderr)")
            guard case .remaining(let left) = try await kv.pttl("t", "k") else { throw TestFailure("expire set no ttl") }
            #expect(left <= .seconds(60) + ClusterTarget.deadlineSlack, "\(left)")
            let after = try #require(try await kv.getVersioned("t", "k"))
            #expect(after.value == before.value)
            // An agent writes the key again for PEXPIRE, a new version (protocol.md, Cluster mode).
            if !ClusterTarget.active { #expect(after.version == before.version) }
            r = try await runCLI(["expire", "t", "missing", "5"], socket: s)
            #expect(r.status == 1 && r.text == "0\n", "\(r.status) \(r.text)")
            #expect(try await kv.get("t", "missing") == nil)

            r = try await runCLI(["persist", "t", "k"], socket: s)
            #expect(r.status == 0 && r.text == "1\n", "\(r.status) \(r.text) \(r.stderr)")
            #expect(try await kv.pttl("t", "k") == .persistent)
            for key in ["k", "missing"] {
                r = try await runCLI(["persist", "t", key], socket: s)
                #expect(r.status == 0 && r.text == "0\n", "\(key): \(r.status) \(r.text)")
            }

            // A shell's rate limiter: the first count starts the window, later counts keep it.
            // (A window of 60 s, so that no loaded machine reaches its end between the two
            // counts — 3 s once did, with the whole suite running — then cut short to see it end.)
            r = try await runCLI(["incr", "t", "hits"], socket: s)
            #expect(r.text == "1\n")
            r = try await runCLI(["expire", "t", "hits", "60"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")
            r = try await runCLI(["incr", "t", "hits", "2"], socket: s)
            #expect(r.text == "3\n")
            guard case .remaining = try await kv.pttl("t", "hits") else { throw TestFailure("incr removed the expiry") }
            r = try await runCLI(["expire", "t", "hits", "0.3"], socket: s)
            #expect(r.status == 0 && r.text == "1\n")
            try await eventually("the counter's window ends") { try await runCLI(["get", "t", "hits"], socket: s).status == 1 }

            for arguments in [["expire", "t", "k"], ["expire", "t", "k", "0"], ["expire", "t", "k", "-1"], ["expire", "t", "k", "x"],
                              ["expire", "t", "k", "1", "2"], ["persist"], ["persist", "t", "k", "x"]] {
                r = try await runCLI(arguments, socket: s)
                #expect(r.status == 2, "\(arguments): \(r.status) \(r.stderr)")
            }
            r = try await runCLI(["--help"], socket: nil)
            #expect(r.text.contains("expire NS KEY SECS") && r.text.contains("persist NS KEY"))
        }
    }
}

/// The built `actorkv`.
func cliPath() throws -> String { try builtBinary("actorkv", environment: "ACTORKV_CLI") }

/// Starts `count` `/bin/sh -c script` processes, each with ID=0… and `environment` added to this
/// process's; their standard error goes to `logDirectory`/worker.ID.log.
func startWorkers(_ count: Int, _ script: String, environment: [String: String],
                  logDirectory: String) throws -> [ChildProcess] {
    try (0..<count).map { id in
        var env = ProcessInfo.processInfo.environment
        env["ACTORKV_SOCKET"] = nil
        for (name, value) in environment { env[name] = value }
        env["ID"] = String(id)
        return try ChildProcess("/bin/sh", ["-c", script], environment: env, stderr: .file("\(logDirectory)/worker.\(id).log"))
    }
}

/// ``startWorkers(_:_:environment:logDirectory:)``, then their exit statuses (waited for on a
/// thread of its own).
func runWorkers(_ count: Int, _ script: String, environment: [String: String], logDirectory: String) async throws -> [Int32] {
    let children = try startWorkers(count, script, environment: environment, logDirectory: logDirectory)
    return try await onOwnThread { children.map(\.status) }
}

/// The log the rounds write: one `COUNT TOKEN` line per completed round.
struct LockLog {
    var counts: [Int] = []
    var tokens: [UInt64] = []

    init(_ path: String) throws {
        for line in try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 2, let count = Int(fields[0]), let token = UInt64(fields[1]) else {
                throw TestFailure("a malformed log line: '\(line)'")
            }
            counts.append(count)
            tokens.append(token)
        }
    }

    /// Whether each round's token is larger than the one before.
    var tokensIncrease: Bool { zip(tokens, tokens.dropFirst()).allSatisfy { $0 < $1 } }
}
