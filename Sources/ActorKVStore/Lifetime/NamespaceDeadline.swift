/// A change of a whole namespace's deadline (``Operation/setNamespaceDeadline(_:)``): Redis's
/// `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` and `PERSIST` of a hash, a namespace being one.
/// When the deadline passes, every key of the namespace is deleted. A namespace that holds no
/// key has no deadline, and gets none.
public struct NamespaceDeadline: Sendable, Equatable {
    /// The deadline to give (``KeyExpiry/Deadline/none``: remove it, `PERSIST`).
    public var deadline: KeyExpiry.Deadline
    /// When to give it (Redis's `NX`, `XX`, `GT`, `LT`).
    public var condition: KeyExpiry.Condition

    /// A change to `deadline` under `condition`.
    public init(_ deadline: KeyExpiry.Deadline, condition: KeyExpiry.Condition = .always) {
        self.deadline = deadline
        self.condition = condition
    }

    /// What the change does to a namespace whose deadline is `current` (0: none), or that holds
    /// no key (nil), at `now` (milliseconds since the epoch), judged as ``KeyExpiry`` judges a
    /// key's: the result, and the deadline afterwards (nil: every key deleted, the time given
    /// being at or before `now`).
    public func apply(to current: UInt64?, now: UInt64) -> (result: KeyExpiry.Result, deadline: UInt64?) {
        let change = KeyExpiry(keys: [], deadline: deadline, condition: condition)
        let (result, lifetime) = change.apply(to: current.map { Lifetime(deadline: $0) }, now: now)
        return (result, lifetime?.deadline ?? (result == .deleted ? nil : current ?? 0))
    }

    /// Redis's reply to the change: 1 when the deadline was set or removed (or, a time already
    /// passed, the keys deleted), else 0.
    public static func reply(to result: KeyExpiry.Result) -> Int {
        result == .changed || result == .deleted ? 1 : 0
    }
}
