import ActorKVProtocol
import ActorKVStore

/// Redis's keyspace commands, a namespace that holds at least one key being one of Redis's keys,
/// a hash (protocol.md, "Namespaces as Redis hashes"): `KEYS`, `DBSIZE`, `RANDOMKEY`, `TYPE` and SCAN's keyspace form
/// (`SCAN cursor …`, parsed here for ``KeyValueCommands``' SCAN). Those that list namespaces
/// list only those the client may read; `TYPE` is a data command, a count of one namespace.
/// (`EXISTS` of one name, the same question as TYPE's, is ``KeyValueCommands``'; `TOUCH` asks
/// it of several.) `UNLINK`
/// removes namespaces, and `FLUSHDB`/`FLUSHALL` every one of them.
enum KeyspaceCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "KEYS", usage: "KEYS pattern", arity: .exactly(1), flags: [.readOnly]) { (args) throws(CommandError) in
            let glob = RedisGlob(args.array(0))
            return .local(LocalCommand { context in
                await listing(context) { names in .array(names.filter { glob.matches($0.utf8) }.map { .bulk(Array($0.utf8)) }) }
            })
        },
        CommandSpec(name: "DBSIZE", usage: "DBSIZE", arity: .exactly(0), flags: [.readOnly]) { (_) throws(CommandError) in
            .local(LocalCommand { context in await listing(context) { .integer(Int64($0.count)) } })
        },
        CommandSpec(name: "RANDOMKEY", usage: "RANDOMKEY", arity: .exactly(0), flags: [.readOnly]) { (_) throws(CommandError) in
            .local(LocalCommand { context in await listing(context) { $0.randomElement().map { .bulk(Array($0.utf8)) } ?? .null } })
        },
        CommandSpec(name: "UNLINK", usage: "UNLINK ns [ns ...]", arity: .atLeast(1), flags: [.write, .namespacedArguments, .notInMulti], parse: parseUnlink),
        CommandSpec(name: "RENAME", usage: "RENAME ns newns", arity: .exactly(2), flags: [.write, .sourceThenTarget, .movesSource, .notInMulti]) { (args) throws(CommandError) in
            try parseRename(args, replacing: true)
        },
        CommandSpec(name: "RENAMENX", usage: "RENAMENX ns newns", arity: .exactly(2), flags: [.write, .sourceThenTarget, .movesSource, .notInMulti]) { (args) throws(CommandError) in
            try parseRename(args, replacing: false)
        },
        CommandSpec(name: "COPY", usage: "COPY ns newns [DB 0] [REPLACE]", arity: .atLeast(2), flags: [.write, .sourceThenTarget, .notInMulti], parse: parseCopy),
        // Judged here, not by a first argument: the write right on every namespace (``flush``).
        CommandSpec(name: "FLUSHDB", usage: "FLUSHDB [ASYNC|SYNC]", arity: .between(0, 1), flags: [.write, .notInMulti], parse: parseFlush),
        CommandSpec(name: "FLUSHALL", usage: "FLUSHALL [ASYNC|SYNC]", arity: .between(0, 1), flags: [.write, .notInMulti], parse: parseFlush),
        CommandSpec(name: "TYPE", usage: "TYPE ns", arity: .exactly(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .count, shape: .keyType)
        },
        CommandSpec(name: "TOUCH", usage: "TOUCH ns [ns ...]", arity: .atLeast(1), flags: [.readOnly, .namespacedArguments, .notInMulti],
                    parse: parseTouch),
    ]

    /// `TOUCH ns [ns ...]`, Redis's: `:n`, how many of the names are namespaces holding a key (a
    /// name given twice counts twice, as in Redis). Redis also marks each key as just used, for
    /// its eviction; ActorKV evicts nothing, so nothing else happens.
    private static func parseTouch(_ args: CommandArguments) throws(CommandError) -> Command {
        var names: [String] = []
        for i in 0..<args.count { names.append(try args.namespace(i)) }
        let touching = names
        return .local(LocalCommand { context in
            var held: Int64 = 0
            for name in touching {
                let outcome = await context.execute([.count], inNamespace: name).outcomes[0]
                // EXISTS ns's answer, 1 or 0, or the namespace's error (corrupt, unavailable).
                let reply = KeyValueCommands.reply(for: outcome, ofBatch: false, shape: .nonEmpty)
                guard case .integer(let one) = reply else { return reply }
                held += one
            }
            return .integer(held)
        })
    }

    /// `UNLINK ns [ns ...]`: removes each namespace in turn (Redis's UNLINK of hashes); `:n`, how
    /// many existed. An error stops it, saying how many of those before were removed.
    private static func parseUnlink(_ args: CommandArguments) throws(CommandError) -> Command {
        var names: [String] = []
        for i in 0..<args.count { names.append(try args.namespace(i)) }
        let removing = names
        return .local(LocalCommand { context in await unlink(removing, in: context.backend) })
    }

    private static func unlink(_ names: [String], in backend: any DataBackend) async -> Reply {
        var removed = 0
        for name in names {
            do throws(StoreError) {
                if try await backend.removeNamespace(name) { removed += 1 }
            } catch {
                guard removed > 0 else { return ErrorMapping.reply(for: error) }
                return .error(ErrorMapping.wireCode(for: error.code), "\(error.message); the \(removed) namespace(s) named before '\(name)' that existed were removed")
            }
        }
        return .integer(Int64(removed))
    }

    /// `RENAME ns newns` (`+OK`) and `RENAMENX ns newns` (`:1`, or `:0` when `newns` holds a
    /// key): Redis's RENAME of a hash, a namespace being one (protocol.md, "RENAME, RENAMENX").
    private static func parseRename(_ args: CommandArguments, replacing: Bool) throws(CommandError) -> Command {
        let (source, target) = (try args.namespace(0), try args.namespace(1))
        return .local(LocalCommand { context in
            do {
                switch try await context.backend.renameNamespace(source, to: target, replacing: replacing) {
                case .renamed: return replacing ? .simple("OK") : .integer(1)
                case .targetExists: return .integer(0)
                case .noSource: return .error(.err, "no such key")
                }
            } catch {
                return ErrorMapping.reply(for: error)
            }
        })
    }

    /// `COPY ns newns [DB 0] [REPLACE]`: `:1` once `newns` holds a copy of `ns`'s keys, `:0`
    /// when `ns` holds none or, without REPLACE, `newns` holds one: Redis's COPY of a hash, a
    /// namespace being one (protocol.md, "COPY"). Redis's options in any order; one database.
    private static func parseCopy(_ args: CommandArguments) throws(CommandError) -> Command {
        let (source, target) = (try args.namespace(0), try args.namespace(1))
        var replacing = false
        var index = 2
        while index < args.count {
            if CommandTable.matches(args[index], Array("REPLACE".utf8)) {
                replacing = true
            } else if CommandTable.matches(args[index], Array("DB".utf8)), index + 1 < args.count {
                index += 1
                guard let database = ASCIIDecimal.parse(args[index]) else { throw CommandError(.syntax, "value is not an integer or out of range") }
                guard database == 0 else {
                    throw CommandError(.syntax, "ActorKV has one database, 0; namespaces take the place of Redis's numbered databases")
                }
            } else {
                throw CommandError(.syntax, "syntax error: COPY takes REPLACE and DB 0")
            }
            index += 1
        }
        let replace = replacing
        return .local(LocalCommand { context in
            do {
                switch try await context.backend.copyNamespace(source, to: target, replacing: replace) {
                case .copied: return .integer(1)
                case .noSource, .targetExists: return .integer(0)
                }
            } catch {
                return ErrorMapping.reply(for: error)
            }
        })
    }

    private static let flushModes = [Array("ASYNC".utf8), Array("SYNC".utf8)]

    /// `FLUSHDB [ASYNC|SYNC]` and `FLUSHALL [ASYNC|SYNC]` (one database, so the same): every
    /// namespace removed in turn as UNLINK removes it, then `+OK`. Both modes reply once the
    /// removals are durable (protocol.md, "FLUSHDB, FLUSHALL").
    private static func parseFlush(_ args: CommandArguments) throws(CommandError) -> Command {
        if args.count == 1, !flushModes.contains(where: { CommandTable.matches(args[0], $0) }) {
            throw CommandError(.syntax, "syntax error: the only option is ASYNC or SYNC (both remove every namespace before replying)")
        }
        return .local(LocalCommand { context in await flush(context) })
    }

    /// Removes every namespace, after checking that the connection holds the write right on
    /// each (under `--acl`). One that cannot be removed (corrupt files, an I/O error) is left and
    /// the others still removed; the reply is then the first such error, naming those left.
    private static func flush(_ context: CommandContext) async -> Reply {
        let names: [String]
        do { names = try await context.backend.listNamespaces() } catch { return ErrorMapping.reply(for: error) }
        if let access = context.access, let peer = context.judgedPeer {
            // Not how many: that would count namespaces the client may not see.
            guard names.allSatisfy({ access.rights(of: peer, on: $0).contains(.write) }) else {
                return ErrorMapping.reply(for: CommandError(.wire(.noPerm), "FLUSHDB and FLUSHALL remove every namespace, and uid \(peer.uid) lacks the write permission on some; nothing was removed"))
            }
        }
        var first: StoreError?
        var left: [String] = []
        for name in names {
            do throws(StoreError) {
                _ = try await context.backend.removeNamespace(name)
            } catch {
                first = first ?? error
                left.append(name)
            }
        }
        guard let first else { return .simple("OK") }
        let named = left.prefix(5).map { "'\($0)'" }.joined(separator: ", ") + (left.count > 5 ? " and \(left.count - 5) more" : "")
        return .error(ErrorMapping.wireCode(for: first.code), "\(first.message); \(names.count - left.count) of \(names.count) namespaces were removed, not \(named)")
    }

    private static let typeOption = Array("TYPE".utf8)
    private static let hashWord = Array("hash".utf8)

    /// `SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]` (an odd number of arguments, the
    /// first a decimal integer): every namespace holding keys in one page, so its next cursor is
    /// always `0` and any other than `0` given is refused. COUNT is a hint, as in Redis, checked
    /// and then unused; a TYPE other than `hash` (any case) lists nothing, as Redis's of a type
    /// it holds no key of.
    static func parseScan(_ args: CommandArguments) throws(CommandError) -> Command {
        guard let cursor = ASCIIDecimal.parse(args[0]), cursor == 0 else {
            throw CommandError(.store(.invalidCursor), "invalid cursor '\(Command.printable(args[0]))': SCAN of the keyspace answers in one page, whose next cursor is 0; start from 0")
        }
        var glob: RedisGlob?
        var hashesOnly = true
        for i in stride(from: 1, to: args.count, by: 2) {
            if CommandTable.matches(args[i], HashCommands.matchOption) {
                glob = RedisGlob(args.array(i + 1))
            } else if CommandTable.matches(args[i], HashCommands.countOption) {
                guard let n = ASCIIDecimal.parse(args[i + 1]), n >= 1 else {
                    throw CommandError(.syntax, "COUNT must be a positive integer")
                }
            } else if CommandTable.matches(args[i], typeOption) {
                hashesOnly = ServerCommands.lowercasedASCII(args[i + 1]) == hashWord
            } else {
                throw CommandError(.syntax, "unknown SCAN option '\(Command.printable(args[i]))' (expected MATCH, COUNT or TYPE; SCAN ns cursor pages a namespace)")
            }
        }
        let pattern = glob
        let listsAny = hashesOnly
        // Judged as a read that names no namespace (as NAMESPACES), not by its first argument.
        var command = LocalCommand { context in
            await listing(context) { names in
                let shown = listsAny ? names.filter { pattern?.matches($0.utf8) ?? true } : []
                return .array([.bulk(Array("0".utf8)), .array(shown.map { .bulk(Array($0.utf8)) })])
            }
        }
        command.flags = [.readOnly]
        return .local(command)
    }

    /// The reply `reply` makes of the namespaces that hold keys and that the client may read, in
    /// name order (the back end's error instead, if listing them failed).
    private static func listing(_ context: CommandContext, _ reply: ([String]) -> Reply) async -> Reply {
        let shows = context.readableNamespaces
        do {
            return reply(try await context.backend.listNamespacesHoldingKeys().filter(shows))
        } catch {
            return ErrorMapping.reply(for: error)
        }
    }
}
