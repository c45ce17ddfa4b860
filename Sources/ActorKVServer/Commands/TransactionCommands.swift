import ActorKVProtocol
import ActorKVStore

/// Redis's transactions: MULTI queues a connection's commands, EXEC applies them atomically as one
/// log record (all or nothing), DISCARD drops them; WATCH makes EXEC apply nothing if a watched
/// namespace was written since (protocol.md, "Transactions: MULTI, EXEC, WATCH").
enum TransactionCommands {
    /// Their specs. All run at once even inside MULTI (``CommandFlags/transactionControl``).
    static let specs: [CommandSpec] = [
        CommandSpec(name: "MULTI", usage: "MULTI", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand(.multi, now: { context in
                context.session.beginTransaction() ? .simple("OK") : .error(.err, "MULTI calls can not be nested")
            }))
        },
        // Any arity: an EXEC with arguments ends the transaction, as Redis's does (``abortedExec``).
        CommandSpec(name: "EXEC", usage: "EXEC", arity: .atLeast(0), flags: [.unrestricted, .session, .transactionControl]) { (args) throws(CommandError) in
            guard args.count == 0 else { return abortedExec }
            return .local(LocalCommand(.exec) { context in await exec(context) })
        },
        CommandSpec(name: "DISCARD", usage: "DISCARD", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand(now: { context in
                context.session.endTransaction().transaction == nil ? .error(.err, "DISCARD without MULTI") : .simple("OK")
            }))
        },
        CommandSpec(name: "WATCH", usage: "WATCH ns [ns ...]", arity: .atLeast(1), flags: [.session, .readOnly, .namespacedArguments, .transactionControl]) { (args) throws(CommandError) in
            let names = try (0..<args.count).map { (i) throws(CommandError) in try args.namespace(i) }
            return .local(LocalCommand { context in
                guard !context.session.inTransaction else { return .error(.err, "WATCH inside MULTI is not allowed") }
                guard context.session.mayWatch(names) else { return tooLarge(limit: context.session.transactionLimit, then: "this WATCH watches nothing") }
                for name in names {
                    let sequence: UInt64
                    do { sequence = try await context.backend.watchPoint(of: name) } catch { return ErrorMapping.reply(for: error) }
                    context.session.watch(name, at: sequence)
                }
                return .simple("OK")
            })
        },
        CommandSpec(name: "UNWATCH", usage: "UNWATCH", arity: .exactly(0), flags: [.unrestricted, .session, .transactionControl]) { (_) throws(CommandError) in
            .local(LocalCommand(now: { context in
                context.session.unwatchAll()
                return .simple("OK")
            }))
        },
    ]

    /// EXEC with arguments: Redis discards the transaction (and forgets what was watched),
    /// inside MULTI or not, and answers `EXECABORT` with the arity error. A client that sent
    /// EXEC then knows its transaction is over, whatever the reply.
    private static let abortedExec = Command.local(LocalCommand(now: { context in
        _ = context.session.endTransaction()  // and forgets what was watched
        return .error(.execAbort, "Transaction discarded because of: wrong number of arguments for 'EXEC' (usage: EXEC)")
    }))

    /// The reply to a command sent inside MULTI: it is queued (`+QUEUED`), or refused with an
    /// error that makes EXEC apply nothing.
    static func queue(_ command: Command, on session: ClientSession) -> Reply {
        if case .refused(let error) = command {
            session.refuseQueued()
            return ErrorMapping.reply(for: error)
        }
        if case .local(let local) = command, let reply = local.constantReply {
            guard session.queue(constantReply: reply) else { return tooLarge(limit: session.transactionLimit, then: "EXEC will apply nothing") }
            return .simple("QUEUED")
        }
        guard case .data(let namespace, let operation, let shape) = command,
              let plan = TransactionStep.plan(for: operation, shape: shape) else {
            session.refuseQueued()
            return .error(.err, "this command cannot be queued in a transaction: only reads and writes of one namespace's keys can (GET, PUT, DEL, EXISTS, INCR, PEXPIRE, PERSIST, PTTL, EXPIRE, EXPIREAT, PEXPIREAT, TTL, EXPIRETIME, PEXPIRETIME, HGET, HSET, HSETNX, HDEL, HGETDEL, HGETEX, HSETEX, HEXISTS, HSTRLEN, HINCRBY, HINCRBYFLOAT, HMGET, HMSET, HLEN, HGETALL, HKEYS, HVALS, HRANDFIELD, HEXPIRE, HPEXPIRE, HEXPIREAT, HPEXPIREAT, HPERSIST, HTTL, HPTTL, HEXPIRETIME, HPEXPIRETIME, TYPE, PING, ECHO, ROLE; PUT without IFVERSION or EPHEMERAL; protocol.md, \"Transactions\"); read the others before MULTI under a WATCH")
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
        for (name, point) in watched where name != namespace {
            if await context.backend.changed(name, since: point) { return .nullArray }
        }
        guard let namespace else { return queued.withConstantReplies(.array([])) }
        return queued.withConstantReplies(await apply(queued.commands, in: namespace, guardedSince: watched[namespace], context))
    }

    /// `NOPERM` if, under the rules in force now, the connection lacks a right that a queued
    /// command needs (each was judged when queued; the rules may have been reloaded since), or
    /// may no longer read a watched namespace.
    private static func refusalByCurrentRules(_ queued: [QueuedCommand], watched: [String: UInt64], _ context: CommandContext) -> CommandError? {
        if let namespace = queued.first?.namespace {
            let needed: AccessRights = queued.reduce(into: []) { $0.formUnion($1.operation.neededRight) }
            if let refusal = context.refusal(needing: needed, on: namespace) { return refusal }
        }
        for name in watched.keys.sorted() {
            if let refusal = context.refusal(needing: .read, on: name) { return refusal }
        }
        return nil
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
