import ActorKVProtocol
import ActorKVTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A temporary directory removed when the value is deinitialised. Short paths (under /tmp) so
/// socket paths stay under the 107-byte limit.
final class TemporaryDirectory: @unchecked Sendable {
    let path: String

    init() {
        var template = Array("/tmp/akv-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}

/// Where the built executables are: next to the test bundle, or $ACTORKVD.
enum BuiltProducts {
    static var directory: String {
        var url = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        for _ in 0..<6 {
            url.deleteLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: url.appendingPathComponent("actorkvd").path) { return url.path }
        }
        let fallback = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/debug").path
        return fallback
    }

    static var actorkvd: String {
        if let env = ProcessInfo.processInfo.environment["ACTORKVD"] { return env }
        return directory + "/actorkvd"
    }
}

/// A real `actorkvd` child process in a temp directory.
final class ServerProcess: @unchecked Sendable {
    let directory: TemporaryDirectory
    let socketPath: String
    let dataPath: String
    let process: ChildProcess
    let stderrPath: String

    /// Starts the server with extra flags and waits until it answers PING.
    /// `environment` nil means this process's environment.
    init(directory: TemporaryDirectory = TemporaryDirectory(), arguments: [String] = [], environment: [String: String]? = nil) throws {
        self.directory = directory
        socketPath = directory.path + "/s.sock"
        dataPath = directory.path + "/data"
        stderrPath = directory.path + "/stderr-\(UInt32.random(in: 0...UInt32.max)).log"
        process = try ChildProcess(BuiltProducts.actorkvd, ["--socket", socketPath, "--data-dir", dataPath] + arguments,
                                   environment: environment, stderr: .file(stderrPath))
        try waitUntilReady()
    }

    private func waitUntilReady() throws {
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if let c = try? RawConnection(path: socketPath), (try? c.command(["PING"])) == .simple("PONG") { return }
            if !process.isRunning { throw TestFailure("actorkvd exited early: \(log)") }
            usleep(20_000)
        }
        throw TestFailure("actorkvd did not answer PING within 30 s: \(log)")
    }

    var log: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }
    var pid: Int32 { process.pid }

    /// Sends `signal` and waits for the exit; returns the exit status (or the signal for kills).
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        process.signal(signal)
        return process.status
    }

    /// Resident memory of the server in KiB (VmRSS).
    func residentKiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return -1 }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        return -1
    }

}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A blocking Unix-socket connection with a receive timeout, speaking raw bytes and RESP replies.
final class RawConnection {
    let fd: Int32
    private var decoder = ReplyDecoder()

    init(path: String, timeoutSeconds: Int = 30) throws {
        // Connect before `fd` is stored: a throwing class init with every property set still
        // runs deinit, which would close the descriptor a second time (by then possibly another
        // thread's file).
        fd = try Self.connect(path)
        var tv = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    private static func connect(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(errno)") }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else {
            let code = errno
            close(fd)
            throw TestFailure("connect \(path): \(String(cString: strerror(code)))")
        }
        return fd
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + done, bytes.count - done, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send: \(String(cString: strerror(errno)))") }
            done += n
        }
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads the next reply; throws on timeout or when the server closed the connection.
    func reply() throws -> Reply {
        while true {
            if let r = try decoder.next() { return r }
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { throw TestFailure("connection closed by server") }
            if n < 0 { throw TestFailure("recv: \(String(cString: strerror(errno)))") }
            decoder.append(Array(buffer[0..<n]))
        }
    }

    /// True if the server closes the connection (after any pending replies) within the timeout.
    func isClosedByServer() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    /// Sends one multibulk command and returns its reply.
    func command(_ arguments: [String]) throws -> Reply {
        var out: [UInt8] = []
        RequestEncoder.encode(arguments, into: &out)
        try send(out)
        return try reply()
    }

    func command(_ arguments: [[UInt8]]) throws -> Reply {
        var out: [UInt8] = []
        RequestEncoder.encode(arguments, into: &out)
        try send(out)
        return try reply()
    }
}

extension Reply {
    static func bulk(_ text: String) -> Reply { .bulk(Array(text.utf8)) }

    /// The error code of an error reply.
    var errorCode: String? {
        if case .error(let text) = self { return String(text.split(separator: " ").first ?? "") }
        return nil
    }
}
