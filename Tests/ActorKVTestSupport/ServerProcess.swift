import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A real `actorkvd` child process serving `<directory>/s.sock`, its data in `<directory>/data`,
/// its standard error in a log file of its own in the same directory.
///
/// Two ways to start one, both returning once the server answers PING or refuses this process
/// with `-NOPERM connection refused: …` (an `--allow-uid` that leaves it out), and throwing,
/// with its log, if it exits first or does not answer within 30 s:
/// - `ServerProcess(...)` waits blocking this thread: for test bodies that block anyway and run
///   on a thread of their own (``onOwnThread(_:)``);
/// - `await ServerProcess.started(...)` waits suspended, holding no thread: for async tests.
///
/// With a `user` (``ServerUser``), the server runs as that user rather than as this process's,
/// so that this process is an ordinary client of it (the server's own uid has every right
/// under `--acl` and is always let in by `--allow-uid`).
public final class ServerProcess: Sendable {
    /// The directory holding the socket, the data and the log.
    public let directory: TemporaryDirectory
    /// The server's Unix socket.
    public let socketPath: String
    /// The server's data directory (unless `arguments` name another with `--data-dir`).
    public let dataPath: String
    /// Where the server's standard error goes (appended to by a ``restart()``).
    public let logPath: String
    /// The `actorkvd` options given after `--socket` and `--data-dir`.
    public let arguments: [String]
    /// Whom the server runs as; nil: as this process.
    public let user: ServerUser?
    /// The open files limit (soft and hard) the server starts under; nil: this process's.
    public let openFiles: Int?
    private let environment: [String: String]?
    private let current: Mutex<ChildProcess>

    /// How long a start may take before it counts as failed (a full parallel test run on a
    /// 2-core machine can take seconds).
    public static let startTimeout: Duration = .seconds(30)

    /// Whether a server's resident memory (``residentKiB()``) measures what the server holds:
    /// not when the servers are built with a sanitizer (`$ACTORKV_SANITIZER`, which
    /// `Tests/sanitizers/run.sh` sets), whose shadow memory and quarantine of freed blocks count
    /// in it too. Tests check their memory bounds only when it does.
    public static let residentMemoryIsMeaningful = (ProcessInfo.processInfo.environment["ACTORKV_SANITIZER"] ?? "").isEmpty

    /// The `actorkvd` executable: `$ACTORKVD`, or the one built next to the tests (``builtBinary(_:environment:)``).
    public static func executable() throws -> String { try builtBinary("actorkvd", environment: "ACTORKVD") }

    /// Starts `actorkvd` with more `arguments` (e.g. `["--fsync", "always"]`) and waits, blocking
    /// this thread, until it answers PING. `environment` nil means this process's environment.
    /// With a `user`, the server runs as that user (see ``ServerUser``), and `directory` is
    /// handed to it.
    public convenience init(directory: TemporaryDirectory = TemporaryDirectory("srv"), arguments: [String] = [],
                            environment: [String: String]? = nil, user: ServerUser? = nil) throws {
        try self.init(spawningIn: directory, arguments: arguments, environment: environment, user: user, openFiles: nil)
        let deadline = ContinuousClock.now + Self.startTimeout
        var probe: PingProbe?
        while try !isReady(&probe, deadline: deadline) { usleep(10_000) }
    }

    /// Starts `actorkvd` like ``init(directory:arguments:environment:user:)``, but waits for it
    /// suspended rather than blocking a thread. With `openFiles`, the server (not run as another
    /// `user`) starts under that open files limit, soft and hard (through prlimit(1)).
    public static func started(directory: TemporaryDirectory = TemporaryDirectory("srv"), arguments: [String] = [],
                               environment: [String: String]? = nil, user: ServerUser? = nil,
                               openFiles: Int? = nil) async throws -> ServerProcess {
        let server = try ServerProcess(spawningIn: directory, arguments: arguments, environment: environment, user: user,
                                       openFiles: openFiles)
        try await server.waitUntilReady()
        return server
    }

