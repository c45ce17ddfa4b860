import ActorKVProtocol
import ActorKVStore

/// `MEMORY USAGE ns [SAMPLES count]`: an estimate of the bytes a namespace's data takes in
/// the server's memory, Redis's `MEMORY USAGE` of a hash (what `redis-cli --memkeys` asks of
/// each hash); `MEMORY HELP` lists the subcommands (protocol.md, "MEMORY USAGE"). Redis's other
/// subcommands (STATS, DOCTOR, MALLOC-STATS, PURGE) are not here: INFO's `used_memory` and
/// each namespace's `live_bytes` tell an operator what they would.
enum MemoryCommands {
    /// Their specs. MEMORY USAGE reads the namespace after its subcommand: a data command judged
    /// on the namespace it runs in; MEMORY HELP needs no right.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "MEMORY", usage: usage, arity: .atLeast(1), flags: [.namespaced, .readOnly, .notInMulti],
                    subcommands: ["USAGE", "HELP"], parse: parseMemory),
    ]

    private static let usage = "MEMORY USAGE ns [SAMPLES count] | MEMORY HELP"
    private static let usageWord = Array("USAGE".utf8)
    private static let helpWord = Array("HELP".utf8)
    private static let samplesWord = Array("SAMPLES".utf8)

    /// MEMORY HELP's lines.
    static let helpLines = [
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <ns> [SAMPLES <count>]",
        "    Return an estimate of the bytes the namespace (a Redis hash) <ns> takes in memory:",
        "    its keys and values, the tree and allocations holding them, their deadlines. Exact",
        "    figures, not samples: SAMPLES is accepted and changes nothing.",
        "HELP",
        "    Print this help.",
    ]

    private static func parseMemory(_ args: CommandArguments) throws(CommandError) -> Command {
        let subcommand = args[0]
        if CommandTable.matches(subcommand, usageWord) { return try parseUsage(args) }
        guard CommandTable.matches(subcommand, helpWord) else {
            throw CommandError(.syntax, "unknown MEMORY subcommand '\(Command.printable(subcommand))' (usage: \(usage)); INFO gives the server's used_memory and each namespace's live_bytes")
        }
        guard args.count == 1 else { throw CommandError(.arity, "wrong number of arguments for 'MEMORY HELP' (usage: MEMORY HELP)") }
        var help = LocalCommand(now: { _ in .array(helpLines.map { .simple($0) }) })
        help.flags = [.unrestricted]
        return .local(help)
    }

    /// `MEMORY USAGE ns [SAMPLES count] …`: the estimate, null when `ns` holds no key. SAMPLES
    /// may come more than once, as Redis takes it; its count must be an integer of 0 or more.
    private static func parseUsage(_ args: CommandArguments) throws(CommandError) -> Command {
        guard args.count >= 2 else { throw CommandError(.arity, "wrong number of arguments for 'MEMORY USAGE' (usage: MEMORY USAGE ns [SAMPLES count])") }
        let namespace = try args.namespace(1)
        var index = 2
        while index < args.count {
            guard CommandTable.matches(args[index], samplesWord), index + 1 < args.count else {
                throw CommandError(.syntax, "syntax error: MEMORY USAGE takes only SAMPLES count after the namespace")
            }
            guard let count = ASCIIDecimal.parse(args[index + 1]) else { throw CommandError(.syntax, "value is not an integer or out of range") }
            guard count >= 0 else { throw CommandError(.syntax, "syntax error: SAMPLES must be 0 or more") }
            index += 2
        }
        return .data(namespace: namespace, .memoryUsage, shape: .positiveOrNull)
    }
}
