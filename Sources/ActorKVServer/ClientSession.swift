import Synchronization

/// One client connection's state beyond its bytes: who is connected and what it asked for.
///
/// Created when the event loop accepts the connection and owned by it; commands reach it through
/// their ``CommandContext``. When the connection ends — QUIT, the peer closing or dying, a socket
/// error, a framing error, server shutdown — the loop hands it to
/// ``CommandProcessor/endSession(_:reason:)`` exactly once, after the last of its commands has
/// finished. Whatever a session owns is released there: later features keep their
/// per-connection state here (the RESP protocol version, a MULTI queue and watched namespaces,
/// followed change feeds, owned ephemeral keys), so that one hook undoes all of it.
public final class ClientSession: Sendable {
    /// The connection's id, unique for the server's life (CLIENT ID).
    public let id: UInt64
    /// The peer's credentials as the kernel gave them on accept (nil if they could not be read).
    public let peer: PeerCredentials?

    private struct State {
        var name: String?
        var closeRequested = false
    }

    private let state = Mutex(State())

    /// A session for connection `id` from `peer`.
    public init(id: UInt64, peer: PeerCredentials?) {
        self.id = id
        self.peer = peer
    }

    /// The name the client gave itself (CLIENT SETNAME), if any.
    public var name: String? {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    /// Whether the client asked to close (QUIT): nothing it sent after that runs.
    public var closeRequested: Bool { state.withLock { $0.closeRequested } }

    /// Marks the session as closing after the reply being made (QUIT).
    func requestClose() { state.withLock { $0.closeRequested = true } }
}

/// A peer's identity as the kernel reports it for a Unix socket (`SO_PEERCRED`): the process
/// that connected, as it was when it connected.
public struct PeerCredentials: Sendable, Equatable {
    /// Its user id.
    public let uid: UInt32
    /// Its primary group id.
    public let gid: UInt32
    /// Its process id.
    public let pid: Int32

    /// Credentials of these ids.
    public init(uid: UInt32, gid: UInt32, pid: Int32) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
    }
}

/// How a connection ended, as the event loop saw it.
public enum SessionEnd: String, Sendable, Equatable, CaseIterable {
    /// The client sent QUIT.
    case quit
    /// The peer closed its end (it exited, was killed, or closed the socket) with nothing left
    /// to answer.
    case peerClosed
    /// Reading or writing the socket failed (the peer reset it, say).
    case socketError
    /// The client sent bytes that are not the protocol; the server closed after saying so.
    case protocolError
    /// The server shut down.
    case shutdown
}
