import ActorKVProtocol
import ActorKVStore

/// Redis's transactions: MULTI queues a connection's commands, EXEC applies them atomically as one
/// log record (all or nothing), DISCARD drops them; WATCH makes EXEC apply nothing if a watched
/// namespace was written since (protocol.md, "Transactions: MULTI, EXEC, WATCH").
enum TransactionCommands {
    /// Their specs. All run at once even inside MULTI (``CommandFlags/transactionControl``).
    static let specs: [CommandSpec] = [
        CommandSpec(name: "MULTI", usage: "MULTI", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand(.multi) { context in
                context.session.beginTransaction() ? .simple("OK") : .error(.err, "MULTI calls can not be nested")
            })
        },
        CommandSpec(name: "EXEC", usage: "EXEC", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand(.exec) { context in await exec(context) })
        },
        CommandSpec(name: "DISCARD", usage: "DISCARD", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                context.session.endTransaction().transaction == nil ? .error(.err, "DISCARD without MULTI") : .simple("OK")
            })
        },
        CommandSpec(name: "WATCH", usage: "WATCH ns [ns ...]", arity: .atLeast(1), flags: [.session, .readOnly, .namespacedArguments, .transactionControl]) { (args) throws(CommandError) in
            let names = try (0..<args.count).map { (i) throws(CommandError) in try args.namespace(i) }
            return .local(LocalCommand { context in
                guard !context.session.inTransaction else { return .error(.err, "WATCH inside MULTI is not allowed") }
                guard context.session.mayWatch(names) else { return tooLarge(limit: context.session.transactionLimit, then: "this WATCH watches nothing") }
                for name in names {
                    let sequence: UInt64
                    do { sequence = try await context.backend.lastSequence(of: name) } catch { return ErrorMapping.reply(for: error) }
                    context.session.watch(name, at: sequence)
                }
                return .simple("OK")
            })
        },
        CommandSpec(name: "UNWATCH", usage: "UNWATCH", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                context.session.unwatchAll()
                return .simple("OK")
            })
        },
    ]

    /// The reply to a command sent inside MULTI: it is queued (`+QUEUED`), or refused with an
    /// error that makes EXEC apply nothing.
    static func queue(_ command: Command, on session: ClientSession) -> Reply {
        if case .refused(let error) = command {
            session.refuseQueued()
            return ErrorMapping.reply(for: error)
        }
        guard case .data(let namespace, let operation, let shape) = command,
              let plan = TransactionStep.plan(for: operation, shape: shape) else {
            session.refuseQueued()
            return .error(.err, "this command cannot be queued in a transaction: only reads and writes of one namespace's keys can (GET, PUT, DEL, EXISTS, INCR, PEXPIRE, PERSIST, PTTL, HGET, HSET, HSETNX, HDEL, HGETDEL, HGETEX, HSETEX, HEXISTS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HMGET, HMSET, HLEN, HGETALL, HKEYS, HVALS, HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HPERSIST, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, TYPE; PUT without IFVERSION or EPHEMERAL; protocol.md, \"Transactions\"); read the others before MULTI under a WATCH")
        }
        guard session.queue(QueuedCommand(namespace: namespace, operation: operation, shape: shape, plan: plan)) else {
            return tooLarge(limit: session.transactionLimit, then: "EXEC will apply nothing")
        }
        return .simple("QUEUED")
    }

    /// The refusal of a command that would make the watched names and the queue weigh more than
    /// `limit`, saying what `then` happens.
    static func tooLarge(limit: Int, then: String) -> Reply {
        .error(.tooBig, "transaction too large: its watched namespaces and queued commands would hold more than \(limit) bytes (--max-request-bytes); \(then)")
    }

    /// A connection's turn that is exactly one transaction, run as a data command: MULTI, then
    /// data commands on one namespace that can all be queued, at least one of them a write, then
    /// EXEC. (The caller checks that the connection is not inside MULTI, watches nothing and
    /// follows nothing.) Its one operation is the batch EXEC would run, merged into the turn's run
    /// of that namespace with the other connections' data commands: no task, no log write of its
    /// own. Nil for anything else, which runs as commands one by one.
    static func merged(_ commands: borrowing [Command], limit: Int) -> MergedTransaction? {
        guard commands.count >= 3, case .local(let first) = commands[0], first.transactionRole == .multi,
              case .local(let last) = commands[commands.count - 1], last.transactionRole == .exec else { return nil }
        var namespace: String?
        var plans: [TransactionStep] = []
        plans.reserveCapacity(commands.count - 2)
        var steps: [BatchStep] = []  // EXEC's batch, built here at once: one array, not one per command
        steps.reserveCapacity(commands.count - 2)
        var writes = false
        var weight = 0
        for index in 1..<(commands.count - 1) {
            guard case .data(let name, let operation, let shape) = commands[index], namespace == nil || name == namespace,
                  let plan = TransactionStep.plan(for: operation, shape: shape) else { return nil }
            // Past the limit, the commands run one by one, and queueing refuses the one past it.
            weight += TransactionStep.weight(of: operation)
            guard weight <= limit else { return nil }
            namespace = name
            writes = writes || operation.isWrite
            plans.append(plan)
            TransactionStep.appendSteps(of: operation, to: &steps)
        }
        guard let namespace, writes else { return nil }
        return MergedTransaction(namespace: namespace, operation: .batch(steps), plans: plans)
    }

    /// EXEC's batch: the queued commands' steps in order, after a guard that the namespace is
    /// unchanged since `watchedAt` when it is watched.
    static func batch(of queued: [QueuedCommand], guardedSince watchedAt: UInt64?) -> Operation {
        var steps: [BatchStep] = []
        steps.reserveCapacity(queued.reduce(watchedAt == nil ? 0 : 1) { $0 + $1.plan.stepCount })
        if let watchedAt { steps.append(.unchangedSince(watchedAt)) }
        for command in queued { TransactionStep.appendSteps(of: command.operation, to: &steps) }
        return .batch(steps)
    }

    /// EXEC's reply to the `outcome` of its batch (``batch(of:guardedSince:)``, `guarded` if it
    /// has a guard first), each queued command's reply made by its plan.
    static func reply(to outcome: Outcome, of plans: [TransactionStep], guarded: Bool = false) -> Reply {
        switch outcome {
        case .conditionFailed: return .nullArray
        case .failure(let error): return ErrorMapping.reply(for: error)
        case .batch(let results):
            var replies: [Reply] = []
            replies.reserveCapacity(plans.count)
            var offset = results.startIndex + (guarded ? 1 : 0)
            for plan in plans {
                replies.append(plan.reply(results[offset..<(offset + plan.stepCount)]))
                offset += plan.stepCount
            }
            return .array(replies)
        case let other: return KeyValueCommands.reply(for: other)
        }
    }

    /// EXEC: applies the queue as one batch of its namespace, guarded by the namespaces watched.
    private static func exec(_ context: CommandContext) async -> Reply {
        let (queued, watched) = context.session.endTransaction()
        guard let queued else { return .error(.err, "EXEC without MULTI") }
        guard !queued.aborted else { return .error(.execAbort, "Transaction discarded because of previous errors.") }
        let namespace = queued.commands.first?.namespace
        if let other = queued.commands.first(where: { $0.namespace != namespace })?.namespace {
            return .error(.crossNS, "a transaction addresses one namespace; this one addresses '\(namespace!)' and '\(other)': nothing applied")
        }
        // Judged again by the rules in force now: all of it may run, or none of it does.
        if let refusal = refusalByCurrentRules(queued.commands, watched: watched, context) { return ErrorMapping.reply(for: refusal) }
        // Watched namespaces the transaction does not write are checked here, just before it;
        // its own namespace is checked in the same run that applies it.
        for (name, sequence) in watched where name != namespace {
            guard await currentSequence(of: name, context) == sequence else { return .nullArray }
        }
        guard let namespace else { return .array([]) }
        return await apply(queued.commands, in: namespace, guardedSince: watched[namespace], context)
    }

    /// `NOPERM` if, under the rules in force now, the connection lacks a right that a queued
    /// command needs (each was judged when queued; the rules may have been reloaded since), or
    /// may no longer read a watched namespace.
    private static func refusalByCurrentRules(_ queued: [QueuedCommand], watched: [String: UInt64], _ context: CommandContext) -> CommandError? {
        if let namespace = queued.first?.namespace {
            let needed: AccessRights = queued.reduce(into: []) { $0.insert($1.operation.isWrite ? .write : .read) }
            if let refusal = context.refusal(needing: needed, on: namespace) { return refusal }
        }
        for name in watched.keys.sorted() {
            if let refusal = context.refusal(needing: .read, on: name) { return refusal }
        }
        return nil
    }

    /// The sequence of `name` now (0 for a namespace that does not exist or cannot be opened).
    private static func currentSequence(of name: String, _ context: CommandContext) async -> UInt64 {
        (try? await context.backend.lastSequence(of: name)) ?? 0
    }

    /// Runs the queued operations as one batch (or, if none writes, as one run of reads) and
    /// splits its outcome into one reply per queued command.
    private static func apply(_ queued: [QueuedCommand], in namespace: String, guardedSince watchedAt: UInt64?,
                              _ context: CommandContext) async -> Reply {
        if !queued.contains(where: { $0.operation.isWrite }), watchedAt == nil {
            let outcomes = await context.execute(queued.map(\.operation), inNamespace: namespace).outcomes
            return .array(zip(outcomes, queued).map { KeyValueCommands.reply(for: $0, of: $1.operation, shape: $1.shape) })
        }
        let operation = batch(of: queued, guardedSince: watchedAt)
        let execution = await context.execute([operation], inNamespace: namespace)
        return reply(to: await execution.settled([operation])[0], of: queued.map(\.plan), guarded: watchedAt != nil)
    }
}

