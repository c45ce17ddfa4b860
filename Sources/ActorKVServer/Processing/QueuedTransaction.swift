import ActorKVProtocol
import ActorKVStore
import Synchronization

/// The commands a connection queued after MULTI, until EXEC or DISCARD.
struct QueuedTransaction: Sendable {
    /// The commands, in order.
    var commands: [QueuedCommand] = []
    /// Whether a command was refused while queueing: EXEC then applies nothing (EXECABORT).
    var aborted = false
    /// The sum of the commands' ``QueuedCommand/weight``.
    var weight = 0
}
