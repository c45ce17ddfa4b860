import ActorKVProtocol
import ActorKVStore

/// The commands that are not one operation on a namespace's data: the connection's own
/// (PING, ECHO, QUIT), the server's (INFO, NAMESPACES, COMPACT, BACKUP, TIME, ROLE), and the
/// probes that Redis tools send on connecting (COMMAND, CONFIG). SHUTDOWN is ``ShutdownCommand``.
enum ServerCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "PING", usage: "PING [message]", arity: .between(0, 1), flags: [.unrestricted, .allowedWhileFollowing]) { (args) throws(CommandError) in
            .local(LocalCommand(replying: args.count > 0 ? Reply.bulk(args.array(0)) : .simple("PONG")))
        },
        CommandSpec(name: "ECHO", usage: "ECHO message", arity: .exactly(1), flags: [.unrestricted]) { (args) throws(CommandError) in
            .local(LocalCommand(replying: .bulk(args.array(0))))
        },
        CommandSpec(name: "QUIT", usage: "QUIT", arity: .atLeast(0), flags: [.unrestricted, .session, .allowedWhileFollowing, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand(now: { context in
                context.session.requestClose()
                return .simple("OK")
            }))
        },
        CommandSpec(name: "INFO", usage: "INFO [section ...]", arity: .atLeast(0), flags: [.readOnly]) { (args) throws(CommandError) in
            let sections = InfoSections(args)
            return .local(LocalCommand { context in .bulk(sections.filter(await context.info(context.readableNamespaces))) })
        },
        CommandSpec(name: "NAMESPACES", usage: "NAMESPACES", arity: .exactly(0), flags: [.readOnly]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                let shows = context.readableNamespaces
                do {
                    return .array(try await context.backend.listNamespaces().filter(shows).map { .bulk(Array($0.utf8)) })
                } catch {
                    return ErrorMapping.reply(for: error)
                }
            })
        },
        CommandSpec(name: "COMPACT", usage: "COMPACT ns", arity: .exactly(1), flags: [.namespaced, .admin, .notInMulti]) { (args) throws(CommandError) in
            let name = try args.namespace(0)
            return .local(LocalCommand { context in
                do {
                    try await context.backend.compact(name)
                    return .simple("OK")
                } catch {
                    return ErrorMapping.reply(for: error)
                }
            })
        },
        CommandSpec(name: "BACKUP", usage: "BACKUP path", arity: .exactly(1), flags: [.serverOwner, .notInMulti]) { (args) throws(CommandError) in
            guard let path = String(validating: args.array(0), as: UTF8.self) else {
                throw CommandError(.syntax, "BACKUP's path must be UTF-8")
            }
            return .local(LocalCommand { context in
                do {
                    return ErrorMapping.reply(for: try await context.backend.backup(to: path))
                } catch {
                    return ErrorMapping.reply(for: error)
                }
            })
        },
        // Redis tools probe COMMAND on connecting: an empty array lets them proceed quietly.
        // COMMAND DOCS is an error instead: interactive redis-cli 7 builds its HELP table from
        // COMMAND DOCS, and falls back to its own built-in help only when that is an error (an
        // empty array would leave HELP with nothing to print).
        CommandSpec(name: "COMMAND", usage: "COMMAND [...]", arity: .atLeast(0), flags: [.unrestricted],
                    subcommands: ["COUNT", "DOCS", "GETKEYS", "GETKEYSANDFLAGS", "INFO", "LIST"]) { (args) throws(CommandError) in
            if args.count > 0, CommandTable.matches(args[0], docsWord) {
                throw CommandError(.syntax, "COMMAND DOCS is not supported: see protocol.md for ActorKV's commands")
            }
            // COUNT is Redis's number of commands: 0 here, as the others' lists are empty.
            let reply: Reply = args.count == 1 && CommandTable.matches(args[0], countWord) ? .integer(0) : .array([])
            return .local(LocalCommand(now: { _ in reply }))
        },
        // Redis's answer of a primary without replicas: what ActorKV is (an agent of an etcd
        // cluster too, which takes writes), for clients that ask before writing.
        CommandSpec(name: "ROLE", usage: "ROLE", arity: .exactly(0), flags: [.unrestricted]) { (_) throws(CommandError) in
            .local(LocalCommand(replying: .array([.bulk(Array("master".utf8)), .integer(0), .array([])])))
        },
        CommandSpec(name: "TIME", usage: "TIME", arity: .exactly(0), flags: [.unrestricted]) { (_) throws(CommandError) in
            .local(LocalCommand(now: { _ in
                let now = WallClock.secondsAndMicroseconds()
                return .array([.bulk(Array(String(now.seconds).utf8)), .bulk(Array(String(now.microseconds).utf8))])
            }))
        },
        CommandSpec(name: "CONFIG", usage: "CONFIG GET parameter [parameter ...]", arity: .atLeast(2), flags: [.unrestricted],
                    subcommands: ["GET"], parse: parseConfig),
    ]

    private static let getWord = Array("GET".utf8)

    /// `word` with its ASCII capitals made small (CONFIG GET's patterns and INFO's section
    /// names are matched without regard to case, as Redis does; their names are lower case).
    static func lowercasedASCII(_ word: some Collection<UInt8>) -> [UInt8] {
        word.map { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") ? $0 | 0x20 : $0 }
    }
    private static let docsWord = Array("DOCS".utf8)
    private static let countWord = Array("COUNT".utf8)

    /// CONFIG GET: the settings whose names match any of the (glob) patterns, as a map.
    private static func parseConfig(_ args: CommandArguments) throws(CommandError) -> Command {
        guard CommandTable.matches(args[0], getWord) else {
            throw CommandError(.syntax, "only CONFIG GET is supported: actorkvd is configured by its options (actorkvd --help), not at run time")
        }
        // Redis matches parameter names without regard to case; its names are lower case.
        // Parsed once here, not once per setting each time it runs.
        let globs = (1..<args.count).map { RedisGlob(lowercasedASCII(args[$0])) }
        return .local(LocalCommand(now: { context in
            var pairs: [Reply] = []
            for setting in context.settings where globs.contains(where: { $0.matches(setting.name.utf8) }) {
                pairs.append(.bulk(Array(setting.name.utf8)))
                pairs.append(.bulk(Array(setting.value.utf8)))
            }
            return .map(pairs)
        }))
    }
}

