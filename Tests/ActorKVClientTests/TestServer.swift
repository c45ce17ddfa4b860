import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// A test setup failure with a message that says what to do.
struct SetupError: Error, CustomStringConvertible {
    let description: String
}

/// Finds a binary built by this package: `$<environment>` if set, else next to the test binary
/// (`.build/debug/`), looking in the ancestors of `CommandLine.arguments[0]` and the current directory.
func builtBinary(_ name: String, environment: String) throws -> String {
    if let path = ProcessInfo.processInfo.environment[environment], !path.isEmpty {
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw SetupError(description: "\(environment)=\(path) is not an executable file")
        }
        return path
    }
    var candidates: [String] = []
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.deletingLastPathComponent()
    for _ in 0..<6 {
        candidates.append(directory.appendingPathComponent(name).path)
        candidates.append(directory.appendingPathComponent(".build/debug/\(name)").path)
        directory = directory.deletingLastPathComponent()
    }
    candidates.append(FileManager.default.currentDirectoryPath + "/.build/debug/\(name)")
    if let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) { return found }
    throw SetupError(description: "cannot find the '\(name)' binary next to the test binary (looked in: "
        + candidates.joined(separator: ", ") + "). Build it first (swift build), or set \(environment) to its path.")
}

/// An `actorkvd` child process with a private temporary directory holding its socket
/// (`/tmp/akc.XXXXXX/s`, short enough for `sun_path`) and its data directory.
final class TestServer {
    let directory: String
    let fsync: String
    /// More `actorkvd` options, e.g. `["--max-clients", "1"]`.
    let arguments: [String]
    private var process: ChildProcess?

    var socketPath: String { directory + "/s" }
    var dataDirectory: String { directory + "/data" }
    var logPath: String { directory + "/actorkvd.log" }

    /// Creates the directory and starts the server; returns once it answers PING.
    init(fsync: String = "everysec", arguments: [String] = []) async throws {
        var template = Array("/tmp/akc.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw SetupError(description: "mkdtemp failed: \(String(cString: strerror(errno)))")
        }
        directory = String(cString: made)
        self.fsync = fsync
        self.arguments = arguments
        do {
            try await start()
        } catch {
            cleanUp()
            throw error
        }
    }

    /// Starts `actorkvd` on the same socket and data directory, and waits until PING answers.
    func start() async throws {
        let executable = try builtBinary("actorkvd", environment: "ACTORKVD")
        let process = try ChildProcess(executable, ["--socket", socketPath, "--data-dir", dataDirectory, "--fsync", fsync] + arguments,
                                       stderr: .file(logPath))
        self.process = process
        let probe = ActorKVClient(socketPath: socketPath)
        for _ in 0..<1000 {
            if (try? await probe.ping()) != nil {
                await probe.close()
                return
            }
            guard process.isRunning else {
                throw SetupError(description: "actorkvd exited (\(process.waitForExit())):\n\(log())")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw SetupError(description: "actorkvd did not answer PING within 10 s:\n\(log())")
    }

    /// The server's log so far.
    func log() -> String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "(no log)"
    }

    /// Sends `signal` to the server. For SIGSTOP, returns once every thread of the server is
    /// stopped (signal delivery is asynchronous); for SIGCONT, at once; otherwise once it has exited.
    func signal(_ signal: Int32) async throws {
        guard let process else { return }
        let pid = process.pid
        kill(pid, signal)
        if signal == SIGCONT { return }
        if signal == SIGSTOP {
            for _ in 0..<1000 {
                if Self.allThreadsStopped(pid) { return }
                try await Task.sleep(for: .milliseconds(5))
            }
            throw SetupError(description: "actorkvd (pid \(pid)) did not stop within 5 s of SIGSTOP")
        }
        // A stopped server must run to act on SIGTERM; and do not wait for ever on a hung one.
        kill(pid, SIGCONT)
        for _ in 0..<2000 where process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        if process.isRunning {
            kill(pid, SIGKILL)
            process.waitForExit()
            self.process = nil
            throw SetupError(description: "actorkvd did not exit within 10 s of signal \(signal); killed it:\n\(log())")
        }
        process.waitForExit()
        self.process = nil
    }

    /// True when every thread in /proc/PID/task is in state T (stopped).
    private static func allThreadsStopped(_ pid: Int32) -> Bool {
        guard let threads = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"),
              !threads.isEmpty else { return false }
        return threads.allSatisfy { thread in
            // /proc/PID/task/TID/stat is "tid (comm) S ...": the state follows the last ')'.
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            let state = stat[stat.index(after: close)...].drop(while: { $0 == " " }).first
            return state == "T" || state == "t"
        }
    }

    /// SIGTERMs the server (a clean shutdown) and removes the directory.
    func stop() async throws {
        defer { cleanUp() }
        try await signal(SIGTERM)
    }

    private func cleanUp() {
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Runs `body` with a fresh server and a client of it; stops the server afterwards, also on failure.
/// `arguments` are more `actorkvd` options.
func withServer(fsync: String = "everysec", arguments: [String] = [],
                _ body: (TestServer, ActorKVClient) async throws -> Void) async throws {
    let server = try await TestServer(fsync: fsync, arguments: arguments)
    let client = ActorKVClient(socketPath: server.socketPath)
    do {
        try await body(server, client)
    } catch {
        await client.close()
        try? await server.stop()
        throw error
    }
    await client.close()
    try await server.stop()
}

extension String {
    /// The UTF-8 bytes.
    var bytes: [UInt8] { Array(utf8) }
}
