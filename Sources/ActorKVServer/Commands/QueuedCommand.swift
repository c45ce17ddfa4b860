import ActorKVProtocol
import ActorKVStore

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
