import ActorKVProtocol
import ActorKVStore

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
