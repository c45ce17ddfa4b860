import ActorKVProtocol
import Synchronization

/// A shutdown asked for by a client (`SHUTDOWN`), and the connections that asked, held open
/// until the server has shut down: as with Redis, whose process exits, the asker's connection
/// ends only once everything is durable, so that `redis-cli shutdown && actorkvd …` finds the
/// socket and the data directory free.
///
/// The command records the request and wakes the event loop, which then stops as on SIGTERM;
/// when the loop closes an asker's connection it hands the socket here instead
/// (``hold(_:of:)``); the server, once the store is closed, answers them (``finish(failure:)``).
public final class ShutdownRequest: Sendable {
    private struct State {
        /// Who asked first, for the log (`SHUTDOWN from connection 7, uid 1000, pid 42`).
        var asker: String?
        /// The connections that asked (their sessions' ids).
        var askers: Set<UInt64> = []
        /// The askers' sockets, taken from the event loop as it closed them.
        var held: [Int32] = []
        /// Wakes the event loop (set when it starts).
        var wake: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())
    /// Set once a client asked: read by the event loop on every turn, so an atomic, not the lock.
    private let asked = Atomic<Bool>(false)

    /// No shutdown asked for yet.
    public init() {}

    /// Whether a client asked the server to shut down.
    public var isRequested: Bool { asked.load(ordering: .acquiring) }

    /// Who asked first (nil if nobody did).
    public var asker: String? { state.withLock { $0.asker } }

    /// Tells the request how to wake the event loop.
    func setWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// Asks for a shutdown on behalf of connection `id`, described as `who`, and wakes the loop.
    func request(by id: UInt64, who: String) {
        let wake = state.withLock { s in
            if s.asker == nil { s.asker = who }
            s.askers.insert(id)
            return s.wake
        }
        asked.store(true, ordering: .releasing)
        wake?()
    }

    /// Takes the socket `fd` of connection `id` if that connection asked for the shutdown
    /// (true: it is held, and closed by ``finish(failure:)``); false: the caller closes it.
    func hold(_ fd: Int32, of id: UInt64) -> Bool {
        state.withLock { s in
            guard s.askers.contains(id) else { return false }
            s.held.append(fd)
            return true
        }
    }

    /// Ends the askers' connections once the server has shut down: closed with no reply, as
    /// Redis's are when its process exits, or, when the shutdown could not make everything
    /// durable, after `failure` as an error reply (`IOERR …`), which the asker reads as the
    /// reply to its SHUTDOWN.
    public func finish(failure: String? = nil) {
        let fds = state.withLock { s in
            defer { s.held = [] }
            return s.held
        }
        for fd in fds {
            if let failure {
                var bytes: [UInt8] = []
                Reply.error(failure).encode(into: &bytes)
                // A few bytes into an empty socket buffer: one write, whatever it manages.
                _ = bytes.withUnsafeBytes { try? SocketCalls.send(fd, $0) }
            }
            SocketCalls.close(fd)
        }
    }
}
