#if canImport(Glibc)
import Glibc
#endif
import ActorKVProtocol
import ActorKVStore
import CActorKVSys
import Synchronization

/// The event loop's lingering close: a socket the server is done with is half-closed and read
/// (and its input dropped) until the client closes, so that the client reads the last reply.
extension EventLoop {
    /// Half-closes a socket the server is done with and keeps reading (and dropping) what the
    /// client still sends, until it closes or ``lingerSeconds`` pass. Closing at once with unread
    /// input would make the client's next write fail (EPIPE) before it reads the last reply,
    /// such as `-MAXCLIENTS`, `-NOPERM` or a framing error: `nc -N` would print nothing.
    func linger(_ fd: Int32, id: UInt64) {
        SocketCalls.shutdownWrite(fd)
        let events = ACTORKV_EPOLLIN | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLET
        guard !draining, lingering.count < lingeringLimit,
              actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, fd, events, id) == 0 else {
            SocketCalls.close(fd)
            return
        }
        lingering[id] = (fd, monotonicSeconds() + Self.lingerSeconds)
        discardInput(id)
    }

    /// Reads and drops a lingering socket's input; closes it at end of file or on an error.
    func discardInput(_ id: UInt64) {
        guard let entry = lingering[id] else { return }
        while true {
            let result: Int?
            do {
                result = try readBuffer.withUnsafeMutableBytes { (raw) throws(SocketCalls.Failure) in
                    try SocketCalls.read(entry.fd, into: raw)
                }
            } catch {
                result = 0
            }
            guard let n = result else { return }
            if n == 0 {
                lingering[id] = nil
                SocketCalls.close(entry.fd)
                return
            }
        }
    }

    /// Closes lingering sockets past their deadline (all of them with `force`).
    func expireLingering(force: Bool) {
        guard !lingering.isEmpty else { return }
        let now = monotonicSeconds()
        for (id, entry) in lingering where force || entry.deadline < now {
            lingering[id] = nil
            SocketCalls.close(entry.fd)
        }
    }
}
