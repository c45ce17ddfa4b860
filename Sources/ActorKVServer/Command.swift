import ActorKVProtocol
import ActorKVStore

/// A request parsed and checked, ready to run. Pure: parsing touches no state.
public enum Command: Sendable {
    /// PING [message]
    case ping([UInt8]?)
    /// QUIT
    case quit
    /// INFO
    case info
    /// NAMESPACES
    case namespaces
    /// COMPACT ns
    case compact(namespace: String)
    /// A data operation on one namespace (GET, PUT, DEL, EXISTS, COUNT, SCAN, BATCH).
    case data(namespace: String, Operation)
    /// COMMAND and CONFIG, which redis-cli and redis-benchmark send on connect: answered with an
    /// empty array so that they proceed.
    case clientProbe

    /// Parses the arguments of one request (`arguments[0]` is the command name, any case).
    public static func parse(_ arguments: [[UInt8]]) throws(CommandError) -> Command {
        try parse(Request(arguments))
    }

    /// About how many reply entries (keys and values) `request` can produce: a SCAN's COUNT, 1 for
    /// any other request, whose reply is no larger than what the request itself carries or one
    /// stored value (held by reference until it is sent). The event loop bounds by this what one
    /// connection has in flight, since a short SCAN request can ask for 100,000 entries.
    static func replyWeight(of request: Request) -> Int {
        guard request.count >= 3, CommandSpec.matches(request[0], scanName),
              case .data(_, .scan(_, _, let limit))? = try? parse(request) else { return 1 }
        return limit
    }

    private static let scanName = Array("SCAN".utf8)

    /// Parses one decoded request (its first argument is the command name, any case).
    public static func parse(_ request: Request) throws(CommandError) -> Command {
        guard !request.isEmpty else { throw CommandError(.syntax, "empty command") }
        let first = request[0]
        guard let (name, spec) = CommandSpec.lookup(first) else {
            throw CommandError(.unknownCommand, "unknown command '\(printable(first))'")
        }
        let count = request.count - 1
        guard count >= spec.minArguments, spec.maxArguments.map({ count <= $0 }) ?? true,
              spec.argumentsPerStep <= 1 || (count - spec.minArguments) % spec.argumentsPerStep == 0 else {
            throw CommandError(.arity, "wrong number of arguments for '\(name)' (usage: \(spec.usage))")
        }
        return try spec.parse(CommandArguments(request))
    }

    static func namespace(_ bytes: ArraySlice<UInt8>) throws(CommandError) -> String {
        do { return try NamespaceName.validate(bytes) } catch { throw CommandError(store: error) }
    }

    /// Shows bytes in an error message: printable ASCII as is, anything else as `\xHH`, cut at 64.
    static func printable(_ bytes: ArraySlice<UInt8>) -> String {
        var out = ""
        for b in bytes.prefix(64) {
            if b >= 0x20 && b < 0x7F && b != UInt8(ascii: "'") { out.append(Character(Unicode.Scalar(b))) } else {
                out += "\\x" + (b < 16 ? "0" : "") + String(b, radix: 16)
            }
        }
        return bytes.count > 64 ? out + "..." : out
    }
}

/// Why a request was refused before it ran. The connection stays usable.
public struct CommandError: Error, Sendable, Equatable {
    /// The kinds of refusal.
    public enum Kind: Sendable, Equatable {
        /// No such command.
        case unknownCommand
        /// Too few or too many arguments.
        case arity
        /// An argument has the wrong form (a bad COUNT, an unknown BATCH op, …).
        case syntax
        /// An engine-level refusal found while parsing (bad namespace name, bad cursor).
        case store(StoreError.Code)
    }

    /// The kind.
    public let kind: Kind
    /// The message after the code.
    public let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    init(store error: StoreError) {
        self.init(.store(error.code), error.message)
    }
}

/// The shape and parser of each command.
struct CommandSpec: Sendable {
    let usage: String
    let minArguments: Int
    let maxArguments: Int?
    var argumentsPerStep = 1
    let parse: @Sendable (CommandArguments) throws(CommandError) -> Command

    static let maxScanCount = 100_000

    // The table split into parallel arrays, so a lookup compares bytes without copying entries.
    private static let names: [String] = Array(table.keys)
    private static let nameBytes: [[UInt8]] = names.map { Array($0.utf8) }
    private static let specs: [CommandSpec] = names.map { table[$0]! }

    /// The command named `name`, compared ASCII case-insensitively.
    static func lookup(_ name: ArraySlice<UInt8>) -> (String, CommandSpec)? {
        name.withUnsafeBufferPointer { given in
            for index in nameBytes.indices where Self.matches(given, nameBytes[index]) {
                return (names[index], specs[index])
            }
            return nil
        }
    }

    /// Whether `given` is the upper-case ASCII word `upper` in any ASCII letter case (no
    /// Unicode folding: `ﬁ` or `ı` never match `FI` or `I`).
    static func matches(_ given: ArraySlice<UInt8>, _ upper: [UInt8]) -> Bool {
        given.withUnsafeBufferPointer { matches($0, upper) }
    }

