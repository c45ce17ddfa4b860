import ActorKVProtocol
import ActorKVStore

/// The data commands: each parses into one ``ActorKVStore/Operation`` on one namespace, run in
/// that namespace's run; the reply is made from the operation's outcome.
enum KeyValueCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "GET", usage: "GET ns key", arity: .exactly(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .get(args[1]))
        },
        CommandSpec(name: "PUT", usage: "PUT ns key value", arity: .exactly(3), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .put(key: args[1], value: args[2]))
        },
        CommandSpec(name: "DEL", usage: "DEL ns key [key ...]", arity: .atLeast(2), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .delete(args.rest(from: 1)))
        },
        CommandSpec(name: "EXISTS", usage: "EXISTS ns key [key ...]", arity: .atLeast(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .exists(args.rest(from: 1)))
        },
        CommandSpec(name: "COUNT", usage: "COUNT ns", arity: .exactly(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .count)
        },
        CommandSpec(name: "SCAN", usage: "SCAN ns cursor [PREFIX prefix] [COUNT count]", arity: .between(2, 6, step: 2),
                    flags: [.namespaced, .readOnly], parse: parseScan),
        CommandSpec(name: "BATCH", usage: "BATCH ns PUT key value | DEL key [...]", arity: .atLeast(3),
                    flags: [.namespaced, .write], parse: parseBatch),
    ]

    /// The most pairs one SCAN page may hold.
    static let maxScanCount = 100_000

    private static let prefixOption = Array("PREFIX".utf8)
    private static let countOption = Array("COUNT".utf8)
    private static let putOp = Array("PUT".utf8)
    private static let delOp = Array("DEL".utf8)

    private static func parseScan(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try Command.namespace(args[0])
        let cursor: ScanCursor
        do { cursor = try ScanCursor(text: args.array(1)) } catch { throw CommandError(store: error) }
        var prefix: [UInt8] = []
        var count = 10
        var i = 2
        while i + 1 < args.count {
            if CommandTable.matches(args[i], prefixOption) {
                prefix = args.array(i + 1)
            } else if CommandTable.matches(args[i], countOption) {
                // Digits as Redis reads an integer: no '+', no leading zero, no spaces.
                guard let n = ASCIIDecimal.parse(args[i + 1]), n >= 1, n <= maxScanCount else {
                    throw CommandError(.syntax, "COUNT must be an integer from 1 to \(maxScanCount)")
                }
                count = Int(n)
            } else {
                throw CommandError(.syntax, "unknown SCAN option '\(Command.printable(args[i]))' (expected PREFIX or COUNT)")
            }
            i += 2
        }
        return .data(namespace: ns, .scan(cursor, prefix: prefix, limit: count))
    }

    private static func parseBatch(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try Command.namespace(args[0])
        var steps: [BatchStep] = []
        var i = 1
        while i < args.count {
            if CommandTable.matches(args[i], putOp) {
                guard i + 2 < args.count else { throw CommandError(.syntax, "BATCH op \(steps.count + 1): PUT needs a key and a value; nothing was applied") }
                steps.append(.put(key: args.array(i + 1), value: args.array(i + 2)))
                i += 3
            } else if CommandTable.matches(args[i], delOp) {
                guard i + 1 < args.count else { throw CommandError(.syntax, "BATCH op \(steps.count + 1): DEL needs a key; nothing was applied") }
                steps.append(.delete(key: args.array(i + 1)))
                i += 2
            } else {
                throw CommandError(.syntax, "BATCH op \(steps.count + 1): unknown op '\(Command.printable(args[i]))' (expected PUT or DEL); nothing was applied")
            }
        }
        return .data(namespace: ns, .batch(steps))
    }

    /// The reply to an operation's outcome.
    static func reply(for outcome: Outcome) -> Reply {
        switch outcome {
        case .value(let value): return value.map(Reply.bulk) ?? .null
        case .stored: return .simple("OK")
        case .integer(let n): return .integer(Int64(n))
        case .batch(let results): return .array(results.map(reply(for:)))
        case .page(let page):
            var flat: [Reply] = []
            flat.reserveCapacity(page.entries.count * 2)
            for entry in page.entries { flat.append(.bulk(entry.key)); flat.append(.bulk(entry.value)) }
            return .array([.bulk(page.next.text), .array(flat)])
        case .failure(let error): return ErrorMapping.reply(for: error)
        }
    }
}