/// A transaction read whole in one turn, as one data command (``TransactionCommands/merged(_:)``).
struct MergedTransaction: Sendable {
    /// The namespace its commands address.
    let namespace: String
    /// The batch EXEC would run.
    let operation: Operation
    /// Each queued command's part in the batch and reply.
    let plans: [TransactionStep]

    /// The connection's replies, given the batch's outcome: MULTI's `+OK`, a `+QUEUED` per
    /// queued command, EXEC's reply.
    func replies(to outcome: Outcome) -> [Reply] {
        var replies: [Reply] = [.simple("OK")]
        replies.reserveCapacity(plans.count + 2)
        for _ in plans { replies.append(.simple("QUEUED")) }
        replies.append(TransactionCommands.reply(to: outcome, of: plans))
        return replies
    }
}

/// A data command queued inside MULTI, planned as EXEC will run it.
struct QueuedCommand: Sendable {
    /// The namespace it addresses.
    let namespace: String
    /// What it does, and how its reply is made (when EXEC runs reads alone).
    let operation: Operation
    let shape: ReplyShape
    /// Its part in EXEC's batch.
    let plan: TransactionStep
    /// About what it holds until EXEC (``TransactionStep/weight(of:)``).
    var weight: Int { TransactionStep.weight(of: operation) }
}

