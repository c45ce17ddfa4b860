#if canImport(Glibc)
import Glibc
#endif
import CActorKVSys

/// The server's door to socket and epoll syscalls, each retried on EINTR, failures as ``Errno``-style codes.
enum SocketCalls {
    /// A socket syscall failure: what was attempted and the errno.
    struct Failure: Error, CustomStringConvertible {
        let what: String
        let code: Int32
        var description: String { "\(what): \(String(cString: strerror(code)))" }
    }

    /// Builds a `sockaddr_un` for `path`; nil if the path does not fit (107 bytes on Linux).
    static func address(_ path: String) -> sockaddr_un? {
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return addr
    }

    /// A new Unix stream socket, non-blocking and close-on-exec.
    static func socket() throws(Failure) -> Int32 {
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(what: "socket", code: errno) }
        return fd
    }

    /// Binds and listens.
    static func listen(_ fd: Int32, path: String, backlog: Int32) throws(Failure) {
        guard var addr = address(path) else { throw Failure(what: "socket path too long", code: ENAMETOOLONG) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw Failure(what: "bind \(path)", code: errno) }
        guard Glibc.listen(fd, backlog) == 0 else { throw Failure(what: "listen", code: errno) }
    }

    /// What a connect attempt found at a socket path.
    enum Probe: Equatable {
        /// A server accepted the connection, or its backlog is full (EAGAIN): it is alive.
        case listening
        /// Nobody listens (ECONNREFUSED): a socket file left by a process that is gone.
        case stale
        /// Nothing at the path any more (ENOENT).
        case absent
        /// The attempt failed otherwise (EACCES, …): whether a server is there cannot be told.
        case unknown(Int32)
    }

    /// Tries to connect to `path` without blocking and says what answered.
    static func probe(_ path: String) -> Probe {
        guard var addr = address(path) else { return .unknown(ENAMETOOLONG) }
        let fd = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .unknown(errno) }
        defer { Glibc.close(fd) }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        if rc == 0 { return .listening }
        switch errno {
        case EAGAIN, EINPROGRESS: return .listening
        case ECONNREFUSED: return .stale
        case ENOENT: return .absent
        case let code: return .unknown(code)
        }
    }

    /// The device and inode of the file at `path` (not following a symlink); nil if there is none.
    static func identity(_ path: String) -> (device: UInt64, inode: UInt64)? {
        var st = stat()
        guard fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }

    /// Accepts one connection (non-blocking); nil when none is waiting.
    static func accept(_ listener: Int32) throws(Failure) -> Int32? {
        while true {
            let fd = actorkv_accept(listener)
            if fd >= 0 { return fd }
            switch errno {
            case EINTR, ECONNABORTED: continue
            case EAGAIN: return nil
            default: throw Failure(what: "accept", code: errno)
            }
        }
    }

    /// Reads into `buffer`: the count read, 0 at end of stream, nil when nothing is available.
    /// With `peeking`, the bytes stay in the socket (`MSG_PEEK`) until a read takes them: the
    /// sender's buffer room is not given back, so a sender asleep in a blocking read is not
    /// woken by it (see `EventLoop`'s `readChunk`).
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, peeking: Bool = false) throws(Failure) -> Int? {
        while true {
            let n = peeking ? Glibc.recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
                            : Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return n }
            switch errno {
            case EINTR: continue
            case EAGAIN: return nil
            default: throw Failure(what: peeking ? "recv" : "read", code: errno)
            }
        }
    }

    /// Sends what it can of `bytes`: the count sent (0 when the socket is full).
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(Failure) -> Int {
        while true {
            let n = Glibc.send(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
            if n >= 0 { return n }
            switch errno {
            case EINTR: continue
            case EAGAIN: return 0
            default: throw Failure(what: "send", code: errno)
            }
        }
    }

    /// The uid and gid of the process on the other end of a Unix socket.
    static func peerCredentials(_ fd: Int32) -> (uid: UInt32, gid: UInt32, pid: Int32)? {
        var uid: UInt32 = 0, gid: UInt32 = 0, pid: Int32 = 0
        guard actorkv_peer_credentials(fd, &uid, &gid, &pid) == 0 else { return nil }
        return (uid, gid, pid)
    }

    /// The supplementary groups of a connected Unix socket's peer; nil if they cannot be read.
    static func peerGroups(_ fd: Int32) -> [UInt32]? {
        var capacity = 64
        while true {
            var groups = [UInt32](repeating: 0, count: capacity)
            var needed: Int32 = 0
            let n = groups.withUnsafeMutableBufferPointer { actorkv_peer_groups(fd, $0.baseAddress, Int32(capacity), &needed) }
            if n >= 0 { return Array(groups.prefix(Int(n))) }
            guard errno == ERANGE, Int(needed) > capacity else { return nil }
            capacity = Int(needed)
        }
    }

    /// Closes a descriptor.
    static func close(_ fd: Int32) { _ = Glibc.close(fd) }

    /// Half-closes: the peer reads end of file after what was sent; reading continues.
    static func shutdownWrite(_ fd: Int32) { _ = Glibc.shutdown(fd, Int32(SHUT_WR)) }

    /// A descriptor on /dev/null held in reserve, to be closed when one is needed; -1 if none
    /// could be opened.
    static func openReserve() -> Int32 { Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC) }

    /// Opens up to `count` descriptors held in reserve (``openReserve()``) until ``release(_:)``.
    static func reserveDescriptors(_ count: Int) -> [Int32] {
        (0..<count).map { _ in openReserve() }.filter { $0 >= 0 }
    }

    /// Closes descriptors held in reserve.
    static func release(_ reserve: [Int32]) {
        for fd in reserve { close(fd) }
    }

    /// Raises the soft open-files limit to at least `wanted` (up to the hard limit); returns the result.
    static func raiseOpenFileLimit(to wanted: Int) -> Int {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0 else { return 0 }
        if limit.rlim_cur < rlim_t(wanted) {
            limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
            _ = setrlimit(resource, &limit)
            _ = getrlimit(resource, &limit)
        }
        return Int(limit.rlim_cur)
    }
}
