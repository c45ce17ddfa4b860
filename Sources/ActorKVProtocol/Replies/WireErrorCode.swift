/// The code word that starts every error reply, `-CODE message\r\n`: the one list of them, shared
/// by the server (which sends them), the Swift client and the CLI (which read them).
///
/// The raw value is the word on the wire. protocol.md's "Errors" table documents each code, and
/// the Python client's `ERROR_CODES` lists the same words; tests check both against ``allCases``.
public enum WireErrorCode: String, CaseIterable, Sendable {
    /// `ERR`: unknown command, wrong number of arguments (the message gives the usage), bad option
    /// or BATCH op; a namespace whose directory the server refuses to use (a symbolic link or not
    /// a directory, or another user's or writable by others; the message says which).
    case err = "ERR"
    /// `BADNS`: namespace name outside the allowed set.
    case badNS = "BADNS"
    /// `BADKEY`: empty key, or longer than 65,536 bytes.
    case badKey = "BADKEY"
    /// `TOOBIG`: value longer than `--max-value-bytes`; a command that would take a transaction
    /// (its WATCHed names and MULTI queue) past `--max-request-bytes` (EXEC then applies nothing;
    /// a WATCH watches nothing).
    case tooBig = "TOOBIG"
    /// `BADCURSOR`: a SCAN cursor the server did not produce.
    case badCursor = "BADCURSOR"
    /// `CORRUPT`: the namespace's files cannot be read as written; the message names the file and
    /// byte offset. The namespace accepts nothing until repaired; the files are never modified.
    case corrupt = "CORRUPT"
    /// `IOERR`: a read, write or fsync failed (disk full, device error). A write whose log append
    /// failed was not applied. A write whose fsync failed (under `always`) was applied in memory
    /// but not acknowledged: whether it survives a restart is unknown. After a failed fsync the
    /// namespace refuses writes until the server restarts.
    case ioErr = "IOERR"
    /// `SHUTDOWN`: the server is shutting down: the answer to each request it had read but not
    /// started when SIGTERM/SIGINT came (that request was not run), and to any that reaches a
    /// store already closed.
    case shutdown = "SHUTDOWN"
    /// `PROTO`: framing error (a bad `*` or `$` header, a missing `\r\n` after a bulk, unbalanced
    /// quotes, a limit exceeded), sent after the replies to the requests before it; then the
    /// server closes the connection.
    case proto = "PROTO"
    /// `MAXCLIENTS`: sent on accept when `--max-clients` connections are open, or when the server
    /// is out of file descriptors; then the server closes the connection.
    case maxClients = "MAXCLIENTS"
    /// `NOPERM`: on accept, to a peer outside `--allow-uid`/`--allow-gid` (the message starts
    /// with ``connectionRefusalPrefix``), then the server closes the connection; to a command
    /// that needs a right on a namespace that the peer lacks under `--acl` (`no write permission
    /// on namespace 'config' for uid 33`), nothing applied, the connection stays usable; to a
    /// connection following a namespace it may no longer read after a reload, then the server
    /// closes it.
    case noPerm = "NOPERM"
    /// `COMPACTED`: `CHANGES … FROM seq` asked for changes older than the oldest the server still
    /// holds; the message gives that oldest sequence. The connection stays usable.
    case compacted = "COMPACTED"
    /// `LAGGING`: a connection following changes fell further behind than the server holds
    /// changes for it; the message gives the sequence to resume from. Then the server closes the
    /// connection.
    case lagging = "LAGGING"
    /// `EXECABORT`: EXEC after a command was refused while queueing (unknown, wrong arguments,
    /// not allowed inside MULTI): nothing queued was applied.
    case execAbort = "EXECABORT"
    /// `CROSSNS`: EXEC of a transaction whose commands address more than one namespace:
    /// nothing was applied (a transaction is one namespace's, as Redis Cluster's CROSSSLOT).
    case crossNS = "CROSSNS"
    /// `NOPROTO`: HELLO asked for a protocol version other than 2 or 3.
    case noProto = "NOPROTO"
    /// `UNAVAILABLE`: cluster mode (`--etcd`): no etcd member answers, or the cluster has no
    /// leader or quorum. The command was not applied; the connection stays usable.
    case unavailable = "UNAVAILABLE"

    /// How the message of a `NOPERM` sent on accept starts (a command's `NOPERM` never starts so).
    public static let connectionRefusalPrefix = "connection refused: "

    /// Whether the error reply `code message` is the server refusing a connection it has just
    /// accepted: any `MAXCLIENTS`, and a `NOPERM` whose message starts with
    /// ``connectionRefusalPrefix``. No request on that connection was run; a client reports it
    /// as a refused connection rather than as the answer to a request.
    public static func refusesConnection(code: String, message: String) -> Bool {
        guard let known = WireErrorCode(rawValue: code), known.refusesConnection else { return false }
        return known != .noPerm || message.hasPrefix(connectionRefusalPrefix)
    }

    /// True for the codes the server may send instead of serving a connection it has just
    /// accepted (`MAXCLIENTS`, `NOPERM`; for `NOPERM` only with ``connectionRefusalPrefix``:
    /// see ``refusesConnection(code:message:)``).
    public var refusesConnection: Bool {
        switch self {
        case .maxClients, .noPerm: return true
        case .err, .badNS, .badKey, .tooBig, .badCursor, .corrupt, .ioErr, .shutdown, .proto, .compacted, .lagging,
             .execAbort, .crossNS, .noProto, .unavailable: return false
        }
    }

    /// True for the codes after which the server may close the connection (`PROTO`,
    /// `MAXCLIENTS`, `LAGGING`, and `NOPERM` on accept or to a follower cut off; a command's
    /// `NOPERM` leaves it usable); after any other the connection stays usable.
    public var closesConnection: Bool {
        switch self {
        case .proto, .maxClients, .noPerm, .lagging: return true
        case .err, .badNS, .badKey, .tooBig, .badCursor, .corrupt, .ioErr, .shutdown, .compacted, .execAbort, .crossNS,
             .noProto, .unavailable: return false
        }
    }
}

extension Reply {
    /// The error reply `-CODE message` (just `-CODE` when `message` is empty).
    public static func error(_ code: WireErrorCode, _ message: String) -> Reply {
        .error(message.isEmpty ? code.rawValue : code.rawValue + " " + message)
    }
}