/// How a queued data command takes part in EXEC's one batch: how many steps it adds (which
/// ``appendSteps(of:to:)`` appends) and how its reply is made from their outcomes. Only
/// commands on single keys qualify: a read of one key, a write of one or more.
struct TransactionStep: Sendable {
    /// How many of EXEC's batch steps are the command's (``appendSteps(of:to:)`` appends them).
    let stepCount: Int
    /// How the command's reply is made from its steps' outcomes (a kind, not a closure: a
    /// closure's context would be an allocation per queued command).
    private let kind: ReplyKind

    private enum ReplyKind: Sendable {
        /// The one step's outcome as `operation`'s own reply, in `shape`.
        case value(Operation, ReplyShape)
        /// `+OK`.
        case stored
        /// The sum of the steps' counts.
        case sumOfCounts
        /// The one step's outcome as is (an INCR's new value).
        case outcome
        /// How many of the steps found a value (EXISTS).
        case found
        /// Each step's value, in order (HMGET).
        case values
        /// The steps' outcomes as one batch's, in `shape` (HGETDEL).
        case shaped(ReplyShape)
        /// Of a change of one key's deadline: 1 if it was set, removed or the key deleted, else
        /// 0 (PEXPIRE, PERSIST).
        case expiryCount
        /// Of one key's deadline: the milliseconds left, -1 without one, -2 absent (PTTL).
        case millisecondsLeft
    }

