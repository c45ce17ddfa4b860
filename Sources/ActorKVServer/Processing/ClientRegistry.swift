import Synchronization

/// The sessions of the connections open now, for `CLIENT LIST`: the event loop adds each when it
/// accepts the connection and removes it when it closes the connection.
public final class ClientRegistry: Sendable {
    private let sessions = Mutex<[UInt64: ClientSession]>([:])

    /// An empty registry.
    public init() {}

    /// Adds the session of a connection just accepted.
    func add(_ session: ClientSession) {
        sessions.withLock { $0[session.id] = session }
    }

    /// Forgets the session of connection `id`, closed.
    func remove(_ id: UInt64) {
        _ = sessions.withLock { $0.removeValue(forKey: id) }
    }

    /// The sessions of the open connections, by id.
    var all: [ClientSession] {
        sessions.withLock { Array($0.values) }.sorted { $0.id < $1.id }
    }
}
