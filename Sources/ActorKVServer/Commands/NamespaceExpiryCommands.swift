import ActorKVProtocol
import ActorKVStore

/// Redis's deadline of a whole key, a hash being a namespace here (protocol.md, "A deadline on a
/// whole namespace"): `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` and `PERSIST` of one name
/// change it (one ``ActorKVStore/Operation/setNamespaceDeadline(_:)``), `TTL`, `PTTL`,
/// `EXPIRETIME` and `PEXPIRETIME` read it (``ActorKVStore/Operation/namespaceDeadline``).
/// `PEXPIRE`, `PERSIST` and `PTTL` are also ActorKV's own commands of one key (`PEXPIRE ns key
/// ms`): ``KeyValueCommands`` parses those and hands the forms with one name here.
enum NamespaceExpiryCommands {
    /// The specs of the commands that are only Redis's (the others are ``KeyValueCommands``').
    static let specs: [CommandSpec] = [
        setter("EXPIRE", unit: 1000, absolute: false, time: "seconds"),
        setter("EXPIREAT", unit: 1000, absolute: true, time: "unix-time-seconds"),
        setter("PEXPIREAT", unit: 1, absolute: true, time: "unix-time-milliseconds"),
        reader("TTL", shape: .secondsLeft),
        reader("EXPIRETIME", shape: .secondsDeadline),
        reader("PEXPIRETIME", shape: .millisecondsDeadline),
    ]

    /// `name ns time [NX | XX | GT | LT]`.
    private static func setter(_ name: String, unit: Int64, absolute: Bool, time: String) -> CommandSpec {
        CommandSpec(name: name, usage: "\(name) ns \(time) [NX | XX | GT | LT]", arity: .atLeast(2), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            try parseSetter(args, name: name, unit: unit, absolute: absolute)
        }
    }

    /// `name ns`, replying the namespace's deadline in `shape`'s form.
    private static func reader(_ name: String, shape: ReplyShape) -> CommandSpec {
        CommandSpec(name: name, usage: "\(name) ns", arity: .exactly(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .namespaceDeadline, shape: shape)
        }
    }

    /// `PEXPIRE ns ms [NX | XX | GT | LT]`: Redis's form, the namespace's own deadline.
    static func parsePExpire(_ args: CommandArguments) throws(CommandError) -> Command {
        try parseSetter(args, name: "PEXPIRE", unit: 1, absolute: false)
    }

    /// `PTTL ns`: the milliseconds the namespace has left.
    static func parsePTTL(_ args: CommandArguments) throws(CommandError) -> Command {
        .data(namespace: try args.namespace(0), .namespaceDeadline, shape: .millisecondsLeft)
    }

    /// `PERSIST ns`: removes the namespace's deadline.
    static func parsePersist(_ args: CommandArguments) throws(CommandError) -> Command {
        .data(namespace: try args.namespace(0), .setNamespaceDeadline(NamespaceDeadline(.none)))
    }

    /// `name ns time [option …]`, as Redis reads it: the options first (any of `NX`, `XX`, `GT`,
    /// `LT`, in any case, compatible ones together), then the time, an integer in `unit`
    /// milliseconds from now or (`absolute`) since the epoch; a time at or before now deletes
    /// every key once the condition holds.
    private static func parseSetter(_ args: CommandArguments, name: String, unit: Int64, absolute: Bool) throws(CommandError) -> Command {
        let ns = try args.namespace(0)
        let condition = try parseCondition(args, from: 2)
        guard let time = ASCIIDecimal.parse(args[1]) else { throw CommandError(.syntax, "value is not an integer or out of range") }
        let (milliseconds, overflow) = time.multipliedReportingOverflow(by: unit)
        guard !overflow else { throw KeyValueCommands.invalidExpireTime(name.lowercased()) }
        let deadline: KeyExpiry.Deadline
        if absolute {
            deadline = .at(milliseconds: UInt64(max(0, milliseconds)))
        } else if milliseconds <= 0 {
            deadline = .at(milliseconds: 0)  // already passed
        } else {
            guard KeyValueCommands.deadlineFits(milliseconds) else { throw KeyValueCommands.invalidExpireTime(name.lowercased()) }
            deadline = .after(milliseconds: UInt64(milliseconds))
        }
        return .data(namespace: ns, .setNamespaceDeadline(NamespaceDeadline(deadline, condition: condition)))
    }

    /// The condition the words from argument `index` on give, with Redis's errors: an unknown
    /// word, `NX` with another, `GT` with `LT`. `XX` with `GT` is `GT` (which never applies to a
    /// namespace without a deadline anyway); `XX` with `LT` is refused here.
    static func parseCondition(_ args: CommandArguments, from index: Int) throws(CommandError) -> KeyExpiry.Condition {
        var given: [KeyExpiry.Condition] = []
        for i in index..<max(index, args.count) {
            guard let condition = FieldExpiryCommands.condition(args[i]) else {
                throw CommandError(.syntax, "Unsupported option \(Command.printable(args[i]))")
            }
            if !given.contains(condition) { given.append(condition) }
        }
        if given.contains(.noDeadline) && given.count > 1 {
            throw CommandError(.syntax, "NX and XX, GT or LT options at the same time are not compatible")
        }
        if given.contains(.later) && given.contains(.earlier) {
            throw CommandError(.syntax, "GT and LT options at the same time are not compatible")
        }
        if given.contains(.hasDeadline) && given.contains(.earlier) {
            throw CommandError(.syntax, "XX and LT options at the same time are not supported: use LT alone, which also applies to a namespace without a deadline, or XX alone")
        }
        if given.contains(.later) { return .later }
        return given.first ?? .always
    }

    /// The reply to `.namespaceDeadline`'s outcome in `shape`'s form, at `now` (milliseconds since
    /// the epoch): -2 no key, -1 no deadline, else the time left (TTL, PTTL) or the deadline
    /// (EXPIRETIME, PEXPIRETIME); seconds rounded to the nearest, as Redis's.
    static func reply(deadline outcome: Outcome, shape: ReplyShape, now: UInt64) -> Reply {
        guard case .integer(let deadline) = outcome else { return KeyValueCommands.reply(for: outcome) }
        guard deadline >= 0 else { return .integer(Int64(deadline)) }
        let ms = UInt64(deadline)
        switch shape {
        case .secondsLeft: return .integer(Int64((ms - min(ms, now) + 500) / 1000))
        case .millisecondsLeft: return .integer(Int64(ms - min(ms, now)))
        case .secondsDeadline: return .integer(Int64((ms + 500) / 1000))
        default: return .integer(Int64(clamping: ms))
        }
    }
}
