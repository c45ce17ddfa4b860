import ActorKVProtocol

/// What a command is and needs, declared once per command: the one place that knows its name,
/// shape, flags and how to parse it into something that runs (a ``Command``).
///
/// The specs live by concern in this folder (``KeyValueCommands``, ``ServerCommands``) and are
/// gathered in ``CommandTable``. A new data command is one spec here plus, if the engine lacks
/// it, one ``ActorKVStore/Operation`` (its validation and its resolving in the store's write
/// planner); its reply comes from the operation's outcome.
///
/// A class: each request's lookup hands one out, and copying (then destroying) a struct of two
/// strings and a closure, through an optional, cost a visible share of a lone request's turn.
final class CommandSpec: Sendable {
    /// The name, upper case ASCII; matched in any ASCII letter case.
    let name: String
    /// The usage line shown in arity errors, e.g. `GET ns key`.
    let usage: String
    /// How many arguments it takes after its name.
    let arity: Arity
    /// What it does and where it may run.
    let flags: CommandFlags
    /// Said after the usage in arity errors: where a Redis call of the same name, whose
    /// arguments do not fit (`DEL key`, `SCAN 0`), finds what it wanted here.
    let redisHint: String?
    /// Parses the arguments after the name into what runs. Pure: touches no state.
    let parse: @Sendable (CommandArguments) throws(CommandError) -> Command
    /// The subcommands' names (upper case ASCII) of a container command (CLIENT, CONFIG): what
    /// ``CommandTrace`` names after a `|`. Empty for the others.
    let subcommands: [[UInt8]]
    /// Whether ``subcommands`` holds any: read on every request (``CommandTrace``), where
    /// reading the array itself would retain and release it.
    let hasSubcommands: Bool

    /// A command called `name` (upper case ASCII) with `usage` shown in arity errors (and
    /// `redisHint` after it), taking `arity` arguments after its name, `flags` saying what it
    /// does, parsed by `parse`; `subcommands` names a container's subcommands (upper case).
    init(name: String, usage: String, arity: Arity, flags: CommandFlags, redisHint: String? = nil, subcommands: [String] = [],
         parse: @escaping @Sendable (CommandArguments) throws(CommandError) -> Command) {
        self.name = name
        self.usage = usage
        self.arity = arity
        self.flags = flags
        self.redisHint = redisHint
        self.subcommands = subcommands.map { Array($0.utf8) }
        self.hasSubcommands = !subcommands.isEmpty
        self.parse = parse
    }

    /// The arity error's text: the usage, and the hint for a Redis call.
    var arityMessage: String {
        "wrong number of arguments for '\(name)' (usage: \(usage))" + (redisHint.map { "; \($0)" } ?? "")
    }

    /// Whether `count` arguments (after the name) fit ``arity``.
    func accepts(argumentCount count: Int) -> Bool {
        count >= arity.minimum && (arity.maximum.map { count <= $0 } ?? true)
            && (arity.step <= 1 || (count - arity.minimum) % arity.step == 0)
    }
}

/// How many arguments a command takes after its name.
struct Arity: Sendable, Equatable {
    /// At least this many.
    let minimum: Int
    /// At most this many (nil: no limit).
    let maximum: Int?
    /// Beyond the minimum, in groups of this many (SCAN's options come in pairs).
    var step = 1

    /// Exactly `count` arguments.
    static func exactly(_ count: Int) -> Arity { Arity(minimum: count, maximum: count) }
    /// `count` or more arguments.
    static func atLeast(_ count: Int) -> Arity { Arity(minimum: count, maximum: nil) }
    /// From `minimum` to `maximum` arguments.
    static func between(_ minimum: Int, _ maximum: Int, step: Int = 1) -> Arity {
        Arity(minimum: minimum, maximum: maximum, step: step)
    }
}

/// What a command does and where it may run, as Redis's command table flags say it. Later
/// features consult them (a MULTI queue refuses `notInMulti`, a connection that follows a change
/// feed accepts only `allowedWhileFollowing`); a test checks that they agree with what each
/// command does.
///
/// Each command declares the right it needs (``AccessRights``) with exactly one of `readOnly`
/// (read), `write`, `admin`, `serverOwner` (the server's own uid only) or `unrestricted` (no
/// namespace's data: PING, HELLO, MULTI…); a test walks the table and fails on a command with
/// none or two. The namespace the right is needed on is the first argument (`namespaced`) or
/// every argument (`namespacedArguments`), or the second, the first needing the read right
/// (`sourceThenTarget`, COPY; and the write right too with `movesSource`, RENAME); a write
/// that replies the values it changes (`alsoReads`, HGETDEL) needs the read right as well; a
/// `readOnly` command with none (NAMESPACES, INFO) shows only the namespaces the client may
/// read.
struct CommandFlags: OptionSet, Sendable {
    let rawValue: UInt16