    /// The command's reply from its steps' `outcomes` (``stepCount`` of them, in order).
    func reply(_ outcomes: ArraySlice<Outcome>) -> Reply {
        switch kind {
        case .value(let operation, let shape): return KeyValueCommands.reply(for: outcomes[outcomes.startIndex], of: operation, shape: shape)
        case .stored: return .simple("OK")
        case .sumOfCounts: return .integer(KeyValueCommands.sumOfCounts(outcomes))
        case .outcome: return KeyValueCommands.reply(for: outcomes[outcomes.startIndex])
        case .found: return .integer(Int64(outcomes.filter { $0 != .value(nil) }.count))
        case .values: return .array(outcomes.map(KeyValueCommands.reply(for:)))
        case .shaped(let shape): return KeyValueCommands.reply(for: .batch(Array(outcomes)), ofBatch: true, shape: shape)
        case .expiryCount, .millisecondsLeft:
            guard case .batch(let results) = outcomes[outcomes.startIndex], case .integer(let n)? = results.first else {
                return KeyValueCommands.reply(for: outcomes[outcomes.startIndex])
            }
            if case .expiryCount = kind { return .integer(n == KeyExpiry.Result.changed.rawValue || n == KeyExpiry.Result.deleted.rawValue ? 1 : 0) }
            guard n > 0 else { return .integer(Int64(n)) }
            return .integer(Int64(n) - min(Int64(n), Int64(clamping: WallClock.milliseconds())))
        }
    }

    /// The plan of `operation` (with reply `shape`), or nil if it cannot be part of a
    /// transaction (SCAN's pages, conditional puts, a connection's keys, guarded BATCHes).
    static func plan(for operation: Operation, shape: ReplyShape) -> TransactionStep? {
        switch operation {
        case .get, .count: return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .scan where isWholeNamespace(shape): return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .put: return TransactionStep(stepCount: 1, kind: .stored)
        case .set: return TransactionStep(stepCount: 1, kind: .sumOfCounts)
        case .increment: return TransactionStep(stepCount: 1, kind: .outcome)
        case .delete(let keys): return TransactionStep(stepCount: keys.count, kind: .sumOfCounts)
        case .exists(let keys): return TransactionStep(stepCount: keys.count, kind: .found)
        case .getMany(let keys): return TransactionStep(stepCount: keys.count, kind: .values)
        case .batch(let steps) where shape == .added: return TransactionStep(stepCount: steps.count, kind: .sumOfCounts)
        case .batch(let steps) where shape == .stored: return TransactionStep(stepCount: steps.count, kind: .stored)
        case .batch(let steps) where shape == .updatedValue && steps.count == 1: return TransactionStep(stepCount: 1, kind: .outcome)
        case .batch(let steps) where shape == .takenValues: return TransactionStep(stepCount: steps.count, kind: .shaped(shape))
        case .expire, .deadlines: return TransactionStep(stepCount: 1, kind: .value(operation, shape))
        case .setAll: return TransactionStep(stepCount: 1, kind: .outcome)
        case .lifetimePut(let put) where put.owner == 0 && put.ifVersion == nil: return TransactionStep(stepCount: 1, kind: .stored)
        case .setTimeToLive: return TransactionStep(stepCount: 1, kind: .expiryCount)
        case .timeToLive: return TransactionStep(stepCount: 1, kind: .millisecondsLeft)
        case .batch, .getVersioned, .conditionalPut, .update, .lifetimePut, .scan:
            return nil
        }
    }

