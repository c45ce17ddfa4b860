import ActorKVProtocol
import ActorKVStore

/// The data commands: each parses into one ``ActorKVStore/Operation`` on one namespace, run in
/// that namespace's run; the reply is made from the operation's outcome.
enum KeyValueCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "GET", usage: "GET ns key", arity: .exactly(2), flags: [.namespaced, .readOnly],
                    redisHint: "keys live in namespaces (Redis's hashes): GET ns key, or HGET ns field") { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .get(args[1]))
        },
        CommandSpec(name: "GETV", usage: "GETV ns key", arity: .exactly(2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .getVersioned(args[1]))
        },
        CommandSpec(name: "PUT", usage: "PUT ns key value [PX ms | EX s] [EPHEMERAL] [IFVERSION version]", arity: .between(3, 8),
                    flags: [.namespaced, .write], parse: parsePut),
        // With a key, ActorKV's commands of one key; with one name (and PEXPIRE's options),
        // Redis's of a whole hash, the namespace's own deadline (``NamespaceExpiryCommands``).
        CommandSpec(name: "PEXPIRE", usage: "PEXPIRE ns key ms | PEXPIRE ns ms [NX | XX | GT | LT]", arity: .atLeast(2),
                    flags: [.namespaced, .write]) { (args) throws(CommandError) in
            guard args.count == 3, FieldExpiryCommands.condition(args[2]) == nil else { return try NamespaceExpiryCommands.parsePExpire(args) }
            let ns = try args.namespace(0)
            guard let ms = ASCIIDecimal.parse(args[2]), ms <= 0 || deadlineFits(ms) else { throw invalidExpireTime("PEXPIRE") }
            return .data(namespace: ns, .setTimeToLive(key: args.array(1), milliseconds: ms))
        },
        CommandSpec(name: "PERSIST", usage: "PERSIST ns key | PERSIST ns", arity: .between(1, 2), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            guard args.count == 2 else { return try NamespaceExpiryCommands.parsePersist(args) }
            return .data(namespace: try args.namespace(0), .setTimeToLive(key: args.array(1), milliseconds: nil))
        },
        CommandSpec(name: "PTTL", usage: "PTTL ns key | PTTL ns", arity: .between(1, 2), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            guard args.count == 2 else { return try NamespaceExpiryCommands.parsePTTL(args) }
            return .data(namespace: try args.namespace(0), .timeToLive(args.array(1)))
        },
        CommandSpec(name: "INCR", usage: "INCR ns key [delta]", arity: .between(2, 3), flags: [.namespaced, .write]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            let delta = args.count == 3 ? try parseDelta(args[2]) : 1
            return .data(namespace: ns, .increment(key: args.array(1), by: delta))
        },
        CommandSpec(name: "DEL", usage: "DEL ns key [key ...]", arity: .atLeast(2), flags: [.namespaced, .write],
                    redisHint: "a namespace (Redis's hash) is removed with UNLINK ns") { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .delete(args.rest(from: 1)))
        },
        // With one name, Redis's EXISTS of one key: whether that namespace (a hash) holds a key.
        CommandSpec(name: "EXISTS", usage: "EXISTS ns key [key ...] | EXISTS ns", arity: .atLeast(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            let ns = try args.namespace(0)
            guard args.count > 1 else { return .data(namespace: ns, .count, shape: .nonEmpty) }
            return .data(namespace: ns, .exists(args.slices(from: 1)))
        },
        CommandSpec(name: "COUNT", usage: "COUNT ns", arity: .exactly(1), flags: [.namespaced, .readOnly]) { (args) throws(CommandError) in
            .data(namespace: try args.namespace(0), .count)
        },
        // An odd number of arguments (a cursor, then option pairs) is Redis's SCAN of the
        // keyspace (``KeyspaceCommands``); an even one, a page of one namespace.
        CommandSpec(name: "SCAN", usage: scanUsage, arity: .between(1, 7), flags: [.namespaced, .readOnly], parse: parseScan),
        CommandSpec(name: "BATCH", usage: "BATCH ns PUT key value | DEL key | IFVERSION key version | INCR key delta [...]", arity: .atLeast(3),
                    flags: [.namespaced, .write], parse: parseBatch),
    ]

    /// The most pairs one SCAN page may hold.
    static let maxScanCount = 100_000

    private static let prefixOption = Array("PREFIX".utf8)
    private static let countOption = Array("COUNT".utf8)
    private static let putOp = Array("PUT".utf8)
    private static let delOp = Array("DEL".utf8)
    private static let ifVersionWord = Array("IFVERSION".utf8)
    private static let incrOp = Array("INCR".utf8)
    private static let ephemeralWord = Array("EPHEMERAL".utf8)
    private static let pxWord = Array("PX".utf8)
    private static let exWord = Array("EX".utf8)

    /// `PUT ns key value [PX ms | EX s] [EPHEMERAL] [IFVERSION version]`: options after the
    /// value, in any order and any ASCII case, each at most once.
    private static func parsePut(_ args: CommandArguments) throws(CommandError) -> Command {
        let ns = try args.namespace(0)
        guard args.count > 3 else { return .data(namespace: ns, .put(key: args[1], value: args[2])) }
        let options = try PutOptions(args)
        if options.ephemeral {
            return .owned(namespace: ns, LifetimePut(key: args.array(1), value: args[2], milliseconds: options.milliseconds,
                                                     ifVersion: options.ifVersion))
        }
        if options.milliseconds != 0 {
            return .data(namespace: ns, .lifetimePut(LifetimePut(key: args.array(1), value: args[2], milliseconds: options.milliseconds,
                                                                 ifVersion: options.ifVersion)))
        }
        guard let ifVersion = options.ifVersion else { return .data(namespace: ns, .put(key: args[1], value: args[2])) }
        return .data(namespace: ns, .conditionalPut(key: args.array(1), value: args[2], ifVersion: ifVersion))
    }

    /// The options of a PUT after its value.
    private struct PutOptions {
        var milliseconds: UInt64 = 0
        var ephemeral = false
        var ifVersion: UInt64?

        init(_ args: CommandArguments) throws(CommandError) {
            var i = 3
            var expiry = false
            while i < args.count {
                let name = args[i]
                if CommandTable.matches(name, ephemeralWord) {
                    guard !ephemeral else { throw syntaxError }
                    ephemeral = true
                    i += 1
                    continue
                }
                guard i + 1 < args.count else {
                    if CommandTable.matches(name, ifVersionWord) || CommandTable.matches(name, pxWord) || CommandTable.matches(name, exWord) { throw syntaxError }
                    throw unknownOption(name)
                }
                if CommandTable.matches(name, ifVersionWord) {
                    guard ifVersion == nil else { throw CommandError(.syntax, "IFVERSION given twice") }
                    ifVersion = try parseVersion(args[i + 1])
                } else if CommandTable.matches(name, pxWord) || CommandTable.matches(name, exWord) {
                    guard !expiry else { throw syntaxError }
                    expiry = true
                    milliseconds = try Self.milliseconds(args[i + 1], seconds: CommandTable.matches(name, exWord))
                } else {
                    throw unknownOption(name)
                }
                i += 2
            }
        }

        /// A PX (or, `seconds`, EX) argument in milliseconds: a positive integer, as Redis's SET takes.
        private static func milliseconds(_ text: ArraySlice<UInt8>, seconds: Bool) throws(CommandError) -> UInt64 {
            guard let n = ASCIIDecimal.parse(text), n > 0 else { throw invalidExpireTime("PUT") }
            let (ms, overflow) = n.multipliedReportingOverflow(by: seconds ? 1000 : 1)
            guard !overflow, deadlineFits(ms) else { throw invalidExpireTime("PUT") }
            return UInt64(ms)
        }

        private var syntaxError: CommandError { CommandError(.syntax, "syntax error") }

        private func unknownOption(_ name: ArraySlice<UInt8>) -> CommandError {
            CommandError(.syntax, "unknown PUT option '\(Command.printable(name))' (expected PX, EX, EPHEMERAL or IFVERSION)")
        }
    }

    /// Whether a deadline `milliseconds` from now is a signed 64-bit count of milliseconds since
    /// the epoch, as Redis 7 requires (beyond it, Redis and this server refuse the TTL rather
    /// than keep the key for ever under a deadline that wrapped or saturated).
    static func deadlineFits(_ milliseconds: Int64) -> Bool {
        milliseconds <= Int64.max - Int64(WallClock.milliseconds())
    }

    /// Redis's error for a TTL that is not a positive integer, or whose deadline would not fit
    /// in 64 bits (or, PEXPIRE, not an integer).
    static func invalidExpireTime(_ command: String) -> CommandError {
        CommandError(.syntax, "invalid expire time in '\(command)' command")
    }

    /// A version argument: a decimal integer from 0 (absent) to 2^63-1, written as Redis writes
    /// integers (no sign, no leading zero).
    static func parseVersion(_ text: ArraySlice<UInt8>) throws(CommandError) -> UInt64 {
        guard let n = ASCIIDecimal.parse(text), n >= 0 else {
            throw CommandError(.syntax, "IFVERSION needs a version: an integer from 0 to 9223372036854775807, not '\(Command.printable(text))'")
        }
        return UInt64(n)
    }

    /// An INCR delta: a signed 64-bit decimal integer.
    static func parseDelta(_ text: ArraySlice<UInt8>) throws(CommandError) -> Int64 {
        guard let n = ASCIIDecimal.parse(text) else {
            throw CommandError(.syntax, "the increment must be an integer from -9223372036854775808 to 9223372036854775807, not '\(Command.printable(text))'")
        }
        return n
    }

    /// SCAN's usage line: a namespace's page, or Redis's SCAN of the keyspace.
    static let scanUsage = "SCAN ns cursor [PREFIX prefix] [COUNT count] | SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]"

    private static func parseScan(_ args: CommandArguments) throws(CommandError) -> Command {
        if args.count % 2 == 1 {
            guard ASCIIDecimal.parse(args[0]) != nil else {
                throw CommandError(.arity, "wrong number of arguments for 'SCAN' (usage: \(scanUsage))")
            }
            return try KeyspaceCommands.parseScan(args)
        }
        let ns = try args.namespace(0)
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
        let ns = try args.namespace(0)
        var steps: [BatchStep] = []
        // Each op takes two arguments at least: room for a small batch at once, not grown 1, 2, 4.
        steps.reserveCapacity(min((args.count - 1) / 2, 64))
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
            } else if CommandTable.matches(args[i], ifVersionWord) {
                guard i + 2 < args.count else { throw CommandError(.syntax, "BATCH op \(steps.count + 1): IFVERSION needs a key and a version; nothing was applied") }
                steps.append(.ifVersion(key: args.array(i + 1), try batchArgument(steps.count) { () throws(CommandError) in try parseVersion(args[i + 2]) }))
                i += 3
            } else if CommandTable.matches(args[i], incrOp) {
                guard i + 2 < args.count else { throw CommandError(.syntax, "BATCH op \(steps.count + 1): INCR needs a key and a delta; nothing was applied") }
                steps.append(.increment(key: args.array(i + 1), by: try batchArgument(steps.count) { () throws(CommandError) in try parseDelta(args[i + 2]) }))
                i += 3
            } else {
                throw CommandError(.syntax, "BATCH op \(steps.count + 1): unknown op '\(Command.printable(args[i]))' (expected PUT, DEL, IFVERSION or INCR); nothing was applied")
            }
        }
        return .data(namespace: ns, .batch(steps))
    }

    /// Runs `parse` for the argument of BATCH op `count + 1`, naming the op in its error.
    private static func batchArgument<T>(_ count: Int, _ parse: () throws(CommandError) -> T) throws(CommandError) -> T {
        do { return try parse() } catch {
            throw CommandError(.syntax, "BATCH op \(count + 1): \(error.message); nothing was applied")
        }
    }

    /// The reply to an operation's outcome. A failed condition is a null bulk (`$-1`) for a
    /// conditional PUT and a null array (`*-1`) for a BATCH, as Redis's refused EXEC.
    static func reply(for outcome: Outcome, of operation: Operation, shape: ReplyShape) -> Reply {
        reply(for: outcome, ofBatch: operation.isBatch, shape: shape)
    }

    /// ``reply(for:of:shape:)`` given only whether the operation is a BATCH, all its reply
    /// depends on: a caller asks that of an operation where it lies, where handing over the
    /// operation copied it (a retain and a release of its request's bytes per reply).
    static func reply(for outcome: Outcome, ofBatch isBatch: Bool, shape: ReplyShape) -> Reply {
        switch (shape, outcome) {
        case (.plain, _), (_, .failure): return reply(for: outcome, ofBatch: isBatch)
        case (.added, .batch(let counts)):
            return .integer(sumOfCounts(counts))
        case (.length, .value(let value)): return .integer(Int64(value?.count ?? 0))
        case (.hashEntries, .page(let page)): return entries(page.entries, asMap: true)
        case (.hashKeys, .page(let page)): return entries(page.entries, .keys)
        case (.hashValues, .page(let page)): return entries(page.entries, .values)
        case (.hashEntries, .strings(let strings)): return .bulks(strings, asMap: true)
        case (.hashKeys, .strings(let strings)), (.hashValues, .strings(let strings)): return .bulks(strings, asMap: false)
        case (.keyType, .integer(let n)): return .simple(n > 0 ? "hash" : "none")
        case (.nonEmpty, .integer(let n)): return .integer(n > 0 ? 1 : 0)
        case (.positiveOrNull, .integer(let n)): return n > 0 ? .integer(Int64(n)) : .null
        case (.stored, .batch): return .simple("OK")
        case (.updatedValue, .batch(let outcomes)) where outcomes.count == 1: return reply(for: outcomes[0])
        case (.takenValues, .batch(let outcomes)): return .array(stride(from: 0, to: outcomes.count, by: 2).map { reply(for: outcomes[$0]) })
        case (.secondsLeft, .batch(let deadlines)), (.millisecondsLeft, .batch(let deadlines)), (.secondsDeadline, .batch(let deadlines)),
             (.millisecondsDeadline, .batch(let deadlines)):
            return FieldExpiryCommands.reply(deadlines: deadlines, shape: shape, now: WallClock.milliseconds())
        case (.secondsLeft, .integer), (.millisecondsLeft, .integer), (.secondsDeadline, .integer), (.millisecondsDeadline, .integer):
            return NamespaceExpiryCommands.reply(deadline: outcome, shape: shape, now: WallClock.milliseconds())
        case (.randomKey, .page(let page)): return page.entries.first.map { .bulk($0.key) } ?? .null
        case (.randomKeys, .page(let page)): return entries(page.entries, .keys)
        case (.randomEntries, .page(let page)): return .pairs(flattened(page.entries))
        case (.added, _), (.length, _), (.hashEntries, _), (.hashKeys, _), (.hashValues, _), (.keyType, _), (.nonEmpty, _), (.positiveOrNull, _), (.stored, _),
             (.updatedValue, _), (.takenValues, _), (.secondsLeft, _), (.millisecondsLeft, _), (.secondsDeadline, _), (.millisecondsDeadline, _),
             (.randomKey, _), (.randomKeys, _), (.randomEntries, _):
            return reply(for: outcome, ofBatch: isBatch)
        }
    }

    /// The sum of the integer outcomes among `outcomes` (a batch's step counts).
    static func sumOfCounts(_ outcomes: some Collection<Outcome>) -> Int64 {
        outcomes.reduce(0) { if case .integer(let n) = $1 { return $0 + Int64(n) }; return $0 }
    }

    /// The reply to `operation`'s outcome, as its own command replies.
    static func reply(for outcome: Outcome, of operation: Operation) -> Reply {
        reply(for: outcome, ofBatch: operation.isBatch)
    }

    /// ``reply(for:of:)`` given only whether the operation is a BATCH.
    static func reply(for outcome: Outcome, ofBatch isBatch: Bool) -> Reply {
        if case .conditionFailed = outcome, isBatch { return .nullArray }
        return reply(for: outcome)
    }

    /// How many bytes of keys and values a reply packs into one buffer (a copy, where the arrays
    /// of ``flattened(_:)`` share the map's values): ``entries(_:_:asMap:)``, and the engine's
    /// ``Operation/packedEntries(_:within:)`` for HGETALL, HKEYS and HVALS. At most 512 bytes
    /// per key, so what a connection's replies in flight hold stays about proportional to the
    /// reply entries it may have in flight (the event loop's budget of 10,000: about 5 MB).
    static let packing = PackingBound(totalBytes: 256 * 1024, bytesPerKey: 512)

    /// Entries' keys, values, or both (key, value, key, value, …) as an array or map of bulk
    /// strings: HGETALL's, HKEYS', HVALS', a SCAN page's. Packed into one ``BulkStrings`` when
    /// ``packing`` allows, which costs a copy of each instead of a
    /// `Reply` per string, each retained and released twice (HGETALL of 1,000 fields: HOTPATHS.md
    /// round 73); otherwise an array of ``Reply/bulk(_:)``s, which shares the values with the map.
    static func entries(_ entries: [KeyValue], _ parts: EntryParts = .both, asMap: Bool = false) -> Reply {
        let total = parts.bytes(of: entries)
        guard packing.allows(bytes: total, keys: entries.count) else {
            let flat: [Reply]
            switch parts {
            case .keys: flat = entries.map { .bulk($0.key) }
            case .values: flat = entries.map { .bulk($0.value) }
            case .both: flat = flattened(entries)
            }
            return asMap ? .map(flat) : .array(flat)
        }
        return .bulks(parts.packed(entries, bytes: total), asMap: asMap)
    }

    /// Entries as key, value, key, value, …: HRANDFIELD's pairs, and the arrays of
    /// ``entries(_:_:asMap:)`` too large to pack.
    static func flattened(_ entries: [KeyValue]) -> [Reply] {
        var flat: [Reply] = []
        flat.reserveCapacity(entries.count * 2)
        for entry in entries { flat.append(.bulk(entry.key)); flat.append(.bulk(entry.value)) }
        return flat
    }

    /// The reply to an operation's outcome (a failed condition as a null bulk).
    static func reply(for outcome: Outcome) -> Reply {
        switch outcome {
        case .value(let value): return value.map(Reply.bulk) ?? .null
        case .stored: return .simple("OK")
        case .integer(let n): return .integer(Int64(n))
        case .versioned(let found):
            guard let found else { return .null }
            return .array([.bulk(found.value), .integer(Int64(clamping: found.version))])
        case .version(let version): return .integer(Int64(clamping: version))
        case .conditionFailed: return .null
        case .batch(let results): return .array(results.map(reply(for:)))
        case .page(let page): return .array([.bulk(page.next.text), entries(page.entries)])
        case .strings(let strings): return .bulks(strings, asMap: false)
        case .failure(let error): return ErrorMapping.reply(for: error)
        }
    }
}
