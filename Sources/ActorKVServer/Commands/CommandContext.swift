import ActorKVProtocol
import ActorKVStore

/// What a ``LocalCommand`` may use: the store, the connection's session, and the server's facts.
struct CommandContext: Sendable {
    /// Where the data is: the local store or an etcd cluster.
    let backend: any DataBackend
    /// The connection the command came on.
    let session: ClientSession
    /// Renders the INFO text, with the lines of the namespaces the predicate accepts.
    let info: @Sendable (_ shows: @Sendable (String) -> Bool) async -> [UInt8]
    /// What CONFIG GET answers (Redis's parameter names and this server's values).
    var settings: [(name: String, value: String)] = []
    /// The server's HSCAN cursors, shared by every connection.
    let hashScanCursors: HashScanCursors
    /// The sessions of the open connections (CLIENT LIST).
    let clients: ClientRegistry
    /// Where SHUTDOWN asks the server to stop.
    let shutdown: ShutdownRequest
    /// The namespace permissions (nil: every right for everyone).
    var access: AccessControl?
    /// The event loop's executor when the command runs in a task that prefers it (nil
    /// otherwise): on its thread, runs on a namespace need no actor hop (``execute(_:inNamespace:)``).
    var loop: LoopExecutor?

    /// Runs `operations` on namespace `name`, at once when the command runs on ``loop``'s thread.
    func execute(_ operations: [Operation], inNamespace name: String) async -> Execution {
        await backend.execute(operations, inNamespace: name, on: loop)
    }

    /// The connection's identity when its commands are judged (nil: it has every right: no
    /// `--acl`, the server's own uid, or a session without a peer).
    var judgedPeer: PeerIdentity? {
        guard let access, let peer = session.peer?.identity, !access.isOwner(peer) else { return nil }
        return peer
    }

    /// `NOPERM` unless the connection holds `needed` on `namespace` under the rules in force now.
    func refusal(needing needed: AccessRights, on namespace: String) -> CommandError? {
        guard let access, let peer = judgedPeer else { return nil }
        return access.refusal(of: peer, needing: needed, on: namespace)
    }

    /// Whether the connection may read `namespace` now (what NAMESPACES and INFO show).
    var readableNamespaces: @Sendable (String) -> Bool {
        guard let access, let peer = judgedPeer else { return { _ in true } }
        return { access.rights(of: peer, on: $0).contains(.read) }
    }
}