/// The sections an `INFO` request asks for, and the filter that keeps only those of the INFO
/// text. As in Redis: names in any letter case, several at once; none, `default`, `all` and
/// `everything` mean every section; a name no section has adds nothing (`INFO nosuch` is empty).
struct InfoSections: Sendable {
    /// The lower-case section names asked for; nil: every section.
    let names: Set<String>?

    init(_ args: CommandArguments) {
        var names: Set<String> = []
        for i in 0..<args.count {
            let name = String(decoding: ServerCommands.lowercasedASCII(args[i]), as: UTF8.self)
            if ["default", "all", "everything"].contains(name) {
                self.names = nil
                return
            }
            names.insert(name)
        }
        self.names = names.isEmpty ? nil : names
    }

    /// The sections of `text` (`# Name` lines, each section ending at an empty line) that were
    /// asked for, in the text's order, separated by an empty line as INFO's are.
    func filter(_ text: [UInt8]) -> [UInt8] {
        guard let names else { return text }
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
        var kept: [[Substring]] = []
        var section: [Substring] = []
        var keeping = false
        for line in lines {
            if line.hasPrefix("# ") {
                if keeping, !section.isEmpty { kept.append(section) }
                section = [line]
                keeping = names.contains(line.dropFirst(2).lowercased())
            } else if keeping, !line.isEmpty {
                section.append(line)
            }
        }
        if keeping, !section.isEmpty { kept.append(section) }
        return Array(kept.map { $0.map { $0 + "\r\n" }.joined() }.joined(separator: "\r\n").utf8)
    }
}
