import ActorKVProtocol
import ActorKVTestSupport
import Foundation
#if canImport(Glibc)
import Glibc
#endif

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
        let fd = connectUnixSocket(path)
        guard fd >= 0 else { throw TestFailure("connect \(path): \(String(cString: strerror(errno)))") }
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

    /// Waits (up to `seconds`) until bytes from the server wait in the socket, without reading
    /// them; returns whether they came.
    func waitUntilReadable(seconds: Int32 = 30) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, seconds * 1000) == 1 && entry.revents & Int16(POLLIN) != 0
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

/// Writes key `k` (its value the namespace's name) into each of `namespaces` through a server
/// on `directory`, stops it, then damages the last record of namespace `corrupt`'s first log
/// segment (a flipped byte, and garbage after it): a server started next finds that namespace
/// corrupt. Returns the path of the damaged segment.
func seedWithCorruptNamespace(_ directory: TemporaryDirectory, namespaces: [String], corrupt: String) async throws -> String {
    let first = try await ServerProcess.started(directory: directory)
    try await onOwnThread {
        let c = try RawConnection(path: first.socketPath)
        for name in namespaces {
            guard try c.command(["PUT", name, "k", name]) == .simple("OK") else { throw TestFailure("PUT \(name) k was refused") }
        }
    }
    guard first.stop() == 0 else { throw TestFailure("the first server did not exit 0") }
    let log = directory.data + "/" + corrupt + "/000001.log"
    var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: log)))
    bytes[bytes.count - 3] ^= 0xff
    try Data(bytes + Array(repeating: 0x41, count: 32)).write(to: URL(fileURLWithPath: log))
    return log
}
