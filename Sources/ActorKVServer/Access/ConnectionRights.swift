import ActorKVProtocol

/// One connection's rights under the server's ``AccessControl``, resolved once per namespace
/// and again after a reload; it judges each request as the event loop parses it, before any
/// request of its pipeline runs. Owned by the event loop thread (not shared).
///
/// A connection of the server's own uid has none: it has every right and is never judged.
final class ConnectionRights {
    /// The rules.
    let access: AccessControl
    /// Who the connection is.
    let peer: PeerIdentity
    private var generation: UInt64 = .max
    private var resolved: [String: AccessRights] = [:]
    private var last: (namespace: String, rights: AccessRights)?

    /// At most this many namespaces' rights are kept; past it the cache starts over (a client
    /// naming millions of namespaces costs lookups, not memory).
    static let cacheLimit = 256

    init(access: AccessControl, peer: PeerIdentity) {
        self.access = access
        self.peer = peer
    }

    /// The connection's rights on `namespace` under the rules in force.
    func rights(on namespace: String) -> AccessRights {
        let now = access.generation
        if now != generation {
            generation = now
            resolved.removeAll(keepingCapacity: true)
            last = nil
        }
        if let last, last.namespace == namespace { return last.rights }
        let rights: AccessRights
        if let known = resolved[namespace] {
            rights = known
        } else {
            rights = access.rights(of: peer, on: namespace)
            if resolved.count >= Self.cacheLimit { resolved.removeAll(keepingCapacity: true) }
            resolved[namespace] = rights
        }
        last = (namespace, rights)
        return rights
    }

    /// Throws `NOPERM` unless the connection holds `needed` on `namespace`.
    func require(_ needed: AccessRights, on namespace: String) throws(CommandError) {
        if let refusal = AccessControl.refusal(holding: rights(on: namespace), needing: needed, on: namespace, for: peer) { throw refusal }
    }

    /// Judges a parsed command by the right its flags declare, on the namespaces its request
    /// names (``CommandFlags``). A readOnly command that names none (NAMESPACES, INFO) passes
    /// here and shows only what the connection may read. `nameWords`: how many of the request's
    /// first words name the command in a refusal (2 for a subcommand: `ACL LOAD`).
    func judge(_ command: Command, flags: CommandFlags, request: Request, nameWords: Int = 1) throws(CommandError) {
        if flags.contains(.serverOwner) {
            let words = (0..<min(nameWords, request.count)).map { Command.printable(request[$0]).uppercased() }.joined(separator: " ")
            throw CommandError(.wire(.noPerm), "only the server's own uid \(access.ownUID) may run \(words); this connection is uid \(peer.uid)")
        }
        let needed = flags.neededRight
        guard !needed.isEmpty else { return }
        if let namespace = command.dataNamespace {
            try require(needed, on: namespace)
        } else if flags.contains(.namespaced) {
            try require(needed, on: String(decoding: request[1], as: UTF8.self))
        } else if flags.contains(.sourceThenTarget) {
            try require(flags.contains(.movesSource) ? needed.union(.read) : .read, on: String(decoding: request[1], as: UTF8.self))
            try require(needed, on: String(decoding: request[2], as: UTF8.self))
        } else if flags.contains(.namespacedArguments) {
            for index in 1..<request.count { try require(needed, on: String(decoding: request[index], as: UTF8.self)) }
        }
    }
}
