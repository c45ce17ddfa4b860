#if canImport(Glibc)
import Glibc
#endif
import CActorKVTestSys
import Synchronization

/// A child process for tests, spawned with `posix_spawn` and reaped with `waitpid`.
///
/// Tests run many children at once from many threads. Foundation's `Process` on Linux funnels
/// every child's exit through one monitor thread, which was seen blocking in `waitpid` on a live
/// child and taking every other `waitUntilExit` down with it. This type has no shared monitor:
/// each child is polled on its own pid, and the child gets only the descriptors it is given.
public final class ChildProcess: @unchecked Sendable {
    /// Where a standard stream of the child goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// A file, created if needed and appended to.
        case file(String)
        /// A pipe the test reads (for output) or writes (for input).
        case pipe
    }

    /// How the child ended.
    public enum Termination: Equatable, Sendable {
        /// It called exit with this status.
        case exited(Int32)
        /// It was killed by this signal.
        case signalled(Int32)
    }

    /// The child's process id.
    public let pid: pid_t
    /// The write end of the child's standard input, if it was `.pipe` (-1 once closed).
    public private(set) var stdinFD: Int32 = -1
    /// The read end of the child's standard output, if it was `.pipe` (-1 once closed).
    public private(set) var stdoutFD: Int32
    /// The read end of the child's standard error, if it was `.pipe`.
    public let stderrFD: Int32
    private let ended = Mutex<Termination?>(nil)

    /// Starts `executable` with `arguments`; `environment` nil means this process's environment.
    /// The child gets the descriptors of `inheriting` as 3, 4, … (and no others past 2).
    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil,
                stdin: Stream = .null, stdout: Stream = .null, stderr: Stream = .null,
                inheriting: [Int32] = []) throws(SpawnError) {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var parentEnds: [Int32] = []
        var childEnds: [Int32] = []
        func route(_ stream: Stream, to target: Int32, childReads: Bool) throws(SpawnError) -> Int32 {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", childReads ? O_RDONLY : O_WRONLY, 0)
                return -1
            case .file(let path):
                let flags = childReads ? O_RDONLY : (O_WRONLY | O_CREAT | O_APPEND)
                posix_spawn_file_actions_addopen(&actions, target, path, flags, 0o644)
                return -1
            case .pipe:
                var fds: [Int32] = [-1, -1]
                guard actorkv_test_pipe_cloexec(&fds) == 0 else { throw SpawnError(what: "pipe2", code: errno) }
                let (childEnd, parentEnd) = childReads ? (fds[0], fds[1]) : (fds[1], fds[0])
                posix_spawn_file_actions_adddup2(&actions, childEnd, target)
                childEnds.append(childEnd)
                parentEnds.append(parentEnd)
                return parentEnd
            }
        }
        let input = try route(stdin, to: 0, childReads: true)
        stdoutFD = try route(stdout, to: 1, childReads: false)
        stderrFD = try route(stderr, to: 2, childReads: false)
        for (i, fd) in inheriting.enumerated() { posix_spawn_file_actions_adddup2(&actions, fd, 3 + Int32(i)) }
        actorkv_test_spawn_close_from(&actions, 3 + Int32(inheriting.count))
        defer { for fd in childEnds { close(fd) } }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t(), empty = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        let envStrings = (environment ?? Self.currentEnvironment()).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for p in envStrings { free(p) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envStrings)
        guard rc == 0 else {
            for fd in parentEnds { close(fd) }
            throw SpawnError(what: "posix_spawn \(executable)", code: rc)
        }
        pid = child
        stdinFD = input
    }

    deinit {
        if isRunning {
            kill(pid, SIGKILL)
            _ = waitForExit()
        }
        for fd in [stdinFD, stdoutFD, stderrFD] where fd >= 0 { close(fd) }
    }

    /// Whether the child has not yet ended (reaps it if it has).
    public var isRunning: Bool { poll() == nil }

    /// How the child ended, or nil while it runs.
    public var termination: Termination? { poll() }

    /// Sends a signal to the child (nothing happens once it has been reaped).
    public func signal(_ number: Int32) {
        if isRunning { kill(pid, number) }
    }

    /// Waits until the child ends, polling its pid; safe to call from several threads.
    @discardableResult
    public func waitForExit() -> Termination {
        var pause: UInt32 = 500
        while true {
            if let ended = poll() { return ended }
            usleep(pause)
            pause = min(pause * 2, 10_000)
        }
    }

    /// The exit status, or the signal number if the child was killed (like Foundation's
    /// `terminationStatus`); waits for the exit.
    public var status: Int32 {
        switch waitForExit() {
        case .exited(let code): return code
        case .signalled(let number): return number
        }
    }

    /// Writes all of `bytes` to the child's standard input.
    public func writeInput(_ bytes: [UInt8]) {
        var done = 0
        while done < bytes.count && stdinFD >= 0 {
            let n = bytes.withUnsafeBytes { write(stdinFD, $0.baseAddress! + done, bytes.count - done) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            done += n
        }
    }

    /// Closes the child's standard input, so it sees end of file.
    public func closeInput() {
        if stdinFD >= 0 { close(stdinFD) }
        stdinFD = -1
    }

    /// Closes the read end of the child's standard output, as a reader that has gone does (its
    /// next write fails with EPIPE). Only through here: a descriptor closed behind this object's
    /// back would be closed again at deinit, by then perhaps another test's.
    public func closeOutput() {
        if stdoutFD >= 0 { close(stdoutFD) }
        stdoutFD = -1
    }

    /// Reads the child's piped standard output and error to their ends, both at once so neither
    /// pipe can fill up and stall the child.
    public func readOutputs() -> (stdout: [UInt8], stderr: [UInt8]) {
        var out: [UInt8] = [], err: [UInt8] = []
        var open = [stdoutFD, stderrFD].filter { $0 >= 0 }
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            guard Glibc.poll(&fds, nfds_t(fds.count), -1) >= 0 || errno == EINTR else { break }
            for entry in fds where entry.revents != 0 {
                let n = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { open.removeAll { $0 == entry.fd }; continue }
                if entry.fd == stdoutFD { out += buffer[0..<n] } else { err += buffer[0..<n] }
            }
        }
        return (out, err)
    }

    /// Reaps the child without blocking; the result is kept, so any thread may ask again.
    private func poll() -> Termination? {
        ended.withLock { ended in
            if let ended { return ended }
            var raw: Int32 = 0
            let rc = waitpid(pid, &raw, WNOHANG)
            guard rc == pid else { return nil }
            let signal = raw & 0x7f
            ended = signal == 0 ? .exited((raw >> 8) & 0xff) : .signalled(signal)
            return ended
        }
    }

    private static func currentEnvironment() -> [String: String] {
        var result: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let eq = text.firstIndex(of: "=") {
                result[String(text[..<eq])] = String(text[text.index(after: eq)...])
            }
            entry += 1
        }
        return result
    }
}

/// A child process could not be started.
public struct SpawnError: Error, CustomStringConvertible, Sendable {
    /// The call that failed.
    public let what: String
    /// Its errno.
    public let code: Int32
    /// What failed and why.
    public var description: String { "\(what): \(String(cString: strerror(code)))" }
}

/// Runs a shell command and returns its exit status (127 if the shell could not be started).
public func runShell(_ command: String) -> Int32 {
    guard let child = try? ChildProcess("/bin/sh", ["-c", command]) else { return 127 }
    return child.status
}
