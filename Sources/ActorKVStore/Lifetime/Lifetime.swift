#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// How long a key lives besides until it is deleted: until a deadline, as long as the
/// connection that owns it, both, or neither (``none``).
public struct Lifetime: Sendable, Equatable {
    /// The wall-clock time at which the key expires, in milliseconds since the epoch; 0: never.
    public var deadline: UInt64
    /// The connection that owns the key (an ephemeral key, deleted when it ends); 0: nobody.
    /// ``recoveredOwner`` marks an ephemeral key read back from the files: its owner is gone.
    public var owner: UInt64

    /// A lifetime with this deadline (0: none) and owner (0: none).
    public init(deadline: UInt64 = 0, owner: UInt64 = 0) {
        self.deadline = deadline
        self.owner = owner
    }

    /// A key that lives until it is deleted.
    public static let none = Lifetime()

    /// The owner of an ephemeral key found in the log or a snapshot: a connection of an earlier
    /// run of the server, so the key is deleted when the namespace opens.
    public static let recoveredOwner = UInt64.max

    /// Whether the key is deleted when its owner's connection ends.
    public var isEphemeral: Bool { owner != 0 }

    /// Whether the key lives until it is deleted.
    public var isNone: Bool { deadline == 0 && owner == 0 }

    /// Whether the deadline has passed at `now` (milliseconds since the epoch).
    @inline(__always)
    public func hasExpired(at now: UInt64) -> Bool { deadline != 0 && deadline <= now }
}

/// Wall-clock time in milliseconds since the epoch, as deadlines are kept.
public enum WallClock {
    /// Now.
    public static func milliseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return UInt64(max(0, spec.tv_sec)) * 1000 + UInt64(max(0, spec.tv_nsec)) / 1_000_000
    }

    /// Now, as whole seconds since the epoch and the microseconds into the current one (TIME).
    public static func secondsAndMicroseconds() -> (seconds: UInt64, microseconds: UInt64) {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return (UInt64(max(0, spec.tv_sec)), UInt64(max(0, spec.tv_nsec)) / 1_000)
    }
}
