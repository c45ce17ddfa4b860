import ActorKVProtocol
import ActorKVStore

/// Redis 7.4's hash-field expiry commands over a namespace's keys (protocol.md, "Namespaces as
/// Redis hashes", "Field expiry"): `HEXPIRE`, `HPEXPIRE`, `HEXPIREAT`, `HPEXPIREAT` and
/// `HPERSIST` change deadlines (one ``ActorKVStore/Operation/expire(_:)``, one log record), as
/// Redis 8's `HGETEX` does, which replies the fields' values;
/// `HTTL`, `HPTTL`, `HEXPIRETIME` and `HPEXPIRETIME` read them (one
/// ``ActorKVStore/Operation/deadlines(_:)``). Each takes `FIELDS numfields field …` and replies
/// one integer per field, Redis's numbers.
enum FieldExpiryCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        setter("HEXPIRE", unit: 1000, absolute: false, time: "seconds"),
        setter("HPEXPIRE", unit: 1, absolute: false, time: "milliseconds"),
        setter("HEXPIREAT", unit: 1000, absolute: true, time: "unix-time-seconds"),
        setter("HPEXPIREAT", unit: 1, absolute: true, time: "unix-time-milliseconds"),
        CommandSpec(name: "HPERSIST", usage: "HPERSIST ns FIELDS numfields field [field ...]", arity: .atLeast(4),
                    flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let keys = try fields(args, at: 1, countProblem: "Number of fields must be a positive integer")
            return .data(namespace: try args.namespace(0), .expire(KeyExpiry(keys: keys, deadline: .none)))
        },
        CommandSpec(name: "HGETEX", usage: "HGETEX ns [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | PERSIST] FIELDS numfields field [field ...]",
                    arity: .atLeast(4), flags: [.namespaced, .write, .alsoReads], parse: parseGetAndExpire),
        CommandSpec(name: "HSETEX", usage: setAllUsage, arity: .atLeast(5), flags: [.namespaced, .write], parse: parseSetAll),
        reader("HTTL", shape: .secondsLeft),
        reader("HPTTL", shape: .millisecondsLeft),
        reader("HEXPIRETIME", shape: .secondsDeadline),
        reader("HPEXPIRETIME", shape: .millisecondsDeadline),
    ]

    /// `name ns time [NX | XX | GT | LT] FIELDS numfields field …`: `time` in `unit`
    /// milliseconds, from now or (`absolute`) since the epoch.
    private static func setter(_ name: String, unit: Int64, absolute: Bool, time: String) -> CommandSpec {
        CommandSpec(name: name, usage: "\(name) ns \(time) [NX | XX | GT | LT] FIELDS numfields field [field ...]", arity: .atLeast(5),
                    flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            let milliseconds = try parseTime(args[1], unit: unit, absolute: absolute, command: name.lowercased())
            let condition = Self.condition(args[2])
            let keys = try fields(args, at: condition == nil ? 2 : 3, countProblem: "Parameter `numFields` should be greater than 0")
            let deadline: KeyExpiry.Deadline = absolute ? .at(milliseconds: milliseconds) : .after(milliseconds: milliseconds)
            return .data(namespace: ns, .expire(KeyExpiry(keys: keys, deadline: deadline, condition: condition ?? .always)))
        }
    }

    /// Redis 8's `HGETEX ns [EX s | PX ms | EXAT s | PXAT ms | PERSIST] FIELDS numfields field …`:
    /// the fields' values, their deadlines then set or removed (deleted, for a time at or before
    /// now) in the same write; without an option, `HMGET`.
    private static func parseGetAndExpire(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try args.namespace(0)
        let countProblem = "Number of fields must be a positive integer"
        if CommandTable.matches(args[1], fieldsWord) {
            return .data(namespace: ns, .getMany(try fieldSlices(args, at: 1, countProblem: countProblem)))
        }
        if CommandTable.matches(args[1], persistWord) {
            let keys = try fields(args, at: 2, countProblem: countProblem)
            return .data(namespace: ns, .expire(KeyExpiry(keys: keys, deadline: .none, yields: .values)))
        }
        guard let option = timeOptions.first(where: { CommandTable.matches(args[1], $0.word) }) else {
            throw CommandError(.syntax, "Mandatory argument FIELDS is missing or not at the right position")
        }
        let milliseconds = try parseTime(args[2], unit: option.unit, absolute: option.absolute, command: "hgetex")
        let keys = try fields(args, at: 3, countProblem: countProblem)
        let deadline: KeyExpiry.Deadline = option.absolute ? .at(milliseconds: milliseconds) : .after(milliseconds: milliseconds)
        return .data(namespace: ns, .expire(KeyExpiry(keys: keys, deadline: deadline, yields: .values)))
    }

    private static let setAllUsage = "HSETEX ns [FNX | FXX] [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL] FIELDS numfields field value [field value ...]"

    /// Redis 8's `HSETEX ns [FNX | FXX] [EX s | PX ms | EXAT s | PXAT ms | KEEPTTL] FIELDS
    /// numfields field value …`.
    private static func parseSetAll(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try args.namespace(0)
        let (presence, deadline, index) = try setAllOptions(args)
        guard index + 1 < args.count else { throw CommandError(.syntax, "Mandatory argument FIELDS is missing or not at the right position") }
        guard let count = ASCIIDecimal.parse(args[index + 1]), count > 0 else { throw CommandError(.syntax, "invalid number of fields") }
        let pairs = args.count - index - 2
        guard pairs % 2 == 0, count == pairs / 2 else {
            throw CommandError(.arity, "wrong number of arguments for 'HSETEX': numfields \(count) needs \(count) field-value pairs, \(pairs) arguments follow (usage: \(setAllUsage))")
        }
        var keys: [[UInt8]] = []
        var values: [[UInt8]] = []
        keys.reserveCapacity(Int(count))
        values.reserveCapacity(Int(count))
        for field in stride(from: index + 2, to: args.count, by: 2) {
            keys.append(args.array(field))
            values.append(args.array(field + 1))
        }
        return .data(namespace: ns, .setAll(KeySetting(keys: keys, values: values, presence: presence, deadline: deadline)))
    }

    /// HSETEX's options, in any order before `FIELDS`, each at most once, and the index of
    /// `FIELDS` (or of the end, without it).
    private static func setAllOptions(_ args: CommandArguments) throws(CommandError) -> (KeySetting.Presence, KeySetting.Deadline, Int) {
        var presence: KeySetting.Presence?
        var deadline: KeySetting.Deadline?
        var index = 1
        while index < args.count, !CommandTable.matches(args[index], fieldsWord) {
            let word = args[index]
            if let wanted = presenceWords.first(where: { CommandTable.matches(word, $0.word) })?.presence {
                guard presence == nil else { throw CommandError(.syntax, "Only one of FXX or FNX arguments can be specified") }
                presence = wanted
            } else if CommandTable.matches(word, keepWord) {
                guard deadline == nil else { throw oneDeadline }
                deadline = .keep
            } else if let option = timeOptions.first(where: { CommandTable.matches(word, $0.word) }) {
                guard deadline == nil else { throw oneDeadline }
                guard index + 1 < args.count else { throw CommandError(.syntax, "value is not an integer or out of range") }
                let milliseconds = try parseTime(args[index + 1], unit: option.unit, absolute: option.absolute, command: "hsetex")
                deadline = option.absolute ? .at(milliseconds: milliseconds) : .after(milliseconds: milliseconds)
                index += 1
            } else {
                throw CommandError(.syntax, "unknown argument '\(Command.printable(word))' (usage: \(setAllUsage))")
            }
            index += 1
        }
        return (presence ?? .any, deadline ?? .none, index)
    }

    private static let oneDeadline = CommandError(.syntax, "Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified")
    private static let keepWord = Array("KEEPTTL".utf8)
    private static let presenceWords: [(word: [UInt8], presence: KeySetting.Presence)] = [
        (Array("FNX".utf8), .allAbsent), (Array("FXX".utf8), .allPresent),
    ]
    private static let persistWord = Array("PERSIST".utf8)
    private static let timeOptions: [(word: [UInt8], unit: Int64, absolute: Bool)] = [
        (Array("EX".utf8), 1000, false), (Array("PX".utf8), 1, false), (Array("EXAT".utf8), 1000, true), (Array("PXAT".utf8), 1, true),
    ]

    /// `name ns FIELDS numfields field …`, replying each field's deadline in `shape`'s form.
    private static func reader(_ name: String, shape: ReplyShape) -> CommandSpec {
        CommandSpec(name: name, usage: "\(name) ns FIELDS numfields field [field ...]", arity: .atLeast(4),
                    flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            let keys = try fields(args, at: 1, countProblem: "Number of fields must be a positive integer")
            return .data(namespace: try args.namespace(0), .deadlines(keys), shape: shape)
        }
    }

    /// A time in `unit` milliseconds as milliseconds: a decimal integer from 0 whose deadline
    /// fits in 63 bits (Redis's errors otherwise).
    static func parseTime(_ text: ArraySlice<UInt8>, unit: Int64, absolute: Bool, command: String) throws(CommandError) -> UInt64 {
        guard let time = ASCIIDecimal.parse(text) else { throw CommandError(.syntax, "value is not an integer or out of range") }
        guard time >= 0 else { throw CommandError(.syntax, "invalid expire time, must be >= 0") }
        let (milliseconds, overflow) = time.multipliedReportingOverflow(by: unit)
        guard !overflow, absolute || KeyValueCommands.deadlineFits(milliseconds) else {
            throw KeyValueCommands.invalidExpireTime(command)
        }
        return UInt64(milliseconds)
    }

    /// The condition word `NX`, `XX`, `GT` or `LT` (any ASCII case), or nil for any other word.
    static func condition(_ word: ArraySlice<UInt8>) -> KeyExpiry.Condition? {
        conditionWords.first { CommandTable.matches(word, $0.word) }?.condition
    }

    private static let conditionWords: [(word: [UInt8], condition: KeyExpiry.Condition)] = [
        (Array("NX".utf8), .noDeadline), (Array("XX".utf8), .hasDeadline), (Array("GT".utf8), .later), (Array("LT".utf8), .earlier),
    ]

    /// The fields after `FIELDS numfields` at argument `index`: `numfields` must be a positive
    /// integer (else `countProblem`) and the number of fields after it.
    static func fields(_ args: CommandArguments, at index: Int, countProblem: String) throws(CommandError) -> [[UInt8]] {
        try checkFields(args, at: index, countProblem: countProblem)
        return args.rest(from: index + 2)
    }

    /// ``fields(_:at:countProblem:)``, each read in place (for a read, which keeps no key).
    static func fieldSlices(_ args: CommandArguments, at index: Int, countProblem: String) throws(CommandError) -> [ArraySlice<UInt8>] {
        try checkFields(args, at: index, countProblem: countProblem)
        return args.slices(from: index + 2)
    }

    /// Checks `FIELDS numfields field …` at argument `index`.
    private static func checkFields(_ args: CommandArguments, at index: Int, countProblem: String) throws(CommandError) {
        guard index + 1 < args.count, CommandTable.matches(args[index], fieldsWord) else {
            throw CommandError(.syntax, "Mandatory argument FIELDS is missing or not at the right position")
        }
        guard let count = ASCIIDecimal.parse(args[index + 1]), count > 0 else { throw CommandError(.syntax, countProblem) }
        guard count == args.count - index - 2 else {
            throw CommandError(.syntax, "The `numfields` parameter must match the number of arguments")
        }
    }

    private static let fieldsWord = Array("FIELDS".utf8)

    /// The reply to `.deadlines`' outcome in `shape`'s form, at `now` (milliseconds since the
    /// epoch): per field -2 absent (or past its deadline), -1 no deadline, else the time left
    /// (HTTL, HPTTL) or the deadline (HEXPIRETIME, HPEXPIRETIME), seconds rounded up as Redis's.
    static func reply(deadlines outcomes: [Outcome], shape: ReplyShape, now: UInt64) -> Reply {
        .array(outcomes.map { outcome in
            guard case .integer(let deadline) = outcome else { return KeyValueCommands.reply(for: outcome) }
            guard deadline >= 0 else { return .integer(Int64(deadline)) }
            let ms = UInt64(deadline)
            guard ms >= now else { return .integer(-2) }
            switch shape {
            case .secondsLeft: return .integer(Int64((ms - now + 999) / 1000))
            case .millisecondsLeft: return .integer(Int64(ms - now))
            case .secondsDeadline: return .integer(Int64((ms + 999) / 1000))
            default: return .integer(Int64(ms))
            }
        })
    }
}
