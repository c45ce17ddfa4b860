#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// When a namespace's expiry sweeper runs next: at the next deadline (at most
/// ``interval`` apart while keys have deadlines), but, while expired keys wait for deletion,
/// only a share of the time: ``busyDutyPercent`` while the namespace serves requests between
/// sweeps, ``idleDutyPercent`` while nobody is waiting. Expired keys are already gone for every
/// read, so a backlog costs memory for a while, not correctness; clients come first, and the
/// backlog clears fastest when it slows nobody (Redis's active expire cycle bounds itself to 25%
/// of its CPU the same way). Pure policy: the namespace gives it the clocks' readings.
struct SweepPacing {
    /// The share of time, in percent, that sweeping may take while keys are due and the
    /// namespace served requests since the last sweep.
    static let busyDutyPercent: UInt64 = 10
    /// The share while keys are due and no request came since the last sweep.
    static let idleDutyPercent: UInt64 = 50
    /// The longest wait between sweeps while keys have deadlines, in milliseconds.
    static let interval: UInt64 = 100

    /// The monotonic time (nanoseconds) before which no sweep should start.
    private(set) var restUntil: UInt64 = 0

    /// Notes a sweep that ran from `start` to `end` (monotonic nanoseconds), `busy` if requests
    /// were served since the sweep before: the next one rests long enough that sweeping takes
    /// ``busyDutyPercent`` (busy) or ``idleDutyPercent`` of the time.
    mutating func swept(from start: UInt64, to end: UInt64, busy: Bool) {
        let took = end > start ? end - start : 0
        let duty = busy ? Self.busyDutyPercent : Self.idleDutyPercent
        restUntil = end + took * (100 - duty) / duty
    }

    /// Whether a sweep may start at `now` (monotonic nanoseconds): a read that met an expired
    /// key asks for one, which waits for the sweeper if sweeping has had its share.
    func maySweep(at now: UInt64) -> Bool { now >= restUntil }

    /// Nanoseconds to wait before the next sweep, at monotonic time `now` and wall-clock
    /// milliseconds `wallNow`, when the earliest deadline held is `earliest` (wall-clock ms).
    func delay(now: UInt64, wallNow: UInt64, earliest: UInt64) -> UInt64 {
        let untilDue = earliest > wallNow ? min(earliest - wallNow, Self.interval) * 1_000_000 : 0
        let rest = restUntil > now ? restUntil - now : 0
        return max(untilDue, rest)
    }

    /// Monotonic nanoseconds (CLOCK_MONOTONIC): sweep durations are not moved by clock changes.
    static func monotonicNanoseconds() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(max(0, spec.tv_sec)) * 1_000_000_000 + UInt64(max(0, spec.tv_nsec))
    }
}
