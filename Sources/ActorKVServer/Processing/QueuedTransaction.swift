import ActorKVProtocol
import ActorKVStore
import Synchronization

/// The commands a connection queued after MULTI, until EXEC or DISCARD.
struct QueuedTransaction: Sendable {
    /// The data commands, in order.
    var commands: [QueuedCommand] = []
    /// The commands whose reply is known when queued (PING, ECHO): each reply with its place
    /// among EXEC's replies, in order.
    var constantReplies: [(position: Int, reply: Reply)] = []
    /// Whether a command was refused while queueing: EXEC then applies nothing (EXECABORT).
    var aborted = false
    /// The sum of the commands' ``QueuedCommand/weight``.
    var weight = 0

    /// How many commands are queued.
    var count: Int { commands.count + constantReplies.count }

    /// What a queued constant reply is counted against the limit: its bytes, and
    /// ``TransactionStep/commandOverhead``.
    static func weight(of reply: Reply) -> Int {
        guard case .bulk(let bytes) = reply else { return TransactionStep.commandOverhead }
        return TransactionStep.commandOverhead + bytes.count
    }

    /// EXEC's reply `executed` of the data commands (an array of their replies, in order) with
    /// the constant replies put in their places; any other reply (EXEC refused, or a WATCH that
    /// failed) as it is.
    func withConstantReplies(_ executed: Reply) -> Reply {
        guard !constantReplies.isEmpty, case .array(var replies) = executed else { return executed }
        replies.reserveCapacity(count)
        for (position, reply) in constantReplies { replies.insert(reply, at: position) }
        return .array(replies)
    }
}
