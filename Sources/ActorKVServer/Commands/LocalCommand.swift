import ActorKVProtocol
import ActorKVStore

/// A command that runs on its own rather than in a namespace's run: what it does, given the
/// ``CommandContext``, returning its reply.
public struct LocalCommand: Sendable {
    let run: @Sendable (CommandContext) async -> Reply
    /// Its spec's flags (set when the request is parsed).
    var flags: CommandFlags = []
    /// MULTI or EXEC (nil for every other command): a connection's turn that is exactly one
    /// transaction may run as a data command (``TransactionCommands/merged(_:)``).
    let transactionRole: TransactionRole?
    /// The reply of a command whose reply is known once it is parsed (PING, ECHO): inside MULTI
    /// it is queued, and EXEC gives this reply in its place (nil for every other command).
    let constantReply: Reply?

    init(_ transactionRole: TransactionRole? = nil, _ run: @escaping @Sendable (CommandContext) async -> Reply) {
        self.transactionRole = transactionRole
        self.run = run
        self.constantReply = nil
    }

    /// A command that does nothing but reply `reply`, which it may also do queued in MULTI.
    init(replying reply: Reply) {
        self.transactionRole = nil
        self.run = { _ in reply }
        self.constantReply = reply
    }
}

/// The two commands that delimit a transaction.
enum TransactionRole: Sendable {
    case multi, exec
}