    private static func matches(_ given: UnsafeBufferPointer<UInt8>, _ upper: [UInt8]) -> Bool {
        guard given.count == upper.count else { return false }
        return upper.withUnsafeBufferPointer { expected in
            for i in 0..<given.count {
                let byte = given[i]
                // Letters only: `& 0xDF` upper-cases a-z and would also fold some non-letters.
                guard byte | 0x20 >= 0x61, byte | 0x20 <= 0x7A, byte & 0xDF == expected[i] else { return false }
            }
            return true
        }
    }

    static let table: [String: CommandSpec] = [
        "PING": CommandSpec(usage: "PING [message]", minArguments: 0, maxArguments: 1) { (args) throws(CommandError) in .ping(args.count > 0 ? args.array(0) : nil) },
        "ECHO": CommandSpec(usage: "ECHO message", minArguments: 1, maxArguments: 1) { (args) throws(CommandError) in .ping(args.array(0)) },
        "QUIT": CommandSpec(usage: "QUIT", minArguments: 0, maxArguments: 0) { (_) throws(CommandError) in .quit },
        "INFO": CommandSpec(usage: "INFO", minArguments: 0, maxArguments: 1) { (_) throws(CommandError) in .info },
        "NAMESPACES": CommandSpec(usage: "NAMESPACES", minArguments: 0, maxArguments: 0) { (_) throws(CommandError) in .namespaces },
        "COMMAND": CommandSpec(usage: "COMMAND [...]", minArguments: 0, maxArguments: nil) { (_) throws(CommandError) in .clientProbe },
        "CONFIG": CommandSpec(usage: "CONFIG GET parameter", minArguments: 0, maxArguments: nil) { (_) throws(CommandError) in .clientProbe },
        "COMPACT": CommandSpec(usage: "COMPACT ns", minArguments: 1, maxArguments: 1) { (args) throws(CommandError) in
            .compact(namespace: try Command.namespace(args[0]))
        },
        "GET": CommandSpec(usage: "GET ns key", minArguments: 2, maxArguments: 2) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .get(args[1]))
        },
        "PUT": CommandSpec(usage: "PUT ns key value", minArguments: 3, maxArguments: 3) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .put(key: args[1], value: args[2]))
        },
        "DEL": CommandSpec(usage: "DEL ns key [key ...]", minArguments: 2, maxArguments: nil) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .delete(args.rest(from: 1)))
        },
        "EXISTS": CommandSpec(usage: "EXISTS ns key [key ...]", minArguments: 2, maxArguments: nil) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .exists(args.rest(from: 1)))
        },
        "COUNT": CommandSpec(usage: "COUNT ns", minArguments: 1, maxArguments: 1) { (args) throws(CommandError) in
            .data(namespace: try Command.namespace(args[0]), .count)
        },
        "SCAN": CommandSpec(usage: "SCAN ns cursor [PREFIX prefix] [COUNT count]", minArguments: 2, maxArguments: 6,
                            argumentsPerStep: 2, parse: parseScan),
        "BATCH": CommandSpec(usage: "BATCH ns PUT key value | DEL key [...]", minArguments: 3, maxArguments: nil,
                             parse: parseBatch),
    ]

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
            if matches(args[i], prefixOption) {
                prefix = args.array(i + 1)
            } else if matches(args[i], countOption) {
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
        var mutations: [Mutation] = []
        var i = 1
        while i < args.count {
            if matches(args[i], putOp) {
                guard i + 2 < args.count else { throw CommandError(.syntax, "BATCH op \(mutations.count + 1): PUT needs a key and a value; nothing was applied") }
                mutations.append(.put(key: args.array(i + 1), value: args.array(i + 2)))
                i += 3
            } else if matches(args[i], delOp) {
                guard i + 1 < args.count else { throw CommandError(.syntax, "BATCH op \(mutations.count + 1): DEL needs a key; nothing was applied") }
                mutations.append(.delete(key: args.array(i + 1)))
                i += 2
            } else {
                throw CommandError(.syntax, "BATCH op \(mutations.count + 1): unknown op '\(Command.printable(args[i]))' (expected PUT or DEL); nothing was applied")
            }
        }
        return .data(namespace: ns, .batch(mutations))
    }
}

/// A command's arguments after its name, read in place from the decoded request.
struct CommandArguments {
    private let request: Request

    init(_ request: Request) { self.request = request }

    /// How many arguments follow the command name.
    var count: Int { request.count - 1 }
    /// Argument `index`, counted from 0 after the name, without copying.
    subscript(index: Int) -> ArraySlice<UInt8> { request[index + 1] }
    /// Argument `index` as an array of its own (what the engine stores).
    func array(_ index: Int) -> [UInt8] { request.array(index + 1) }
    /// The arguments from `index` on, each as an array of its own.
    func rest(from index: Int) -> [[UInt8]] { (index..<count).map(array) }
}
