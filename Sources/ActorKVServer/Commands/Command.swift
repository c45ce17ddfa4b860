import ActorKVProtocol
import ActorKVStore

/// A request parsed against the ``CommandTable``, ready to run. Parsing is pure; each request is
/// parsed once, when the event loop hands it over.
public enum Command: Sendable {
    /// A data command: its operation runs in its namespace's run, merged with the data commands
    /// next to it on the same namespace (one actor hop, one log write), and its reply is made
    /// from the operation's outcome, as `shape` says.
    case data(namespace: String, Operation, shape: ReplyShape = .plain)
    /// A put of a key owned by the connection that sends it (`PUT … EPHEMERAL`): it runs as a
    /// ``data(namespace:_:shape:)`` command, merged like any other, once ``bound(to:)`` that
    /// connection's session.
    case owned(namespace: String, LifetimePut)
    /// Any other command: runs on its own, given what it needs.
    case local(LocalCommand)
    /// A request refused before running (unknown command, wrong arguments): its reply.
    case refused(CommandError)

    /// Parses the arguments of one request (`arguments[0]` is the command name, any case).
    public static func parse(_ arguments: [[UInt8]]) throws(CommandError) -> Command {
        try parse(Request(arguments))
    }

    /// Parses one decoded request (its first argument is the command name, any case) and, with
    /// `rights`, judges it by the right its spec declares (`NOPERM` if the connection lacks it).
    static func parse(_ request: Request, rights: ConnectionRights?, names: NamespaceNames? = nil) throws(CommandError) -> Command {
        var trace = CommandTrace.none
        return try parse(request, rights: rights, names: names, trace: &trace)
    }

    /// Parses one decoded request as ``parse(_:rights:names:)`` does, and sets `trace` to the
    /// command it names (``CommandTrace/none`` if none), refused or not, as Redis notes the last
    /// command of a connection once it looked the name up.
    static func parse(_ request: Request, rights: ConnectionRights?, names: NamespaceNames?,
                      trace: inout CommandTrace) throws(CommandError) -> Command {
        guard !request.isEmpty else { throw CommandError(.syntax, "empty command") }
        let first = request[0]
        guard let spec = CommandTable.lookup(first) else {
            trace = .none
            throw CommandError(.unknownCommand, "unknown command '\(printable(first))'; ActorKV keeps keys in namespaces: see protocol.md \"Differences from Redis\"")
        }
        trace = CommandTrace(spec, request)
        guard spec.accepts(argumentCount: request.count - 1) else {
            throw CommandError(.arity, spec.arityMessage)
        }
        var command = try spec.parse(CommandArguments(request, names: names))
        var flags = spec.flags
        var subcommand = false
        if command.isLocal, case .local(var local) = command {
            // A subcommand may declare flags of its own (ACL LOAD: serverOwner).
            if local.flags.isEmpty { local.flags = spec.flags } else { (flags, subcommand) = (local.flags, true) }
            command = .local(local)
        }
        try rights?.judge(command, flags: flags, request: request, nameWords: subcommand ? 2 : 1)
        return command
    }

    /// Parses one decoded request (its first argument is the command name, any case).
    public static func parse(_ request: Request) throws(CommandError) -> Command {
        try parse(request, rights: nil)
    }

    /// Parses one decoded request; a refusal becomes ``refused(_:)``.
    public init(parsing request: Request) {
        self.init(parsing: request, rights: nil)
    }

    /// Parses one decoded request and judges it by `rights` (nil: every right); a refusal,
    /// `NOPERM` included, becomes ``refused(_:)``. `names`: the connection's memo of its last
    /// namespace name.
    init(parsing request: Request, rights: ConnectionRights?, names: NamespaceNames? = nil) {
        do { self = try Self.parse(request, rights: rights, names: names) } catch { self = .refused(error) }
    }

    /// Parses one decoded request as ``init(parsing:rights:names:)`` does, and sets `trace` to
    /// the command it names (see ``parse(_:rights:names:trace:)``).
    init(parsing request: Request, rights: ConnectionRights?, names: NamespaceNames?, trace: inout CommandTrace) {
        do { self = try Self.parse(request, rights: rights, names: names, trace: &trace) } catch { self = .refused(error) }
    }

