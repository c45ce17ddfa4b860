import ActorKVProtocol
import ActorKVStore

/// Redis's hash commands, a namespace being the hash and its keys the fields (protocol.md,
/// "Namespaces as Redis hashes"). All but HSCAN are data commands, run in the namespace's run
/// like GET and PUT, with Redis's replies (``ReplyShape``), and can be queued in MULTI; HSCAN,
/// which resolves a cursor first, runs on its own. The field expiry commands are
/// ``FieldExpiryCommands``.
enum HashCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "HGET", usage: "HGET ns field", arity: .exactly(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .get(args[1]))
        },
        CommandSpec(name: "HSET", usage: "HSET ns field value [field value ...]", arity: .atLeast(3).pairs, flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            // One field: a put that says whether it added the key, from the request's bytes.
            guard args.count > 3 else { return .data(namespace: ns, .set(key: args[1], value: args[2]), shape: .added) }
            return .data(namespace: ns, .batch(fieldSets(args)), shape: .added)
        },
        // Redis's older multi-field HSET, which replies +OK: one log record, as HSET's.
        CommandSpec(name: "HMSET", usage: "HMSET ns field value [field value ...]", arity: .atLeast(3).pairs, flags: [.namespaced, .write]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .batch(fieldSets(args)), shape: .stored)
        },
        CommandSpec(name: "HSETNX", usage: "HSETNX ns field value", arity: .exactly(3), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            return .data(namespace: ns, .batch([.setIfAbsent(key: args.array(1), value: args.array(2))]), shape: .added)
        },
        CommandSpec(name: "HDEL", usage: "HDEL ns field [field ...]", arity: .atLeast(2), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .delete(args.rest(from: 1)))
        },
        // Redis 8's read-and-delete: each field's value, then the field deleted, in one log record.
        CommandSpec(name: "HGETDEL", usage: "HGETDEL ns FIELDS numfields field [field ...]", arity: .atLeast(4),
                    flags: [.namespaced, .write, .alsoReads]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            let keys = try FieldExpiryCommands.fields(args, at: 1, countProblem: "Number of fields must be a positive integer")
            var steps: [BatchStep] = []
            steps.reserveCapacity(keys.count * 2)
            for key in keys { steps += [.update(key: key, .keep), .delete(key: key)] }
            return .data(namespace: ns, .batch(steps), shape: .takenValues)
        },
        CommandSpec(name: "HEXISTS", usage: "HEXISTS ns field", arity: .exactly(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .exists([args[1]]))
        },
        CommandSpec(name: "HLEN", usage: "HLEN ns", arity: .exactly(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .count)
        },
        CommandSpec(name: "HSTRLEN", usage: "HSTRLEN ns field", arity: .exactly(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .get(args[1]), shape: .length)
        },
        CommandSpec(name: "HINCRBY", usage: "HINCRBY ns field increment", arity: .exactly(3), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            return .data(namespace: ns, .increment(key: args.array(1), by: try KeyValueCommands.parseDelta(args[2])))
        },
        CommandSpec(name: "HINCRBYFLOAT", usage: "HINCRBYFLOAT ns field increment", arity: .exactly(3), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            let increment = args.array(2)
            try FloatIncrement.check(increment)
            return .data(namespace: ns, .batch([.update(key: args.array(1), FloatIncrement.update(adding: increment))]), shape: .updatedValue)
        },
        CommandSpec(name: "HMGET", usage: "HMGET ns field [field ...]", arity: .atLeast(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .getMany(args.slices(from: 1)))
        },
        wholeHash("HGETALL", .both, shape: .hashEntries),
        wholeHash("HKEYS", .keys, shape: .hashKeys),
        wholeHash("HVALS", .values, shape: .hashValues),
        CommandSpec(name: "HRANDFIELD", usage: "HRANDFIELD ns [count [WITHVALUES]]", arity: .between(1, 3), flags: [.namespaced, .readOnly],
                    parse: parseRandomFields),
        CommandSpec(name: "HSCAN", usage: "HSCAN ns cursor [MATCH pattern] [COUNT count] [NOVALUES]", arity: .between(2, 7),
                    flags: [.namespaced, .readOnly], parse: parseHashScan),
    ]

    /// The option words of HSCAN, which the keyspace's SCAN shares.
    static let matchOption = Array("MATCH".utf8)
    static let countOption = Array("COUNT".utf8)
    private static let noValuesOption = Array("NOVALUES".utf8)

    /// HSCAN: a page of `COUNT` keys after where the cursor says, those matching `MATCH` kept;
    /// the next cursor is a decimal integer from ``HashScanCursors`` (protocol.md, "HSCAN").
    private static func parseHashScan(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try args.namespace(0)
        guard let cursor = ASCIIDecimal.parse(args[1]), cursor >= 0 else {
            throw CommandError(.store(.invalidCursor), "invalid cursor '\(Command.printable(args[1]))': HSCAN cursors are the integers HSCAN returns, 0 to start")
        }
        var pattern: [UInt8]?
        var count = 10
        var withValues = true
        var i = 2
        while i < args.count {
            if CommandTable.matches(args[i], noValuesOption) {
                withValues = false
                i += 1
                continue
            }
            guard i + 1 < args.count else {
                throw CommandError(.syntax, "HSCAN option '\(Command.printable(args[i]))' needs a value, or is unknown (expected MATCH pattern, COUNT count or NOVALUES)")
            }
            if CommandTable.matches(args[i], matchOption) {
                pattern = args.array(i + 1)
            } else if CommandTable.matches(args[i], countOption) {
                guard let n = ASCIIDecimal.parse(args[i + 1]), n >= 1, n <= KeyValueCommands.maxScanCount else {
                    throw CommandError(.syntax, "COUNT must be an integer from 1 to \(KeyValueCommands.maxScanCount)")
                }
                count = Int(n)
            } else {
                throw CommandError(.syntax, "unknown HSCAN option '\(Command.printable(args[i]))' (expected MATCH, COUNT or NOVALUES)")
            }
            i += 2
        }
        let scan = HashScan(namespace: ns, cursor: UInt64(cursor), pattern: pattern, count: count, withValues: withValues)
        return .local(LocalCommand { context in await scan.run(context) })
    }

    private static let withValuesOption = Array("WITHVALUES".utf8)

    /// HSET's and HMSET's `field value …` pairs (after the namespace) as set steps.
    private static func fieldSets(_ args: CommandArguments) -> [BatchStep] {
        stride(from: 1, to: args.count, by: 2).map { BatchStep.set(key: args.array($0), value: args.array($0 + 1)) }
    }

    /// The most fields a negative HRANDFIELD count may ask for (its reply holds that many,
    /// whatever the namespace's size).
    static let mostRepeated = KeyValueCommands.maxScanCount

    /// HRANDFIELD: one field at random, or `count` of them (distinct; with a negative count,
    /// that many drawn with repeats), with their values after WITHVALUES. The namespace draws
    /// them (``Operation/sample(_:)``), reading only those it draws (locally).
    private static func parseRandomFields(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try args.namespace(0)
        var draw: RandomDraw = .one
        if args.count > 1 {
            guard let count = ASCIIDecimal.parse(args[1]), count > Int64.min else {
                throw CommandError(.syntax, "value is not an integer or out of range")
            }
            guard count >= -Int64(mostRepeated) else {
                throw CommandError(.syntax, "a negative HRANDFIELD count repeats fields, and may be at least -\(mostRepeated)")
            }
            draw = count >= 0 ? .distinct(Int(count)) : .repeating(Int(-count))
        }
        if args.count > 2 {
            guard CommandTable.matches(args[2], withValuesOption) else { throw CommandError(.syntax, "syntax error") }
        }
        let shape: ReplyShape = args.count > 2 ? .randomEntries : args.count > 1 ? .randomKeys : .randomKey
        return .data(namespace: ns, .sample(draw), shape: shape)
    }

    /// A command that replies with all of a namespace's entries (read at once, in key order),
    /// in `shape`: a scan without a limit, which weighs the keys the namespace holds against a
    /// connection's budget of reply entries in flight, or more than the whole budget when that
    /// is not known at once (``EventLoop/replyWeight(of:keyCount:)``): a read of a large
    /// namespace runs alone, and the connection's next requests wait until its reply has been sent.
    private static func wholeHash(_ name: String, _ parts: EntryParts, shape: ReplyShape) -> CommandSpec {
        CommandSpec(name: name, usage: "\(name) ns", arity: .exactly(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .packedEntries(parts, within: KeyValueCommands.packing), shape: shape)
        }
    }

    /// Runs reads in one run of `namespace` and makes the reply from their outcomes (the first
    /// failure's error instead, if one failed).
    static func read(_ operations: [Operation], in namespace: String, _ context: CommandContext,
                     reply: ([Outcome]) -> Reply) async -> Reply {
        let outcomes = await context.execute(operations, inNamespace: namespace).outcomes
        if let failed = outcomes.first(where: { if case .failure = $0 { return true }; return false }) {
            return KeyValueCommands.reply(for: failed)
        }
        return reply(outcomes)
    }
}