    /// Its first argument is a namespace name.
    static let namespaced = CommandFlags(rawValue: 1 << 0)
    /// Reads a namespace's data and changes nothing.
    static let readOnly = CommandFlags(rawValue: 1 << 1)
    /// Changes a namespace's data: logged, and acknowledged once durable.
    static let write = CommandFlags(rawValue: 1 << 2)
    /// Administers a namespace or the server (COMPACT).
    static let admin = CommandFlags(rawValue: 1 << 3)
    /// Reads or changes the connection's own state (``ClientSession``).
    static let session = CommandFlags(rawValue: 1 << 4)
    /// Accepted while a RESP2 connection follows a change feed (CHANGES, PING, QUIT, RESET).
    static let allowedWhileFollowing = CommandFlags(rawValue: 1 << 5)
    /// Refused inside a MULTI transaction.
    static let notInMulti = CommandFlags(rawValue: 1 << 6)
    /// Runs at once inside MULTI instead of being queued (MULTI, EXEC, DISCARD, WATCH, QUIT, RESET).
    static let transactionControl = CommandFlags(rawValue: 1 << 7)
    /// Needs no right on any namespace: it touches no namespace's data (PING, HELLO, MULTI, EXEC,
    /// whose queued commands are judged themselves).
    static let unrestricted = CommandFlags(rawValue: 1 << 8)
    /// Only the server's own uid may run it (ACL LOAD).
    static let serverOwner = CommandFlags(rawValue: 1 << 9)
    /// Every argument is a namespace name (WATCH), each needing the command's right.
    static let namespacedArguments = CommandFlags(rawValue: 1 << 10)
    /// Its first argument is a namespace it reads (the read right), its second one it changes
    /// (the command's right): COPY.
    static let sourceThenTarget = CommandFlags(rawValue: 1 << 11)
    /// With `sourceThenTarget`: the source is changed too (RENAME empties it into the target),
    /// so it needs the command's right as well as the read right.
    static let movesSource = CommandFlags(rawValue: 1 << 12)
    /// A write that replies the values it changes (HGETDEL, HGETEX): it needs the read right as
    /// well, or a client granted only `write` could read through it.
    static let alsoReads = CommandFlags(rawValue: 1 << 13)

    /// The flags that declare a command's right: a command has exactly one of them.
    static let rightDeclarations: [CommandFlags] = [.readOnly, .write, .admin, .serverOwner, .unrestricted]

    /// The right these flags declare on a namespace (empty for `unrestricted` and `serverOwner`).
    var neededRight: AccessRights {
        if contains(.readOnly) { return .read }
        if contains(.write) { return contains(.alsoReads) ? [.write, .read] : .write }
        if contains(.admin) { return .admin }
        return []
    }
}

/// Every command, gathered from the files of this folder, and the lookup by name.
enum CommandTable {
    /// Every command's spec.
    static let all: [CommandSpec] = KeyValueCommands.specs + HashCommands.specs + FieldExpiryCommands.specs + NamespaceExpiryCommands.specs + KeyspaceCommands.specs + ChangeCommands.specs
        + TransactionCommands.specs + ConnectionCommands.specs + ServerCommands.specs + MemoryCommands.specs + DurabilityCommands.specs + AccessCommands.specs
        + [ShutdownCommand.spec]

    /// What a lookup reads, built once from ``all``: one static, because every access to a
    /// `static let` calls into the runtime's once-check (four of them per lookup were most of the
    /// 1.6% that `swift_once` took of a lone HSET's CPU).
    private static let index = Index(all)

    /// The specs by name.
    private struct Index {
        /// A spec beside its name's bytes, so that a lookup compares bytes without copying specs.
        struct Entry {
            let name: [UInt8]
            let spec: CommandSpec
        }

        /// The longest name's length.
        let longestName: Int
        /// The entries by ``bucket(length:first:)`` of their names: a lookup compares only the
        /// names of its length and initial (it compared them all in order, some sixty, 1.5% of a
        /// pipelined HGET's CPU).
        let buckets: [[Entry]]

        init(_ specs: [CommandSpec]) {
            let entries = specs.map { Entry(name: Array($0.name.utf8), spec: $0) }
            longestName = entries.map(\.name.count).max() ?? 0
            var buckets = [[Entry]](repeating: [], count: CommandTable.bucket(length: longestName, first: 0xFF) + 1)
            for entry in entries { buckets[CommandTable.bucket(length: entry.name.count, first: entry.name[0])].append(entry) }
            self.buckets = buckets
        }
    }

    /// A name's bucket: its length and the low five bits of its first byte (the same for
    /// either case of a letter).
    private static func bucket(length: Int, first: UInt8) -> Int {
        length << 5 | Int(first & 0x1F)
    }

    /// The spec of the command named `name`, compared ASCII case-insensitively.
    static func lookup(_ name: ArraySlice<UInt8>) -> CommandSpec? {
        let index = Self.index
        guard let first = name.first, name.count <= index.longestName else { return nil }
        return name.withUnsafeBufferPointer { given in
            index.buckets[bucket(length: given.count, first: first)].withUnsafeBufferPointer { entries in
                for i in entries.indices where matches(given, entries[i].name) { return entries[i].spec }
                return nil
            }
        }
    }

    /// Whether `given` is the upper-case ASCII word `upper` in any ASCII letter case (no
    /// Unicode folding: `ﬁ` or `ı` never match `FI` or `I`); a byte of `upper` that is not a
    /// letter matches only itself.
    static func matches(_ given: ArraySlice<UInt8>, _ upper: [UInt8]) -> Bool {
        given.withUnsafeBufferPointer { matches($0, upper) }
    }

    private static func matches(_ given: UnsafeBufferPointer<UInt8>, _ upper: [UInt8]) -> Bool {
        guard given.count == upper.count else { return false }
        return upper.withUnsafeBufferPointer { expected in
            for i in 0..<given.count {
                let byte = given[i]
                guard expected[i] >= 0x41 && expected[i] <= 0x5A else {
                    // Not a letter (the `-` of LIB-NAME): that byte itself.
                    guard byte == expected[i] else { return false }
                    continue
                }
                // Letters only: `& 0xDF` upper-cases a-z and would also fold some non-letters.
                guard byte | 0x20 >= 0x61, byte | 0x20 <= 0x7A, byte & 0xDF == expected[i] else { return false }
            }
            return true
        }
    }
}