    private init(spawningIn directory: TemporaryDirectory, arguments: [String], environment: [String: String]?,
                 user: ServerUser?, openFiles: Int?) throws {
        if let user {
            // The server creates its socket and data directory here: the directory must be its
            // own (actorkvd refuses a socket directory or data directory another user owns).
            guard chown(directory.path, user.uid, user.gid) == 0, chmod(directory.path, 0o755) == 0 else {
                throw TestFailure("cannot hand \(directory.path) to uid \(user.uid): \(String(cString: strerror(errno)))")
            }
        }
        self.directory = directory
        socketPath = directory.path + "/s.sock"
        dataPath = directory.data
        // A log of its own: several servers in turn may use one directory.
        logPath = directory.path + "/actorkvd-\(UInt32.random(in: 0...UInt32.max)).log"
        self.arguments = arguments
        self.environment = environment
        self.user = user
        self.openFiles = openFiles
        current = Mutex(try Self.spawn(socketPath: socketPath, dataPath: dataPath, arguments: arguments,
                                       environment: environment, user: user, openFiles: openFiles, logPath: logPath))
    }

    private static func spawn(socketPath: String, dataPath: String, arguments: [String],
                              environment: [String: String]?, user: ServerUser?, openFiles: Int?,
                              logPath: String) throws -> ChildProcess {
        let command = [try executable(), "--socket", socketPath, "--data-dir", dataPath] + arguments
        if let openFiles {
            // prlimit executes actorkvd in its own process, the limit set: the pid is the server's.
            return try ChildProcess("/usr/bin/prlimit", ["--nofile=\(openFiles):\(openFiles)", "--"] + command,
                                    environment: environment, stderr: .file(logPath))
        }
        guard let user else {
            return try ChildProcess(command[0], Array(command.dropFirst()), environment: environment, stderr: .file(logPath))
        }
        // setpriv executes actorkvd in its own process: the pid is the server's.
        return try ChildProcess(ServerUser.setpriv, ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups"] + command,
                                environment: environment, stderr: .file(logPath))
    }

    /// The server's child process (the one started last).
    public var process: ChildProcess { current.withLock { $0 } }

    /// The server's process id.
    public var pid: Int32 { process.pid }

    /// The server's log (its standard error) so far.
    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Starts the server again, on the same socket, data directory and options, once the last
    /// one has exited (``signal(_:)`` with SIGKILL, say); returns once it answers PING.
    public func restart() async throws {
        guard !process.isRunning else { throw TestFailure("restart: actorkvd (pid \(pid)) is still running") }
        let next = try Self.spawn(socketPath: socketPath, dataPath: dataPath, arguments: arguments,
                                  environment: environment, user: user, openFiles: openFiles, logPath: logPath)
        current.withLock { $0 = next }
        try await waitUntilReady()
    }

    /// Waits, suspended, until the server answers PING.
    private func waitUntilReady() async throws {
        let deadline = ContinuousClock.now + Self.startTimeout
        var probe: PingProbe?
        while try !isReady(&probe, deadline: deadline) { try await Task.sleep(for: .milliseconds(10)) }
    }

    /// One look, without blocking, at whether the server answers PING: sends one through a new
    /// `probe` if there is none, reads its answer if it has come. Throws if the server has exited
    /// or `deadline` has passed.
    private func isReady(_ probe: inout PingProbe?, deadline: ContinuousClock.Instant) throws -> Bool {
        if probe == nil { probe = PingProbe(socketPath: socketPath) }
        switch probe?.answer() {
        case .pong?, .refused?: return true
        case .failed?: probe = nil
        case .pending?, nil: break
        }
        let process = self.process
        if let ended = process.termination { throw TestFailure("actorkvd exited early (\(ended)): \(log)") }
        if ContinuousClock.now >= deadline {
            throw TestFailure("actorkvd did not answer PING within \(Self.startTimeout): \(log)")
        }
        return false
    }

    /// Sends `signal` and waits, blocking this thread, for the exit; returns the exit status (the
    /// signal's number for a kill).
    @discardableResult
    public func stop(signal: Int32 = SIGTERM) -> Int32 {
        let process = self.process
        process.signal(signal)
        return process.status
    }

