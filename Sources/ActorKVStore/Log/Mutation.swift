/// One change to a namespace: a put or a delete of one key.
public enum Mutation: Sendable, Equatable {
    /// Set `key` to `value`.
    case put(key: [UInt8], value: [UInt8])
    /// Remove `key` (a no-op when it is absent).
    case delete(key: [UInt8])
    /// Give `key` this lifetime (a deadline, an owner), keeping its value and version; a no-op
    /// when the key is absent. It follows the put of a `PUT … PX/EX/EPHEMERAL` in the same
    /// record, or stands alone (`PEXPIRE`, `PERSIST`). A put or a delete clears the lifetime.
    /// With an empty key (no key is empty), the deadline of the namespace itself
    /// (``namespaceDeadline(_:)``).
    case lifetime(key: [UInt8], Lifetime)

    /// Give the namespace itself this deadline (milliseconds since the epoch; 0: none): when it
    /// passes, every key is deleted (Redis's `EXPIRE` of a hash). Logged as a lifetime of the
    /// empty key, which no key can be. A namespace that holds no key has no deadline: this is a
    /// no-op then, and a delete of the last key clears it.
    public static func namespaceDeadline(_ deadline: UInt64) -> Mutation {
        .lifetime(key: [], Lifetime(deadline: deadline))
    }

    /// The key the mutation writes.
    public var key: [UInt8] {
        switch self {
        case .put(let key, _), .delete(let key), .lifetime(let key, _): return key
        }
    }
}
