import ActorKVProtocol
import ActorKVStore

/// The one place where failures become wire errors (`-CODE message`). Every reply here is built
/// from a ``WireErrorCode``; protocol.md's error table documents the codes.
public enum ErrorMapping {
    /// The reply for an engine error.
    public static func reply(for error: StoreError) -> Reply {
        .error(wireCode(for: error.code), error.message)
    }

    /// The reply for a refused command.
    public static func reply(for error: CommandError) -> Reply {
        switch error.kind {
        case .unknownCommand, .arity, .syntax: return .error(.err, error.message)
        case .store(let code): return .error(wireCode(for: code), error.message)
        case .wire(let code): return .error(code, error.message)
        }
    }

    /// The reply for a framing error; the connection is closed after it. One that went over a
    /// limit names the flag that sets it (the message gives the size and the limit).
    public static func reply(for error: ProtocolError) -> Reply {
        guard let limit = error.exceeded else { return .error(.proto, error.message) }
        return .error(.proto, "\(error.message) (actorkvd \(flag(for: limit)))")
    }

    /// The `actorkvd` flag that sets `limit`.
    static func flag(for limit: ProtocolLimits.Limit) -> String {
        switch limit {
        case .inlineLength: "--max-inline-bytes"
        case .bulkLength: "--max-bulk-bytes"
        case .arguments: "--max-arguments"
        case .requestBytes: "--max-request-bytes"
        }
    }

    /// The reply to BACKUP: `+OK` when every namespace is in the backup; otherwise the error of
    /// the first left out (its files corrupt: `CORRUPT`), naming each left out and why.
    public static func reply(for backup: BackupSummary) -> Reply {
        guard let first = backup.unavailable.keys.min(), let code = backup.unavailable[first]?.code else { return .simple("OK") }
        let missing = backup.unavailable.sorted { $0.key < $1.key }.map { "'\($0.key)' (\($0.value.message))" }
        return .error(wireCode(for: code), "backup written to \(backup.path) with \(backup.namespaces.count) namespace(s) but without \(missing.joined(separator: ", ")), which cannot be opened")
    }

    /// The reply for any other error.
    public static func reply(for error: any Error) -> Reply {
        if let e = error as? StoreError { return reply(for: e) }
        if let e = error as? CommandError { return reply(for: e) }
        if let e = error as? ProtocolError { return reply(for: e) }
        return .error(.err, "\(error)")
    }

    /// The reply to a command that a connection following changes may not send.
    public static let notWhileFollowing = Reply.error(.err, "only CHANGES, PING, QUIT and RESET are allowed while following changes")

    /// The reply sent to a connection refused because the server is full.
    public static let maxClients = Reply.error(.maxClients, "max number of clients reached")

    /// The reply to a request read but not started when the server began shutting down.
    public static let shuttingDown = Reply.error(.shutdown, "the server is shutting down; this request was not run")

    /// The reply to a connection accepted while the server has no file descriptors to spare.
    public static let outOfDescriptors = Reply.error(.maxClients, "the server is out of file descriptors (open files limit); try again later")

    /// The reply sent to a peer whose uid/gid is not allowed.
    public static func notPermitted(uid: UInt32, gid: UInt32) -> Reply {
        notPermitted(because: "uid \(uid) gid \(gid) is not allowed to connect")
    }

    /// The reply sent on accept to a connection refused for its credentials: its message
    /// starts with ``WireErrorCode/connectionRefusalPrefix``, which tells clients it from a
    /// command's `NOPERM`.
    static func notPermitted(because reason: String) -> Reply {
        .error(.noPerm, WireErrorCode.connectionRefusalPrefix + reason)
    }

    /// The wire code of each engine error code. A switch with no default: an engine code added
    /// to ``StoreError/Code`` does not compile until it is given its wire code here.
    public static func wireCode(for code: StoreError.Code) -> WireErrorCode {
        switch code {
        case .invalidNamespace: return .badNS
        case .invalidKey: return .badKey
        case .valueTooLarge: return .tooBig
        case .invalidCursor: return .badCursor
        case .corrupt: return .corrupt
        case .io, .durabilityLost: return .ioErr
        case .closed: return .shutdown
        // A namespace directory refused as unsafe, or a malformed request the command parser
        // let through; `locked` is raised only when the server opens its data directory at start.
        case .unsafeDirectory, .invalidArgument, .locked: return .err
        // Redis's INCR errors: "-ERR value is not an integer…", "-ERR increment … would overflow".
        case .notAnInteger, .overflow: return .err
        // As Redis's "-ERR max number of clients reached": the message names the flag.
        case .tooManyNamespaces: return .err
        case .compacted: return .compacted
        case .unavailable: return .unavailable
        }
    }

    /// The wire code word of each engine error code, e.g. "BADNS" (``wireCode(for:)``'s raw value).
    public static func code(for code: StoreError.Code) -> String {
        wireCode(for: code).rawValue
    }
}
