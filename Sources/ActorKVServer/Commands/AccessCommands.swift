import ActorKVProtocol

/// The commands about namespace permissions (protocol.md, "Namespace permissions"): `ACL WHOAMI`
/// answers who the kernel says the client is; `ACL LOAD` reloads the `--acl` file, as SIGHUP does.
enum AccessCommands {
    /// Their specs. ACL itself needs no right; `ACL LOAD` declares its own (the server's uid only).
    static let specs: [CommandSpec] = [
        CommandSpec(name: "ACL", usage: "ACL WHOAMI | LOAD", arity: .exactly(1), flags: [.unrestricted],
                    subcommands: ["WHOAMI", "LOAD"], parse: parseACL),
    ]

    private static let whoAmIWord = Array("WHOAMI".utf8)
    private static let loadWord = Array("LOAD".utf8)

    private static func parseACL(_ args: CommandArguments) throws(CommandError) -> Command {
        if CommandTable.matches(args[0], whoAmIWord) {
            return .local(LocalCommand { context in .bulk(Array(userName(of: context.session).utf8)) })
        }
        guard CommandTable.matches(args[0], loadWord) else {
            throw CommandError(.syntax, "unknown ACL subcommand '\(Command.printable(args[0]))': ActorKV has ACL WHOAMI and ACL LOAD; permissions come from the --acl file (README, \"Who may do what\")")
        }
        var load = LocalCommand { context in reload(context) }
        load.flags = [.serverOwner]
        return .local(load)
    }

    /// The peer's user name, or its uid when the system has no name for it.
    static func userName(of session: ClientSession) -> String {
        guard let uid = session.peer?.uid else { return "unknown" }
        return AccountNames.system.userForUID(uid) ?? String(uid)
    }

    private static func reload(_ context: CommandContext) -> Reply {
        guard let access = context.access else {
            return .error(.err, "no --acl file: this server was started without namespace permissions (every client has every right)")
        }
        do {
            try access.reload(for: .command(uid: context.session.peer?.uid))  // logged either way
            return .simple("OK")
        } catch {
            return .error(.err, "\(error)")
        }
    }
}
