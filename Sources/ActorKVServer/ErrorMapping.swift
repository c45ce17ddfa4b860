import ActorKVProtocol
import ActorKVStore

/// The one place where failures become wire errors (`-CODE message`). protocol.md lists the codes.
public enum ErrorMapping {
    /// The reply for an engine error.
    public static func reply(for error: StoreError) -> Reply {
        .error(code(for: error.code) + " " + error.message)
    }

    /// The reply for a refused command.
    public static func reply(for error: CommandError) -> Reply {
        switch error.kind {
        case .unknownCommand, .arity, .syntax: return .error("ERR " + error.message)
        case .store(let code): return .error(self.code(for: code) + " " + error.message)
        }
    }

    /// The reply for a framing error; the connection is closed after it.
    public static func reply(for error: ProtocolError) -> Reply {
        .error("PROTO " + error.message)
    }

    /// The reply for any other error.
    public static func reply(for error: any Error) -> Reply {
        if let e = error as? StoreError { return reply(for: e) }
        if let e = error as? CommandError { return reply(for: e) }
        if let e = error as? ProtocolError { return reply(for: e) }
        return .error("ERR \(error)")
    }

    /// The sent to a connection refused because the server is full.
    public static let maxClients = Reply.error("MAXCLIENTS max number of clients reached")

    /// The reply to a request read but not started when the server began shutting down.
    public static let shuttingDown = Reply.error("SHUTDOWN the server is shutting down; this request was not run")

    /// The reply to a connection accepted while the server has no file descriptors to spare.
    public static let outOfDescriptors = Reply.error("MAXCLIENTS the server is out of file descriptors (open files limit); try again later")

    /// The reply sent to a peer whose uid/gid is not allowed.
    public static func notPermitted(uid: UInt32, gid: UInt32) -> Reply {
        .error("NOPERM connections from uid \(uid) gid \(gid) are not allowed")
    }

    /// The wire code of each engine error code.
    public static func code(for code: StoreError.Code) -> String {
        switch code {
        case .invalidNamespace: return "BADNS"
        case .invalidKey: return "BADKEY"
        case .valueTooLarge: return "TOOBIG"
        case .invalidCursor: return "BADCURSOR"
        case .corrupt: return "CORRUPT"
        case .io, .durabilityLost: return "IOERR"
        case .closed: return "SHUTDOWN"
        default: return "ERR"
        }
    }
}
