import ActorKVProtocol
import ActorKVStore

/// Redis's transactions: MULTI queues a connection's commands, EXEC applies them atomically as one
/// log record (all or nothing), DISCARD drops them; WATCH makes EXEC apply nothing if a watched
/// namespace was written since (protocol.md, "Transactions: MULTI, EXEC, WATCH").
enum TransactionCommands {
    /// Their specs. All run at once even inside MULTI (``CommandFlags/transactionControl``).
    static let specs: [CommandSpec] = [
        CommandSpec(name: "MULTI", usage: "MULTI", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                context.session.beginTransaction() ? .simple("OK") : .error(.err, "MULTI calls can not be nested")
            })
        },
        CommandSpec(name: "EXEC", usage: "EXEC", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand { context in await exec(context) })
        },
        CommandSpec(name: "DISCARD", usage: "DISCARD", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand { context in
                context.session.endTransaction().transaction == nil ? .error(.err, "DISCARD without MULTI") : .simple("OK")
            })
        },
        CommandSpec(name: "WATCH", usage: "WATCH ns [ns ...]", arity: .atLeast(1), flags: [.session, .readOnly, .namespacedArguments, .transactionControl]) { (args) throws(CommandError) in
            let names = try (0..<args.count).map { (i) throws(CommandError) in try Command.namespace(args[i]) }
            return .local(LocalCommand { context in
                guard !context.session.inTransaction else { return .error(.err, "WATCH inside MULTI is not allowed") }
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
            session.queue(nil)
            return ErrorMapping.reply(for: error)
        }
        guard case .data(let namespace, let operation, let shape) = command,
              let plan = TransactionStep.steps(for: operation, shape: shape) else {
            session.queue(nil)
            return .error(.err, "this command cannot be queued in a transaction: only single-key reads and writes can (protocol.md, \"Transactions\")")
        }
        session.queue(QueuedCommand(namespace: namespace, operation: operation, shape: shape, plan: plan))
        return .simple("QUEUED")
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
        let plans = queued.map(\.plan)
        var steps: [BatchStep] = watchedAt.map { [.unchangedSince($0)] } ?? []
        for plan in plans { steps += plan.steps }
        let operation = Operation.batch(steps)
        let execution = await context.execute([operation], inNamespace: namespace)
        switch await execution.settled([operation])[0] {
        case .conditionFailed: return .nullArray
        case .failure(let error): return ErrorMapping.reply(for: error)
        case .batch(var results):
            if watchedAt != nil { results.removeFirst() }
            var replies: [Reply] = []
            var offset = 0
            for plan in plans {
                replies.append(plan.reply(Array(results[offset..<(offset + plan.steps.count)])))
                offset += plan.steps.count
            }
            return .array(replies)
        case let other: return KeyValueCommands.reply(for: other)
        }
    }
}

/// A data command queued inside MULTI, planned as EXEC will run it.
struct QueuedCommand: Sendable {
    /// The namespace it addresses.
    let namespace: String
    /// What it does, and how its reply is made (when EXEC runs reads alone).
    let operation: Operation
    let shape: ReplyShape
    /// Its steps in EXEC's batch.
    let plan: TransactionStep
}

/// A queued data command as steps of EXEC's one batch, and how its reply is made from their
/// outcomes. Only commands on single keys qualify: a read of one key, a write of one or more.
struct TransactionStep: Sendable {
    /// The steps, in order.
    let steps: [BatchStep]
    /// The command's reply from its steps' outcomes.
    let reply: @Sendable ([Outcome]) -> Reply

    private static let keep = Update { _ in .keep }

    /// The steps of `operation` (with reply `shape`), or nil if it cannot be part of a
    /// transaction (scans, counts, lifetimes, conditional puts, guarded BATCHes).
    static func steps(for operation: Operation, shape: ReplyShape) -> TransactionStep? {
        switch operation {
        case .get(let key):
            return TransactionStep(steps: [.update(key: Array(key), keep)]) { KeyValueCommands.reply(for: $0[0], of: operation, shape: shape) }
        case .put(let key, let value):
            return TransactionStep(steps: [.put(key: Array(key), value: Array(value))]) { _ in .simple("OK") }
        case .set(let key, let value):
            return TransactionStep(steps: [.set(key: Array(key), value: Array(value))]) { .integer(KeyValueCommands.sumOfCounts($0)) }
        case .increment(let key, let delta):
            return TransactionStep(steps: [.increment(key: key, by: delta)]) { KeyValueCommands.reply(for: $0[0]) }
        case .delete(let keys):
            return TransactionStep(steps: keys.map { .delete(key: $0) }) { .integer(KeyValueCommands.sumOfCounts($0)) }
        case .exists(let keys):
            return TransactionStep(steps: keys.map { .update(key: $0, keep) }) { outcomes in
                .integer(Int64(outcomes.filter { $0 != .value(nil) }.count))
            }
        case .batch(let steps) where shape == .added:
            return TransactionStep(steps: steps) { .integer(KeyValueCommands.sumOfCounts($0)) }
        case .batch, .getVersioned, .conditionalPut, .update, .lifetimePut, .setTimeToLive, .timeToLive, .count, .scan:
            return nil
        }
    }
}