    /// This command as the connection of `session` runs it: an ``owned(namespace:_:)`` put becomes
    /// a data command whose key `session` owns, and the session notes the namespace now, before
    /// the write, so that the connection's end finds the key. Any other command is itself.
    consuming func bound(to session: ClientSession) -> Command {
        guard case .owned(let namespace, var put) = self else { return self }
        put.owner = session.id
        session.noteOwnedKeys(in: namespace)
        return .data(namespace: namespace, .lifetimePut(put))
    }

    /// Whether a connection that follows changes may send it (its own error, for a refused one).
    var isAllowedWhileFollowing: Bool {
        switch self {
        case .data, .owned: return false
        case .local(let local): return local.flags.contains(.allowedWhileFollowing)
        case .refused: return true
        }
    }

    /// The namespace of a data command, nil for any other. Read in place: a pattern match on a
    /// variable holding a command copied its whole payload, operation included, through the
    /// runtime's generic tuple witnesses (2-3% of the server's own CPU at one request a turn).
    var dataNamespace: String? { Self.dataNamespace(of: self) }

    private static func dataNamespace(of command: borrowing Command) -> String? {
        switch command {
        case .data(let namespace, _, _): namespace
        default: nil
        }
    }

    /// Whether it is a ``local(_:)`` command (read in place, as ``dataNamespace``).
    var isLocal: Bool {
        guard case .local = self else { return false }
        return true
    }

    /// Whether it is an ``owned(namespace:_:)`` put (read in place, as ``dataNamespace``).
    var isOwned: Bool {
        guard case .owned = self else { return false }
        return true
    }

    /// Whether it can run at once, with no task: a refusal, or a local command that needs no
    /// waiting (``LocalCommand/runsNow``).
    var runsNow: Bool {
        switch self {
        case .refused: return true
        case .local(let local): return local.runsNow
        case .data, .owned: return false
        }
    }

    /// Whether it runs at once inside MULTI rather than being queued.
    var controlsTransaction: Bool {
        guard case .local(let local) = self else { return false }
        return local.flags.contains(.transactionControl)
    }

    /// About how many reply entries (keys and values) this can produce: a SCAN's COUNT,
    /// ``wholeNamespaceWeight`` for a command that replies with a whole namespace (HGETALL, HKEYS,
    /// HVALS: a scan without a limit; queued in MULTI too, as EXEC replies with it), an
    /// HRANDFIELD's count, 1 for anything else, whose reply is no larger than what the request
    /// itself carries or one stored value (held by reference until it is sent). The event loop
    /// bounds by this what one connection has in flight, since a short SCAN, HGETALL or
    /// HRANDFIELD request can ask for a great many entries.
    var replyWeight: Int {
        switch self {
        case .data(_, .scan(_, _, let limit), _): return min(limit, Self.wholeNamespaceWeight)
        case .data(_, .packedEntries, _): return Self.wholeNamespaceWeight
        case .data(_, .sample(.distinct(let count)), _), .data(_, .sample(.repeating(let count)), _):
            return min(max(count, 1), Self.wholeNamespaceWeight)
        default: return 1
        }
    }

    /// The weight of a command that replies with every entry of a namespace, however many: more
    /// than any SCAN's COUNT, so that it runs alone and its reply is sent before the next request
    /// runs (30 pipelined HGETALLs of 173,000 keys, never read, held 570 MB without it). The
    /// event loop weighs it by the namespace's keys instead when it can count them at once
    /// (``EventLoop/replyWeight(of:keyCount:)``).
    static let wholeNamespaceWeight = 1 << 30

    static func namespace(_ bytes: ArraySlice<UInt8>) throws(CommandError) -> String {
        do { return try NamespaceName.validate(bytes) } catch { throw CommandError(store: error) }
    }

    /// Shows bytes in an error message: printable ASCII as is, anything else as `\xHH`, cut at 64.
    static func printable(_ bytes: ArraySlice<UInt8>) -> String {
        var out = ""
        for b in bytes.prefix(64) {
            if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "'") { out.append(Character(Unicode.Scalar(b))) } else {
                out += "\\x" + (b < 16 ? "0" : "") + String(b, radix: 16)
            }
        }
        return bytes.count > 64 ? out + "..." : out
    }
}
