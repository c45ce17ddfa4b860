/// A change of several keys' deadlines in one write (``Operation/expire(_:)``): Redis's
/// `HEXPIRE` family, whose fields are a namespace's keys. Each key named is judged on its own,
/// in order, seeing what the ones before it did (a key named twice is judged twice).
public struct KeyExpiry: Sendable, Equatable {
    /// The deadline to give.
    public enum Deadline: Sendable, Equatable {
        /// This many milliseconds after the write's time (0: at it, so the key is deleted).
        case after(milliseconds: UInt64)
        /// This wall-clock time, in milliseconds since the epoch (at or before the write's time:
        /// the key is deleted).
        case at(milliseconds: UInt64)
        /// None: the deadline is removed (`HPERSIST`).
        case none

        /// The deadline in milliseconds since the epoch at `now` (saturating), or nil for none.
        public func milliseconds(now: UInt64) -> UInt64? {
            switch self {
            case .after(let milliseconds):
                let (sum, overflow) = now.addingReportingOverflow(milliseconds)
                return overflow ? .max : sum
            case .at(let milliseconds): return milliseconds
            case .none: return nil
            }
        }
    }

    /// When a deadline is given (Redis's `NX`, `XX`, `GT`, `LT`). A key without a deadline
    /// counts as one that lives for ever: later than any deadline.
    public enum Condition: Sendable, Equatable {
        /// Always.
        case always
        /// Only to a key that has no deadline (`NX`).
        case noDeadline
        /// Only to a key that has one (`XX`).
        case hasDeadline
        /// Only if the new deadline is later than the key's (`GT`; never to a key without one).
        case later
        /// Only if the new deadline is earlier than the key's (`LT`; always to a key without one).
        case earlier
    }

    /// What became of one key, with Redis's number for it.
    public enum Result: Int, Sendable, Equatable {
        /// The key does not exist (or has expired).
        case absent = -2
        /// `HPERSIST`: the key has no deadline to remove.
        case noDeadline = -1
        /// The condition did not hold: nothing changed.
        case conditionNotMet = 0
        /// The deadline was set (or, `HPERSIST`, removed).
        case changed = 1
        /// The deadline was at or before the write's time: the key was deleted.
        case deleted = 2
    }

    /// What the change's outcome gives for each key named.
    public enum Yield: Sendable, Equatable {
        /// Its ``Result``'s number (``Outcome/integer(_:)``): the `HEXPIRE` family.
        case results
        /// Its value as it was before the change (``Outcome/value(_:)``, nil for an absent key):
        /// Redis 8's `HGETEX`, which reads the fields and changes their deadlines.
        case values
    }

    /// The keys, in the order their results are given.
    public var keys: [[UInt8]]
    /// The deadline they get.
    public var deadline: Deadline
    /// When they get it.
    public var condition: Condition
    /// What the outcome gives for each key.
    public var yields: Yield

    /// A change of `keys`' deadlines to `deadline`, under `condition`, whose outcome `yields`
    /// each key's result or value.
    public init(keys: [[UInt8]], deadline: Deadline, condition: Condition = .always, yields: Yield = .results) {
        self.keys = keys
        self.deadline = deadline
        self.condition = condition
        self.yields = yields
    }

    /// What the change does to one key whose lifetime is `current` (nil: the key is absent), at
    /// `now` (milliseconds since the epoch): the result, and the key's lifetime afterwards (nil:
    /// deleted; unchanged when the result changes nothing). The owner of an ephemeral key stays.
    ///
    /// `granularity`: the milliseconds deadlines are kept to (an etcd agent keeps them to the
    /// end of their second, 1,000, and gives `current` so). `GT` and `LT` compare the new
    /// deadline rounded up to it, so that one in the same second as `current` is neither later
    /// nor earlier.
    public func apply(to current: Lifetime?, now: UInt64, granularity: UInt64 = 1) -> (result: Result, lifetime: Lifetime?) {
        guard let current else { return (.absent, nil) }
        guard let target = absoluteDeadline(now: now) else {
            guard current.deadline != 0 else { return (.noDeadline, current) }
            return (.changed, Lifetime(deadline: 0, owner: current.owner))
        }
        let (steps, overflow) = target.addingReportingOverflow(granularity - 1)
        let compared = overflow ? target : steps / granularity * granularity
        guard holds(for: current.deadline, target: compared) else { return (.conditionNotMet, current) }
        if target <= now { return (.deleted, nil) }
        return (.changed, Lifetime(deadline: target, owner: current.owner))
    }

    /// The deadline in milliseconds since the epoch (saturating), or nil to remove it.
    func absoluteDeadline(now: UInt64) -> UInt64? { deadline.milliseconds(now: now) }

    /// Whether ``condition`` lets a key whose deadline is `current` (0: none) get `target`.
    private func holds(for current: UInt64, target: UInt64) -> Bool {
        switch condition {
        case .always: return true
        case .noDeadline: return current == 0
        case .hasDeadline: return current != 0
        case .later: return current != 0 && target > current
        case .earlier: return current == 0 || target < current
        }
    }
}