    /// Whether `shape` is that of a command reading a whole namespace (HGETALL, HKEYS, HVALS),
    /// whose scan is a read step of EXEC's batch; SCAN's pages are not.
    private static func isWholeNamespace(_ shape: ReplyShape) -> Bool {
        switch shape {
        case .hashEntries, .hashKeys, .hashValues: return true
        case .plain, .added, .length, .keyType, .nonEmpty, .stored, .updatedValue, .takenValues, .secondsLeft, .millisecondsLeft, .secondsDeadline,
             .millisecondsDeadline:
            return false
        }
    }

    /// What a queued command is counted besides its keys and values: about what the server holds
    /// for it until EXEC (its operation, plan and namespace, measured at 200-250 bytes).
    static let commandOverhead = 256

    /// About what queued `operation` holds until EXEC: its keys' and values' bytes, and
    /// ``commandOverhead`` (also per key past the first of a multi-key one).
    static func weight(of operation: Operation) -> Int {
        switch operation {
        case .get(let key): return commandOverhead + key.count
        case .put(let key, let value), .set(let key, let value): return commandOverhead + key.count + value.count
        case .increment(let key, _): return commandOverhead + key.count
        case .delete(let keys), .exists(let keys), .getMany(let keys): return keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .batch(let steps): return steps.reduce(0) { $0 + commandOverhead + weight(of: $1) }
        case .expire(let expiry): return expiry.keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .deadlines(let keys): return keys.reduce(0) { $0 + commandOverhead + $1.count }
        case .setAll(let setting): return zip(setting.keys, setting.values).reduce(0) { $0 + commandOverhead + $1.0.count + $1.1.count }
        case .lifetimePut(let put): return commandOverhead + put.key.count + put.value.count
        case .setTimeToLive(let key, _), .timeToLive(let key): return commandOverhead + key.count
        case .getVersioned, .conditionalPut, .update, .count, .scan:
            return commandOverhead
        }
    }

    /// A batch step's keys and values, in bytes.
    private static func weight(of step: BatchStep) -> Int {
        switch step {
        case .put(let key, let value), .set(let key, let value), .setIfAbsent(let key, let value): return key.count + value.count
        case .delete(let key), .update(let key, _), .ifVersion(let key, _), .increment(let key, _): return key.count
        case .unchangedSince, .read: return 0
        case .expire, .deadlines: return step.keys.reduce(0) { $0 + $1.count }
        case .setAll(let setting): return zip(setting.keys, setting.values).reduce(0) { $0 + $1.0.count + $1.1.count }
        }
    }

    /// Appends the steps of `operation`, which has a ``plan(for:shape:)``, to EXEC's batch.
    static func appendSteps(of operation: Operation, to steps: inout [BatchStep]) {
        switch operation {
        case .get(let key): steps.append(.update(key: Array(key), .keep))
        case .put(let key, let value): steps.append(.put(key: Array(key), value: Array(value)))
        case .set(let key, let value): steps.append(.set(key: Array(key), value: Array(value)))
        case .increment(let key, let delta): steps.append(.increment(key: key, by: delta))
        case .delete(let keys): for key in keys { steps.append(.delete(key: key)) }
        case .exists(let keys), .getMany(let keys): for key in keys { steps.append(.update(key: key, .keep)) }
        case .batch(let batch): steps += batch
        case .count: steps.append(.read(.count))
        case .scan: steps.append(.read(.entries))
        case .expire(let expiry): steps.append(.expire(expiry))
        case .deadlines(let keys): steps.append(.deadlines(keys))
        case .setAll(let setting): steps.append(.setAll(setting))
        case .lifetimePut(let put):
            let deadline: KeySetting.Deadline = put.milliseconds == 0 ? .none : .after(milliseconds: put.milliseconds)
            steps.append(.setAll(KeySetting(keys: [put.key], values: [Array(put.value)], deadline: deadline)))
        case .setTimeToLive(let key, let milliseconds):
            let deadline: KeyExpiry.Deadline = milliseconds.map { .after(milliseconds: UInt64(max(0, $0))) } ?? .none
            steps.append(.expire(KeyExpiry(keys: [key], deadline: deadline)))
        case .timeToLive(let key): steps.append(.deadlines([key]))
        case .getVersioned, .conditionalPut, .update:
            preconditionFailure("TransactionStep: \(operation) has no steps in a transaction")
        }
    }
}
