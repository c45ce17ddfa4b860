/// A write of several keys' values, all of them or none, under one rule for their lifetimes
/// (``Operation/setAll(_:)``): Redis 8's `HSETEX`, whose fields are a namespace's keys. One log
/// record; its outcome is ``Outcome/integer(_:)`` 1 when the keys were written, 0 when the
/// ``presence`` condition did not hold and nothing was.
public struct KeySetting: Sendable, Equatable {
    /// Which keys must exist, judged before anything is written (Redis's `FNX`, `FXX`).
    public enum Presence: Sendable, Equatable {
        /// Any.
        case any
        /// None of the keys (`FNX`).
        case allAbsent
        /// Every key (`FXX`).
        case allPresent
    }

    /// The lifetime the keys get.
    public enum Deadline: Sendable, Equatable {
        /// None: a key written loses its deadline and owner, as by a PUT.
        case none
        /// The one each key has (`KEEPTTL`): its deadline and owner stay.
        case keep
        /// This many milliseconds after the write's time (0: at it, so the keys are deleted).
        case after(milliseconds: UInt64)
        /// This wall-clock time, in milliseconds since the epoch (at or before the write's time:
        /// the keys are deleted).
        case at(milliseconds: UInt64)
    }

    /// The keys, in order (a key named twice is written twice: the last value stays).
    public var keys: [[UInt8]]
    /// Their values, one per key.
    public var values: [[UInt8]]
    /// Which keys must exist.
    public var presence: Presence
    /// The lifetime they get.
    public var deadline: Deadline

    /// A write of `values` under `keys` (as many of each), if `presence` holds, with `deadline`.
    public init(keys: [[UInt8]], values: [[UInt8]], presence: Presence = .any, deadline: Deadline = .none) {
        precondition(keys.count == values.count, "KeySetting: one value per key")
        self.keys = keys
        self.values = values
        self.presence = presence
        self.deadline = deadline
    }

    /// Whether ``presence`` holds for keys of which `exists` says whether each is there.
    public func holds(where exists: ([UInt8]) -> Bool) -> Bool {
        switch presence {
        case .any: true
        case .allAbsent: !keys.contains(where: exists)
        case .allPresent: keys.allSatisfy(exists)
        }
    }

    /// The deadline in milliseconds since the epoch (saturating) the keys get at `now`, or nil
    /// for ``Deadline/none`` and ``Deadline/keep``.
    public func absoluteDeadline(now: UInt64) -> UInt64? {
        switch deadline {
        case .none, .keep: return nil
        case .after(let milliseconds): return KeyExpiry.Deadline.after(milliseconds: milliseconds).milliseconds(now: now)
        case .at(let milliseconds): return milliseconds
        }
    }
}
