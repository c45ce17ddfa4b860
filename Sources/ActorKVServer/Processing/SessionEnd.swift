import ActorKVProtocol
import ActorKVStore
import Synchronization

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
    /// The connection followed changes and fell further behind than the server holds them
    /// (`-LAGGING`).
    case lagging
    /// The connection followed changes of a namespace it may no longer read after the
    /// permissions were reloaded (`-NOPERM`).
    case accessWithdrawn
    /// `CLIENT KILL` from another connection closed it (or this one, with `SKIPME no`).
    case killed
}