    /// Sends `signal`, waiting suspended for its effect: for SIGSTOP, returns once every thread
    /// of the server is stopped (delivery is asynchronous); for SIGCONT, at once; for any other
    /// signal, once the server has exited. A stopped server is continued so that it can act on
    /// the signal; one that has not exited 10 s later is killed and this throws. Nothing happens
    /// if the server has exited already.
    public func signal(_ signal: Int32) async throws {
        let process = self.process
        guard process.isRunning else { return }
        let pid = process.pid
        process.signal(signal)
        if signal == SIGCONT { return }
        if signal == SIGSTOP {
            for _ in 0..<1000 {
                if Self.allThreadsStopped(pid) { return }
                try await Task.sleep(for: .milliseconds(5))
            }
            throw TestFailure("actorkvd (pid \(pid)) did not stop within 5 s of SIGSTOP")
        }
        process.signal(SIGCONT)
        for _ in 0..<2000 where process.isRunning { try await Task.sleep(for: .milliseconds(5)) }
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitForExit()
            throw TestFailure("actorkvd did not exit within 10 s of signal \(signal); killed it:\n\(log)")
        }
    }

    /// Whether every thread in /proc/PID/task is in state T (stopped).
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

    /// The server's resident memory in KiB (VmRSS), or -1 if it cannot be read.
    public func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return -1 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        return -1
    }
}

/// A user a ``ServerProcess`` runs as instead of this process's, started through `setpriv`
/// (util-linux) with that uid and gid and no supplementary groups. Only root may do that:
/// check ``canRunServers`` first (tests that need it are skipped otherwise).
public struct ServerUser: Sendable, Equatable {
    /// The server's uid.
    public var uid: UInt32
    /// The server's gid (its only group).
    public var gid: UInt32

    /// A user with this uid and gid.
    public init(uid: UInt32, gid: UInt32) {
        self.uid = uid
        self.gid = gid
    }

    /// `nobody` (65534:65534), which every Linux system has.
    public static let nobody = ServerUser(uid: 65534, gid: 65534)

    /// The program that switches user.
    static let setpriv = "/usr/bin/setpriv"

    /// Whether servers can be started as another user here: this process is root and `setpriv`
    /// is installed.
    public static var canRunServers: Bool { getuid() == 0 && access(setpriv, X_OK) == 0 }
}

/// A PING sent to a server's socket over a non-blocking connection, whose answer is looked for
/// without ever waiting: neither connecting nor reading blocks the thread.
final class PingProbe {
    /// What the server has answered so far: `refused` is a server up and running that does not
    /// let this process in (`-NOPERM connection refused: …`, its `--allow-uid` leaves this uid
    /// out), which is as ready as it will get.
    enum Answer { case pong, refused, pending, failed }

    private let fd: Int32
    private var received: [UInt8] = []
    private static let pong = Array("+PONG\r\n".utf8)
    private static let refusal = Array("-NOPERM connection refused: ".utf8)

    /// Connects and sends PING; nil if the socket does not take connections (yet).
    init?(socketPath: String) {
        fd = connectUnixSocket(socketPath, nonBlocking: true)
        guard fd >= 0 else { return nil }
        let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
        let sent = ping.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == ping.count else {
            close(fd)
            return nil
        }
    }

    deinit { close(fd) }

    /// Reads what has arrived: `pong` once the whole answer is PONG, `refused` once a whole
    /// line of refusal has come, `failed` for any other answer or a closed connection, `pending`
    /// while it is incomplete.
    func answer() -> Answer {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? .pending : .failed }
        if n == 0 { return .failed }
        received += buffer[0..<n]
        if received == Self.pong { return .pong }
        if received.starts(with: Self.refusal) { return received.last == 0x0A ? .refused : .pending }
        return Self.pong.starts(with: received) || Self.refusal.starts(with: received) ? .pending : .failed
    }
}

/// A `sockaddr_un` for `path`, which must fit (at most 107 bytes).
public func unixSocketAddress(_ path: String) -> sockaddr_un {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    precondition(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    return address
}

/// Connects a new stream socket (close-on-exec; non-blocking if asked, so that a full accept
/// queue fails with EAGAIN instead of waiting) to the Unix socket at `path`. Returns the
/// descriptor, or -1 with `errno` saying why (ENAMETOOLONG for a path that does not fit).
public func connectUnixSocket(_ path: String, nonBlocking: Bool = false) -> Int32 {
    guard path.utf8.count < MemoryLayout<sockaddr_un>.size - MemoryLayout<sa_family_t>.size else {
        errno = ENAMETOOLONG
        return -1
    }
    let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0)
    let fd = socket(AF_UNIX, flags, 0)
    guard fd >= 0 else { return -1 }
    var address = unixSocketAddress(path)
    let rc = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
    }
    guard rc == 0 else {
        let code = errno
        close(fd)
        errno = code
        return -1
    }
    return fd
}
