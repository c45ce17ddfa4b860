import Synchronization

/// The sessions of the connections open now, for `CLIENT LIST` and `CLIENT KILL`: the event loop
/// adds each when it accepts the connection and removes it when it closes the connection, and
/// closes those that `CLIENT KILL` names when woken.
public final class ClientRegistry: Sendable {
    private struct State {
        var sessions: [UInt64: ClientSession] = [:]
        /// Connections to close, asked by CLIENT KILL and not yet taken by the event loop.
        var kills: [UInt64] = []
        /// Wakes the event loop (set when it starts).
        var wake: (@Sendable () -> Void)?
    }

    private let state = Mutex(State())

    /// An empty registry.
    public init() {}

    /// Adds the session of a connection just accepted.
    func add(_ session: ClientSession) {
        state.withLock { $0.sessions[session.id] = session }
    }

    /// Forgets the session of connection `id`, closed.
    func remove(_ id: UInt64) {
        _ = state.withLock { $0.sessions.removeValue(forKey: id) }
    }

    /// The sessions of the open connections, by id.
    var all: [ClientSession] {
        state.withLock { Array($0.sessions.values) }.sorted { $0.id < $1.id }
    }

    /// Tells the registry how to wake the event loop that closes killed connections.
    func setWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// Asks the event loop to close the connections `ids` (CLIENT KILL), and wakes it. They are
    /// no longer listed from now on, though the loop closes them in its next turn.
    func kill(_ ids: [UInt64]) {
        guard !ids.isEmpty else { return }
        let wake = state.withLock { s in
            for id in ids { s.sessions[id] = nil }
            s.kills += ids
            return s.wake
        }
        wake?()
    }

    /// The connections to close, once (the event loop, when woken).
    func takeKills() -> [UInt64] {
        state.withLock { s in
            defer { s.kills = [] }
            return s.kills
        }
    }
}
