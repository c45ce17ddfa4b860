import ActorKVProtocol
import ActorKVStore

/// The commands that are not one operation on a namespace's data: the connection's own
/// (PING, ECHO, QUIT, CLIENT), the server's (INFO, NAMESPACES, COMPACT), and the probes that
/// Redis tools send on connecting (COMMAND, CONFIG).
enum ServerCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "PING", usage: "PING [message]", arity: .between(0, 1), flags: [.allowedWhileFollowing]) { (args) throws(CommandError) in
            let reply = args.count > 0 ? Reply.bulk(args.array(0)) : .simple("PONG")
            return .local(LocalCommand { _ in reply })
        },
        CommandSpec(name: "ECHO", usage: "ECHO message", arity: .exactly(1), flags: []) { (args) throws(CommandError) in
            let reply = Reply.bulk(args.array(0))
            return .local(LocalCommand { _ in reply })
        },
        CommandSpec(name: "QUIT", usage: "QUIT", arity: .exactly(0), flags: [.session, .allowedWhileFollowing]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                context.session.requestClose()
                return .simple("OK")
            })
        },
        CommandSpec(name: "CLIENT", usage: "CLIENT ID | GETNAME | SETNAME name", arity: .atLeast(1), flags: [.session],
                    parse: parseClient),
        CommandSpec(name: "INFO", usage: "INFO", arity: .between(0, 1), flags: []) { (_) throws(CommandError) in
            .local(LocalCommand { context in .bulk(await context.info()) })
        },
        CommandSpec(name: "NAMESPACES", usage: "NAMESPACES", arity: .exactly(0), flags: [.readOnly]) { (_) throws(CommandError) in
            .local(LocalCommand { context in .array(await context.store.namespaceNames().map { .bulk(Array($0.utf8)) }) })
        },
        CommandSpec(name: "COMPACT", usage: "COMPACT ns", arity: .exactly(1), flags: [.namespaced, .admin, .notInMulti]) { (args) throws(CommandError) in
            let name = try Command.namespace(args[0])
            return .local(LocalCommand { context in
                do {
                    try await context.store.existingNamespace(name)?.compact()
                    return .simple("OK")
                } catch {
                    return ErrorMapping.reply(for: error)
                }
            })
        },
        // redis-cli and redis-benchmark send these on connect: an empty array lets them proceed.
        CommandSpec(name: "COMMAND", usage: "COMMAND [...]", arity: .atLeast(0), flags: [], parse: clientProbe),
        CommandSpec(name: "CONFIG", usage: "CONFIG GET parameter", arity: .atLeast(0), flags: [], parse: clientProbe),
    ]

    private static func clientProbe(_: CommandArguments) throws(CommandError) -> Command {
        .local(LocalCommand { _ in .array([]) })
    }

    private static let idWord = Array("ID".utf8)
    private static let getNameWord = Array("GETNAME".utf8)
    private static let setNameWord = Array("SETNAME".utf8)

    /// CLIENT ID, CLIENT GETNAME and CLIENT SETNAME, answered as Redis does.
    private static func parseClient(_ args: CommandArguments) throws(CommandError) -> Command {
        let subcommand = args[0]
        if CommandTable.matches(subcommand, idWord), args.count == 1 {
            return .local(LocalCommand { context in .integer(Int64(context.session.id)) })
        }
        if CommandTable.matches(subcommand, getNameWord), args.count == 1 {
            return .local(LocalCommand { context in context.session.name.map { .bulk(Array($0.utf8)) } ?? .null })
        }
        if CommandTable.matches(subcommand, setNameWord), args.count == 2 {
            let name = args[1]
            // Redis's rule: printable ASCII without spaces; an empty name clears it.
            guard name.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw CommandError(.syntax, "Client names cannot contain spaces, newlines or special characters.")
            }
            let text = name.isEmpty ? nil : String(decoding: name, as: UTF8.self)
            return .local(LocalCommand { context in
                context.session.name = text
                return .simple("OK")
            })
        }
        throw CommandError(.syntax, "unknown CLIENT subcommand or wrong number of arguments for '\(Command.printable(subcommand))' (usage: CLIENT ID | GETNAME | SETNAME name)")
    }
}
