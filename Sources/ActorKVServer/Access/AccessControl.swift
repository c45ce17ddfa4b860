import Synchronization

/// The server's namespace permissions (`actorkvd --acl FILE`): the rules in force, replaced as a
/// whole by ``reload(for:)`` (SIGHUP, `ACL LOAD`), and who may do what under them.
///
/// Connections resolve their rights once per namespace (``ConnectionRights``) and resolve them
/// again after a reload, which they notice by ``generation``. The server's own uid keeps every
/// right whatever the file says.
public final class AccessControl: Sendable {
    /// The file, as given to `--acl`.
    public let path: String
    /// The server's own uid: every right on every namespace.
    public let ownUID: UInt32
    private let names: AccountNames
    private let current: Mutex<AccessRules>
    private let generationCounter = Atomic<UInt64>(0)
    /// Called after each successful reload (the event loop's wake-up, so that it judges the
    /// connections that follow changes again).
    private let changed: @Sendable () -> Void
    /// Where each reload is logged (the server's log).
    private let log: @Sendable (String) -> Void

    /// Loads `path`; throws if it cannot be read or has a mistake (the server must not start).
    init(path: String, ownUID: UInt32, names: AccountNames = .system, log: @escaping @Sendable (String) -> Void = { _ in },
         changed: @escaping @Sendable () -> Void = {}) throws(AccessRulesError) {
        self.path = path
        self.ownUID = ownUID
        self.names = names
        self.log = log
        self.changed = changed
        current = Mutex(try AccessRules.load(path: path, names: names))
    }

    /// Increases at each successful reload.
    var generation: UInt64 { generationCounter.load(ordering: .acquiring) }

    /// How many rules are in force.
    var ruleCount: Int { current.withLock { $0.rules.count } }

    /// Who asked for a reload, as the log names it.
    enum ReloadRequest: Sendable, CustomStringConvertible {
        /// SIGHUP.
        case signal
        /// `ACL LOAD` from a connection of this uid (nil: its credentials are unknown).
        case command(uid: UInt32?)

        var description: String {
            switch self {
            case .signal: "SIGHUP"
            case .command(let uid?): "ACL LOAD from uid \(uid)"
            case .command(nil): "ACL LOAD from an unknown uid"
            }
        }
    }

    /// Reads the file again, as `request` asks, and puts its rules in force for the next command
    /// of every connection. On a mistake, throws and keeps the rules in force. Returns the
    /// number of rules. Logs the outcome either way, naming who asked: `reloaded acl.conf on
    /// SIGHUP: 3 rules`, `ACL LOAD from uid 0: acl.conf:3: unknown right 'wrte' …; keeping the
    /// rules in force`.
    @discardableResult
    func reload(for request: ReloadRequest) throws(AccessRulesError) -> Int {
        let rules: AccessRules
        do throws(AccessRulesError) {
            rules = try AccessRules.load(path: path, names: names)
        } catch {
            log("\(request): \(error); keeping the rules in force")
            throw error
        }
        current.withLock { $0 = rules }
        generationCounter.add(1, ordering: .releasing)
        log("reloaded \(path) on \(request): \(rules.rules.count) rules")
        changed()
        return rules.rules.count
    }

    /// Whether `peer` is the server's own uid, which has every right.
    func isOwner(_ peer: PeerIdentity) -> Bool { peer.uid == ownUID }

    /// `peer`'s rights on `namespace` under the rules in force.
    func rights(of peer: PeerIdentity, on namespace: String) -> AccessRights {
        if isOwner(peer) { return .all }
        return current.withLock { $0.rights(of: peer, on: namespace) }
    }

    /// The refusal of a command that needs `needed` on `namespace`, or nil if `peer` has it.
    func refusal(of peer: PeerIdentity, needing needed: AccessRights, on namespace: String) -> CommandError? {
        Self.refusal(holding: rights(of: peer, on: namespace), needing: needed, on: namespace, for: peer)
    }

    /// `NOPERM` for a peer that holds `held` on `namespace` and needs `needed`, or nil.
    static func refusal(holding held: AccessRights, needing needed: AccessRights, on namespace: String,
                        for peer: PeerIdentity) -> CommandError? {
        held.isSuperset(of: needed) ? nil : denied(needed.subtracting(held), on: namespace, for: peer)
    }

    /// `-NOPERM no write permission on namespace 'config' for uid 33`, naming the first missing right.
    static func denied(_ missing: AccessRights, on namespace: String, for peer: PeerIdentity) -> CommandError {
        let right = missing.contains(.read) ? "read" : missing.contains(.write) ? "write" : "admin"
        return CommandError(.wire(.noPerm), "no \(right) permission on namespace '\(namespace)' for uid \(peer.uid)")
    }
}
