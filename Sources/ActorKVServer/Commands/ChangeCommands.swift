import ActorKVProtocol
import ActorKVStore

/// CHANGES, which turns a connection into a stream of a namespace's changes (protocol.md,
/// "CHANGES"). The command registers the follow with the store and the session and replies with
/// the stream's first message; the event loop then takes the follow over and sends the rest
/// (``Follower``).
enum ChangeCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "CHANGES", usage: "CHANGES ns [PREFIX prefix] [FROM seq | SNAPSHOT]", arity: .between(1, 6),
                    flags: [.namespaced, .readOnly, .session, .allowedWhileFollowing, .notInMulti], parse: parseChanges),
    ]

    /// The options of one CHANGES.
    struct Options: Equatable {
        var prefix: [UInt8] = []
        var from: FollowFrom = .now
    }

    private static let prefixOption = Array("PREFIX".utf8)
    private static let fromOption = Array("FROM".utf8)
    private static let snapshotOption = Array("SNAPSHOT".utf8)

    private static func parseChanges(_ args: CommandArguments) throws(CommandError) -> Command {
        let namespace = try args.namespace(0)
        let options = try parseOptions(args)
        let key = FollowKey(namespace: namespace, prefix: options.prefix)
        return .local(LocalCommand { context in await follow(key, from: options.from, context) })
    }

    /// Reads the options after the namespace, in any order and letter case.
    static func parseOptions(_ args: CommandArguments) throws(CommandError) -> Options {
        var options = Options()
        var seen: Set<String> = []
        var i = 1
        while i < args.count {
            let word = args[i]
            let name: String
            if CommandTable.matches(word, prefixOption) {
                name = "PREFIX"
                options.prefix = try value(after: i, of: args, for: name)
                i += 2
            } else if CommandTable.matches(word, fromOption) {
                name = "FROM"
                let text = try value(after: i, of: args, for: name)
                guard let n = ASCIIDecimal.parse(text[...]), n >= 0 else {
                    throw CommandError(.syntax, "FROM takes a sequence number (a decimal integer from 0), not '\(Command.printable(text[...]))'")
                }
                options.from = .sequence(UInt64(n))
                i += 2
            } else if CommandTable.matches(word, snapshotOption) {
                name = "SNAPSHOT"
                options.from = .snapshot
                i += 1
            } else {
                throw CommandError(.syntax, "unknown CHANGES option '\(Command.printable(word))' (expected PREFIX, FROM or SNAPSHOT)")
            }
            guard seen.insert(name).inserted else { throw CommandError(.syntax, "CHANGES option \(name) given twice") }
        }
        if seen.contains("FROM") && seen.contains("SNAPSHOT") {
            throw CommandError(.syntax, "FROM and SNAPSHOT cannot be combined")
        }
        return options
    }

    private static func value(after index: Int, of args: CommandArguments, for name: String) throws(CommandError) -> [UInt8] {
        guard index + 1 < args.count else { throw CommandError(.syntax, "CHANGES option \(name) needs a value") }
        return args.array(index + 1)
    }

    /// Starts following `key` on the session; the reply is the stream's first message.
    private static func follow(_ key: FollowKey, from start: FollowFrom, _ context: CommandContext) async -> Reply {
        switch context.session.reserveFollow(key) {
        case .claimed: break
        case .alreadyFollowed:
            return .error(.err, "already following namespace '\(key.namespace)' with prefix '\(Command.printable(key.prefix[...]))' on this connection")
        case .tooMany:
            return .error(.err, "this connection follows \(ClientSession.maximumFollows) namespaces and prefixes already, the most one may: "
                          + "follow a shorter prefix, or from another connection")
        }
        do {
            let started = try await context.backend.follow(key.namespace, from: start)
            context.session.addFollow(NewFollow(key: key, start: started))
            return ChangeMessages.header(namespace: key.namespace, sequence: started.sequence)
        } catch {
            context.session.releaseFollow(key)
            return ErrorMapping.reply(for: error)
        }
    }
}
