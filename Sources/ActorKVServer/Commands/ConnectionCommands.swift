import ActorKVProtocol
import ActorKVStore

/// The commands about the connection itself, answered as Redis answers them so that Redis
/// clients connect with their defaults: HELLO (RESP2 or RESP3), CLIENT, SELECT, RESET.
enum ConnectionCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "HELLO", usage: "HELLO [protover [AUTH username password] [SETNAME clientname]]", arity: .atLeast(0),
                    flags: [.unrestricted, .session], parse: parseHello),
        CommandSpec(name: "CLIENT", usage: clientUsage, arity: .atLeast(1), flags: [.unrestricted, .session],
                    subcommands: ["ID", "INFO", "LIST", "KILL", "GETNAME", "SETNAME", "SETINFO"], parse: parseClient),
        CommandSpec(name: "SELECT", usage: "SELECT 0", arity: .exactly(1), flags: [.unrestricted, .session]) { (args) throws(CommandError) in
            guard args[0].elementsEqual("0".utf8) else {
                throw CommandError(.syntax, "ActorKV has one database, 0; namespaces take the place of Redis's numbered databases")
            }
            return .local(LocalCommand(now: { _ in .simple("OK") }))
        },
        CommandSpec(name: "RESET", usage: "RESET", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl, .allowedWhileFollowing]) { (_) throws(CommandError) in
            .local(LocalCommand(now: { context in
                context.session.reset()
                return .switching(to: .resp2, .simple("RESET"))
            }))
        },
    ]

    /// CLIENT's subcommands, for its usage and the refusal of another.
    static let clientUsage = "CLIENT ID | INFO | LIST [TYPE normal|pubsub] [ID id ...] | KILL [ID id] [TYPE normal|pubsub] [USER name] [MAXAGE seconds] [SKIPME yes|no] | GETNAME | SETNAME name | SETINFO LIB-NAME|LIB-VER value"

    private static let authWord = Array("AUTH".utf8)
    private static let setNameWord = Array("SETNAME".utf8)

    /// HELLO: switches the protocol (2 or 3; none: keeps it) and answers the server's facts as a
    /// map, in the protocol switched to.
    private static func parseHello(_ args: CommandArguments) throws(CommandError) -> Command {
        var version: RESPVersion?
        var name: String?
        if args.count > 0 {
            guard let number = ASCIIDecimal.parse(args[0]) else {
                throw CommandError(.syntax, "Protocol version is not an integer or out of range")
            }
            guard let given = RESPVersion(rawValue: Int(clamping: number)) else {
                return .refused(CommandError(.wire(.noProto), "unsupported protocol version"))
            }
            version = given
        }
        var i = 1
        while i < args.count {
            if CommandTable.matches(args[i], authWord) {
                throw CommandError(.syntax, "AUTH is not used: ActorKV admits clients by the socket's permissions and the peer's credentials (actorkvd --allow-uid, --allow-gid)")
            }
            guard CommandTable.matches(args[i], setNameWord), i + 1 < args.count else {
                throw CommandError(.syntax, "syntax error in HELLO option '\(Command.printable(args[i]))'")
            }
            name = try clientName(args[i + 1])
            i += 2
        }
        let (newVersion, newName) = (version, name)
        return .local(LocalCommand(now: { context in
            let session = context.session
            if let version = newVersion { session.version = version }
            if let name = newName { session.name = name.isEmpty ? nil : name }
            return .switching(to: session.version, helloMap(session))
        }))
    }

    /// The facts HELLO answers, as Redis gives them.
    private static func helloMap(_ session: ClientSession) -> Reply {
        func text(_ s: String) -> Reply { .bulk(Array(s.utf8)) }
        return .map([
            text("server"), text("actorkv"),
            text("version"), text(ActorKVVersion.string),
            text("proto"), .integer(Int64(session.version.rawValue)),
            text("id"), .integer(Int64(session.id)),
            text("mode"), text("standalone"),
            text("role"), text("master"),
            text("modules"), .array([]),
        ])
    }

    private static let idWord = Array("ID".utf8)
    private static let infoWord = Array("INFO".utf8)
    private static let getNameWord = Array("GETNAME".utf8)
    private static let setInfoWord = Array("SETINFO".utf8)
    private static let listWord = Array("LIST".utf8)
    private static let killWord = Array("KILL".utf8)
    private static let userWord = Array("USER".utf8)
    private static let skipMeWord = Array("SKIPME".utf8)
    private static let maxAgeWord = Array("MAXAGE".utf8)
    private static let typeWord = Array("TYPE".utf8)
    private static let libNameWord = Array("LIB-NAME".utf8)
    private static let libVersionWord = Array("LIB-VER".utf8)

    /// CLIENT ID, INFO, LIST, KILL, GETNAME, SETNAME and SETINFO, answered as Redis does.
    private static func parseClient(_ args: CommandArguments) throws(CommandError) -> Command {
        let subcommand = args[0]
        if CommandTable.matches(subcommand, listWord) { return try parseList(args) }
        if CommandTable.matches(subcommand, killWord) { return try parseKill(args) }
        switch args.count {
        case 1 where CommandTable.matches(subcommand, idWord):
            return .local(LocalCommand(now: { context in .integer(Int64(context.session.id)) }))
        case 1 where CommandTable.matches(subcommand, infoWord):
            return .local(LocalCommand(now: { context in
                let socketPath = context.settings.first { $0.name == "unixsocket" }?.value
                return .bulk(Array(clientInfo(context.session, socketPath: socketPath, command: "client|info").utf8))
            }))
        case 1 where CommandTable.matches(subcommand, getNameWord):
            return .local(LocalCommand(now: { context in context.session.name.map { .bulk(Array($0.utf8)) } ?? .null }))
        case 2 where CommandTable.matches(subcommand, setNameWord):
            let name = try clientName(args[1])
            return .local(LocalCommand(now: { context in
                context.session.name = name.isEmpty ? nil : name
                return .simple("OK")
            }))
        case 3 where CommandTable.matches(subcommand, setInfoWord):
            return try parseSetInfo(args)
        default:
            throw CommandError(.syntax, "unknown CLIENT subcommand or wrong number of arguments for '\(Command.printable(subcommand))' (usage: \(clientUsage))")
        }
    }

    /// CLIENT LIST [TYPE normal|pubsub|master|replica] [ID id …]: a CLIENT INFO line per open
    /// connection, by id; `TYPE pubsub` those following changes, `normal` the others, `master` and
    /// `replica` none. Only the server's own uid may ask under `--acl` (it shows every client's
    /// uid, pid and name).
    private static func parseList(_ args: CommandArguments) throws(CommandError) -> Command {
        let filter = try ClientFilter(args)
        var list = LocalCommand { context in
            let socketPath = context.settings.first { $0.name == "unixsocket" }?.value
            var text = ""
            for session in context.clients.all where filter.shows(session) {
                text += clientInfo(session, socketPath: socketPath, command: session === context.session ? "client|list" : nil)
            }
            return .bulk(Array(text.utf8))
        }
        list.flags = [.serverOwner, .session]
        return .local(list)
    }

    /// Which connections CLIENT LIST shows: `TYPE` and `ID`, each at most once, in any order.
    struct ClientFilter: Sendable {
        /// `TYPE normal` (false) or `pubsub` (true): whether the connection follows changes.
        var following: Bool?
        /// `TYPE master` or `replica`: no connection is one.
        var none = false
        /// `ID id …`.
        var ids: Set<UInt64>?
        /// Whether a `TYPE` was given.
        var typed = false

        /// Every connection.
        init() {}

        /// CLIENT LIST's filters, from its arguments.
        init(_ args: CommandArguments) throws(CommandError) {
            var index = 1
            while index < args.count {
                guard index + 1 < args.count else { throw listSyntax() }
                if CommandTable.matches(args[index], typeWord), !typed {
                    try setType(args[index + 1])
                    index += 2
                } else if CommandTable.matches(args[index], idWord), ids == nil {
                    var listed: Set<UInt64> = []
                    index += 1
                    while index < args.count, !CommandTable.matches(args[index], typeWord) {
                        listed.insert(try clientID(args[index]))
                        index += 1
                    }
                    ids = listed
                } else {
                    throw listSyntax()
                }
            }
        }

        /// `TYPE value`.
        mutating func setType(_ value: ArraySlice<UInt8>) throws(CommandError) {
            switch String(decoding: ServerCommands.lowercasedASCII(value), as: UTF8.self) {
            case "normal": following = false
            case "pubsub": following = true
            case "master", "replica": none = true
            default: throw CommandError(.syntax, "Unknown client type '\(Command.printable(value))'")
            }
            typed = true
        }

        /// Whether `session`'s connection is listed.
        func shows(_ session: ClientSession) -> Bool {
            !none && (ids?.contains(session.id) ?? true) && (following.map { $0 == session.isFollowing } ?? true)
        }
    }

    /// CLIENT KILL with Redis's filters `ID id`, `TYPE normal|pubsub|master|replica`, `USER name`,
    /// `MAXAGE seconds` (connected longer than that, Redis 7.4's) and `SKIPME yes|no` (default
    /// yes), all of which a connection must match: closes those
    /// connections at once and answers how many. The connection asking, when it matches and
    /// `SKIPME no` says so, is closed after the reply. Only the server's own uid may ask under
    /// `--acl`. Redis's older form, `CLIENT KILL addr:port`, cannot name one connection here
    /// (every client's address is the socket's path): refused.
    private static func parseKill(_ args: CommandArguments) throws(CommandError) -> Command {
        guard args.count > 1, args.count % 2 == 1 else {
            let filterWords = [idWord, typeWord, userWord, skipMeWord, maxAgeWord]
            let oldForm = args.count == 2 && !filterWords.contains { CommandTable.matches(args[1], $0) }
            throw CommandError(.syntax, oldForm
                ? "CLIENT KILL addr:port cannot name one connection here (every client's address is the socket's path): use CLIENT KILL ID id (CLIENT LIST shows the ids)"
                : "syntax error (usage: CLIENT KILL [ID id] [TYPE normal|pubsub] [USER name] [MAXAGE seconds] [SKIPME yes|no])")
        }
        var filter = ClientFilter()
        var user: String?, skipMe = true
        var maxAge: Double?
        for index in stride(from: 1, to: args.count, by: 2) {
            let (word, value) = (args[index], args[index + 1])
            if CommandTable.matches(word, idWord), filter.ids == nil {
                filter.ids = [try clientID(value)]
            } else if CommandTable.matches(word, typeWord), !filter.typed {
                try filter.setType(value)
            } else if CommandTable.matches(word, userWord), user == nil {
                user = String(decoding: value, as: UTF8.self)
            } else if CommandTable.matches(word, maxAgeWord), maxAge == nil {
                guard let seconds = ASCIIDecimal.parse(value), seconds > 0 else {
                    throw CommandError(.syntax, "syntax error (MAXAGE takes a whole number of seconds, 1 or more)")
                }
                maxAge = Double(seconds)
            } else if CommandTable.matches(word, skipMeWord) {
                switch String(decoding: ServerCommands.lowercasedASCII(value), as: UTF8.self) {
                case "yes": skipMe = true
                case "no": skipMe = false
                default: throw CommandError(.syntax, "syntax error (SKIPME takes yes or no)")
                }
            } else {
                throw CommandError(.syntax, "syntax error (usage: CLIENT KILL [ID id] [TYPE normal|pubsub] [USER name] [MAXAGE seconds] [SKIPME yes|no])")
            }
        }
        let (matching, userName, skippingMe, oldest) = (filter, user, skipMe, maxAge)
        var kill = LocalCommand { context in
            let now = monotonicSeconds()
            let victims = context.clients.all.filter { session in
                matching.shows(session) && (userName.map { AccessCommands.userName(of: session) == $0 } ?? true)
                    && (oldest.map { now - session.connectedAt > $0 } ?? true)
                    && !(skippingMe && session === context.session)
            }
            context.clients.kill(victims.filter { $0 !== context.session }.map(\.id))
            if victims.contains(where: { $0 === context.session }) { context.session.requestClose() }
            return .integer(Int64(victims.count))
        }
        kill.flags = [.serverOwner, .session]
        return .local(kill)
    }

    /// A client id: a decimal integer greater than 0.
    private static func clientID(_ bytes: ArraySlice<UInt8>) throws(CommandError) -> UInt64 {
        guard let id = UInt64(String(decoding: bytes, as: UTF8.self)), id > 0 else { throw CommandError(.syntax, "Invalid client ID") }
        return id
    }

    private static func listSyntax() -> CommandError {
        CommandError(.syntax, "syntax error (usage: CLIENT LIST [TYPE normal|pubsub] [ID id ...])")
    }

    /// CLIENT SETINFO LIB-NAME name / LIB-VER version.
    private static func parseSetInfo(_ args: CommandArguments) throws(CommandError) -> Command {
        let text = try printableWord(args[2], "CLIENT SETINFO values cannot contain spaces, newlines or special characters.")
        let isName = CommandTable.matches(args[1], libNameWord)
        guard isName || CommandTable.matches(args[1], libVersionWord) else {
            throw CommandError(.syntax, "Unrecognized option '\(Command.printable(args[1]))'")
        }
        return .local(LocalCommand(now: { context in
            var library = context.session.library
            if isName { library.name = text } else { library.version = text }
            context.session.library = library
            return .simple("OK")
        }))
    }

    /// A client name as Redis allows them (printable ASCII without spaces; empty clears it).
    private static func clientName(_ bytes: ArraySlice<UInt8>) throws(CommandError) -> String {
        try printableWord(bytes, "Client names cannot contain spaces, newlines or special characters.")
    }

    /// `bytes` as text if they are printable ASCII without spaces (Redis's rule for client names
    /// and library info), else a syntax error saying `refusal`.
    private static func printableWord(_ bytes: ArraySlice<UInt8>, _ refusal: String) throws(CommandError) -> String {
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw CommandError(.syntax, refusal) }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// CLIENT INFO's line: Redis 7's fields, in Redis's order (clients such as node-redis 4 read
    /// them by position), then ActorKV's own (`uid`, `gid`, `pid` of the peer). Real values
    /// where ActorKV has them; the rest are fixed placeholders (protocol.md, "CLIENT", says which).
    /// `command`: the `cmd` shown for the connection asking (the CLIENT subcommand running);
    /// nil for another, whose last command the event loop noted (``ClientSession/lastCommandTrace``).
    /// CLIENT cannot run inside MULTI, so `multi` is -1 for the connection asking, as Redis shows
    /// outside MULTI; another connection shows 0 while it queues a transaction.
    static func clientInfo(_ session: ClientSession, socketPath: String?, command: String?) -> String {
        let library = session.library
        let multi = session.inTransaction ? "0" : "-1"
        // Redis shows a Unix-socket client's address as `path:0`; a path that would break the
        // line's `key=value` words (a space, an `=`) is shown as `unix:0`.
        let address = socketPath.flatMap { path in
            path.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "=") } && !path.isEmpty ? path + ":0" : nil
        } ?? "unix:0"
        let flags = session.isFollowing ? "UP" : "U"
        let peer = session.peer.map { "uid=\($0.uid) gid=\($0.gid) pid=\($0.pid)" } ?? "uid=? gid=? pid=?"
        let age = max(0, Int(monotonicSeconds() - session.connectedAt))
        let idle = command == nil ? session.idleSeconds(now: monotonicMilliseconds()) : 0
        let command = command ?? session.lastCommandTrace.name ?? "NULL"
        return "id=\(session.id) addr=\(address) laddr=\(address) fd=-1 name=\(session.name ?? "") age=\(age) idle=\(idle) flags=\(flags) db=0 "
            + "sub=0 psub=0 ssub=0 multi=\(multi) qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 "
            + "events=r cmd=\(command) user=\(AccessCommands.userName(of: session)) redir=-1 resp=\(session.version.rawValue) "
            + "lib-name=\(library.name) lib-ver=\(library.version) \(peer)\n"
    }
}
