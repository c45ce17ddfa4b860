import ActorKVProtocol
import ActorKVStore

/// The commands that are not one operation on a namespace's data: the connection's own
/// (PING, ECHO, QUIT), the server's (INFO, NAMESPACES, COMPACT), and the probes that
/// Redis tools send on connecting (COMMAND, CONFIG).
enum ServerCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "PING", usage: "PING [message]", arity: .between(0, 1), flags: [.unrestricted, .allowedWhileFollowing]) { (args) throws(CommandError) in
            let reply = args.count > 0 ? Reply.bulk(args.array(0)) : .simple("PONG")
            return .local(LocalCommand { _ in reply })
        },
        CommandSpec(name: "ECHO", usage: "ECHO message", arity: .exactly(1), flags: [.unrestricted]) { (args) throws(CommandError) in
            let reply = Reply.bulk(args.array(0))
            return .local(LocalCommand { _ in reply })
        },
        CommandSpec(name: "QUIT", usage: "QUIT", arity: .exactly(0), flags: [.unrestricted, .session, .allowedWhileFollowing, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                context.session.requestClose()
                return .simple("OK")
            })
        },
        CommandSpec(name: "INFO", usage: "INFO", arity: .between(0, 1), flags: [.readOnly]) { (_) throws(CommandError) in
            .local(LocalCommand { context in .bulk(await context.info(context.readableNamespaces)) })
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
            let name = try Command.namespace(args[0])
            return .local(LocalCommand { context in
                do {
                    try await context.backend.compact(name)
                    return .simple("OK")
                } catch {
                    return ErrorMapping.reply(for: error)
                }
            })
        },
        // redis-cli sends COMMAND DOCS on connecting: an empty answer lets it proceed.
        CommandSpec(name: "COMMAND", usage: "COMMAND [...]", arity: .atLeast(0), flags: [.unrestricted]) { (_) throws(CommandError) in
            .local(LocalCommand { _ in .array([]) })
        },
        CommandSpec(name: "CONFIG", usage: "CONFIG GET parameter [parameter ...]", arity: .atLeast(2), flags: [.unrestricted], parse: parseConfig),
    ]

    private static let getWord = Array("GET".utf8)

    /// CONFIG GET: the settings whose names match any of the (glob) patterns, as a map.
    private static func parseConfig(_ args: CommandArguments) throws(CommandError) -> Command {
        guard CommandTable.matches(args[0], getWord) else {
            throw CommandError(.syntax, "only CONFIG GET is supported: actorkvd is configured by its options (actorkvd --help), not at run time")
        }
        // Redis matches parameter names without regard to case; its names are lower case.
        let patterns = (1..<args.count).map { Array(args[$0]).map { $0 >= 65 && $0 <= 90 ? $0 | 0x20 : $0 } }
        return .local(LocalCommand { context in
            var pairs: [Reply] = []
            for setting in context.settings where patterns.contains(where: { RedisGlob.matches($0, Array(setting.name.utf8)) }) {
                pairs.append(.bulk(Array(setting.name.utf8)))
                pairs.append(.bulk(Array(setting.value.utf8)))
            }
            return .map(pairs)
        })
    }
}
