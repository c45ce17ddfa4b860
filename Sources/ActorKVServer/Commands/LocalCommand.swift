import ActorKVProtocol
import ActorKVStore

/// A command that runs on its own rather than in a namespace's run: what it does, given the
/// ``CommandContext``, returning its reply.
public struct LocalCommand: Sendable {
    /// What it does: reply what it was made with, or run, at once or waiting.
    private enum Body: Sendable {
        /// A reply known once the request is parsed (PING, ECHO).
        case constant(Reply)
        /// Work that needs no waiting: it changes its session, or replies from what it holds
        /// (CLIENT SETNAME, CONFIG GET).
        case now(@Sendable (CommandContext) -> Reply)
        /// Work that waits (on the back end, or on other connections).
        case waiting(@Sendable (CommandContext) async -> Reply)
    }

    private let body: Body
    /// Its spec's flags (set when the request is parsed).
    var flags: CommandFlags = []
    /// MULTI or EXEC (nil for every other command): a connection's turn that is exactly one
    /// transaction may run as a data command (``TransactionCommands/merged(_:)``).
    let transactionRole: TransactionRole?

    init(_ transactionRole: TransactionRole? = nil, _ run: @escaping @Sendable (CommandContext) async -> Reply) {
        self.transactionRole = transactionRole
        self.body = .waiting(run)
    }

    /// A command that needs no waiting, which the event loop may run at once, with no task
    /// (``runsNow``).
    init(_ transactionRole: TransactionRole? = nil, now run: @escaping @Sendable (CommandContext) -> Reply) {
        self.transactionRole = transactionRole
        self.body = .now(run)
    }

    /// A command that does nothing but reply `reply`, which it may also do queued in MULTI.
    init(replying reply: Reply) {
        self.transactionRole = nil
        self.body = .constant(reply)
    }

    /// The reply of a command whose reply is known once it is parsed (PING, ECHO): inside MULTI
    /// it is queued, and EXEC gives this reply in its place (nil for every other command).
    var constantReply: Reply? {
        guard case .constant(let reply) = body else { return nil }
        return reply
    }

    /// Whether it needs no waiting: ``runNow(_:)`` can run it.
    var runsNow: Bool {
        if case .waiting = body { return false }
        return true
    }

    /// Runs it, given `context`.
    func run(_ context: @autoclosure () -> CommandContext) async -> Reply {
        switch body {
        case .constant(let reply): return reply
        case .now(let run): return run(context())
        case .waiting(let run): return await run(context())
        }
    }

    /// Runs it at once, given `context` (made only if it needs one); nil, having done nothing,
    /// for one that waits.
    func runNow(_ context: @autoclosure () -> CommandContext) -> Reply? {
        switch body {
        case .constant(let reply): return reply
        case .now(let run): return run(context())
        case .waiting: return nil
        }
    }
}

/// The two commands that delimit a transaction.
enum TransactionRole: Sendable {
    case multi, exec
}