extension Arity {
    /// This arity with the arguments after the first in pairs (HSET's field value pairs).
    var pairs: Arity { Arity(minimum: minimum, maximum: maximum, step: 2) }
}

/// One HSCAN page (``HashCommands``): resolves the cursor, reads the page, issues the next one.
struct HashScan: Sendable {
    let namespace: String
    let cursor: UInt64
    let pattern: [UInt8]?
    let count: Int
    /// False with NOVALUES: the page lists the keys alone.
    var withValues = true

    /// Runs the page and makes its reply: the next cursor, then the matching keys and their
    /// values (without NOVALUES).
    func run(_ context: CommandContext) async -> Reply {
        let cursors = context.hashScanCursors
        let start: ScanCursor
        switch cursors.resolve(cursor, namespace: namespace, now: Self.now()) {
        case .start: start = .start
        case .resume(let key): start = .after(key)
        case .unknown: return .error(.badCursor, "unknown or expired HSCAN cursor; start again from 0")
        }
        // The pattern's literal start bounds the keys walked: no other key can match it.
        let prefix = pattern.map(Self.literalPrefix) ?? []
        return await HashCommands.read([.scan(start, prefix: prefix, limit: count)], in: namespace, context) { outcomes in
            guard case .page(let page) = outcomes[0] else { return KeyValueCommands.reply(for: outcomes[0]) }
            var entries = page.entries
            if let glob = pattern.map({ RedisGlob($0) }), !glob.isMatchAll { entries.removeAll { !glob.matches($0.key) } }
            var next: UInt64 = 0
            if case .after(let key) = page.next { next = cursors.issue(namespace: namespace, after: key, now: Self.now(), following: cursor) }
            var text: [UInt8] = []
            ASCIIDecimal.append(Int64(next), to: &text)
            return .array([.bulk(text), KeyValueCommands.entries(entries, withValues ? .both : .keys)])
        }
    }

    /// The bytes a glob's every match starts with: up to its first `*`, `?`, `[` or `\`.
    static func literalPrefix(of pattern: [UInt8]) -> [UInt8] {
        Array(pattern.prefix { $0 != UInt8(ascii: "*") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "[") && $0 != UInt8(ascii: "\\") })
    }

    /// Milliseconds on the monotonic clock (cursor lifetimes are not moved by clock changes).
    static func now() -> UInt64 { UInt64(monotonicSeconds() * 1000) }
}
