import ActorKVProtocol
import ActorKVStore

/// How a data command's reply is made from its operation's outcome: most commands reply as
/// ``KeyValueCommands/reply(for:of:)`` says; the hash commands that share an operation with one
/// of them but reply as Redis does differ here.
public enum ReplyShape: UInt8, Sendable {
    /// As the operation's own command replies (GET, PUT, DEL, …).
    case plain
    /// The sum of a batch's step counts, as an integer (HSET: fields added; HSETNX: 1 or 0).
    case added
    /// The length of the value, 0 when absent (HSTRLEN).
    case length
    /// A whole namespace's entries as a map of keys to values (HGETALL).
    case hashEntries
    /// A whole namespace's keys (HKEYS).
    case hashKeys
    /// A whole namespace's values, in key order (HVALS).
    case hashValues
    /// Of a count: `+hash` if the namespace holds a key, `+none` if not (TYPE).
    case keyType
    /// Of a count: `:1` if the namespace holds a key, `:0` if not (EXISTS of one name).
    case nonEmpty
    /// Of an integer: itself when above 0, null when 0 (MEMORY USAGE: a namespace that holds
    /// no key is one Redis does not have).
    case positiveOrNull
    /// `+OK` once a batch is applied (HMSET).
    case stored
    /// The value a one-step batch's update left, as a bulk string (HINCRBYFLOAT).
    case updatedValue
    /// Of a batch of a read and a delete per key: each read's value, in order (HGETDEL).
    case takenValues
    /// Of deadlines: each key's seconds left, rounded up (HTTL).
    case secondsLeft
    /// Of deadlines: each key's milliseconds left (HPTTL).
    case millisecondsLeft
    /// Of deadlines: each key's deadline in seconds since the epoch, rounded up (HEXPIRETIME).
    case secondsDeadline
    /// Of deadlines: each key's deadline in milliseconds since the epoch (HPEXPIRETIME).
    case millisecondsDeadline
    /// Of a draw of one key: the key drawn, null from an empty namespace (HRANDFIELD ns).
    case randomKey
    /// Of a draw of keys: the keys drawn, in the order drawn (HRANDFIELD ns count).
    case randomKeys
    /// Of a draw of keys: each key drawn and its value, as pairs (HRANDFIELD ns count WITHVALUES).
    case randomEntries
}
