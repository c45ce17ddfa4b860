#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A namespace's key lifetimes: deadlines swept in bounded batches (and paced), the keys of an
/// owner that went away, and, at recovery, whatever ended while the server was down.
extension Namespace {
    /// Keys deleted per record by a sweep, and records per ``sweepExpired()``: bounded work per
    /// turn on the actor, as Redis's active expire cycle bounds its own.
    static let sweepBatch = 200
    static let sweepRecords = 10

    /// Deletes keys whose deadline has passed, each batch as one logged record that followers
    /// see as deletes, at most ``sweepBatch`` × ``sweepRecords`` keys; returns how many.
    @discardableResult
    public func sweepExpired() -> Int {
        var removed = data.deadline == 0 ? 0 : expireIfDue()
        for _ in 0..<Self.sweepRecords {
            let due = data.lifetimes.takeDue(at: WallClock.milliseconds(), limit: Self.sweepBatch)
            guard !due.isEmpty else { break }
            if case .failure(let error) = deleteOnItsOwn(due) {
                data.lifetimes.requeue(due)  // tried again at the next sweep
                options.log("namespace \(name): deleting \(due.count) expired keys failed: \(error.message)")
                break
            }
            removed += due.count
            if due.count < Self.sweepBatch { break }
        }
        return removed
    }

    /// Whether a key, or the namespace itself, has a deadline (the sweeper runs while one does).
    var hasDeadlines: Bool { data.lifetimes.hasDeadlines || data.deadline != 0 }

    /// Keys deleted per record when the namespace's own deadline passes.
    static let expiryBatch = 1000

    /// When the namespace's own deadline has passed: deletes every key, returns how many. The
    /// deletes are logged, a thousand per record, which followers see as deletes; the keys then
    /// leave memory at once, the map replaced by an empty one (and the old one freed off the
    /// actor), not one tree deletion per key. Should a record fail to be written, the keys go
    /// from memory all the same, so that no read finds them once the deadline has passed: the
    /// deadline is in the log, and the namespace's next opening deletes them again, logged.
    @discardableResult
    func expireIfDue() -> Int {
        guard !expiring, data.deadline != 0, data.deadline <= WallClock.milliseconds() else { return 0 }
        expiring = true
        defer { expiring = false }
        var keys: [[UInt8]] = []
        keys.reserveCapacity(data.map.count)
        data.map.forEach { key, _, _ in
            keys.append(key)
            return true
        }
        var start = 0
        while start < keys.count {
            let chunk = Array(keys[start..<min(keys.count, start + Self.expiryBatch)])
            start += chunk.count
            let run = execute([.delete(chunk)], blindDeletes: true, applying: false)
            if case .failure(let error) = run.outcomes[0] {
                options.log("namespace \(name): its deadline passed, but logging the deletes of its keys failed: \(error.message); they are gone for reads, and deleted again when it next opens")
                break
            }
            if !run.durability.isImmediate {
                Task(executorPreference: options.backgroundExecutor) { try? await run.durability.wait() }
            }
        }
        let old = data
        data = LiveData()
        BlockingIO.release(consume old)
        let count = keys.count
        BlockingIO.release(consume keys)
        return count
    }

    /// Deletes every key `owner` holds (its connection ended), a thousand per logged record;
    /// returns how many. ``Lifetime/recoveredOwner`` names the ephemeral keys of an earlier run.
    @discardableResult
    public func releaseOwner(_ owner: UInt64) -> Int {
        let keys = data.lifetimes.keys(ownedBy: owner)
        var removed = 0
        var start = 0
        while start < keys.count {
            let chunk = Array(keys[start..<min(keys.count, start + 1000)])
            start += chunk.count
            if case .failure(let error) = deleteOnItsOwn(chunk) {
                options.log("namespace \(name): deleting \(keys.count - removed) ephemeral keys failed: \(error.message)")
                break
            }
            removed += chunk.count
        }
        return removed
    }

    /// Deletes `keys` as one logged record that nobody waits for: under `always`, the fsync that
    /// makes it deliverable to followers is asked for here (a write's own caller would wait for it).
    private func deleteOnItsOwn(_ keys: [[UInt8]]) -> Outcome {
        let run = execute([.delete(keys)], blindDeletes: true)
        if !run.durability.isImmediate {
            Task(executorPreference: options.backgroundExecutor) { try? await run.durability.wait() }
        }
        return run.outcomes[0]
    }

    /// When the namespace opens: deletes the ephemeral keys of the server's previous run (their
    /// connections are gone) and the keys whose deadline passed meanwhile (both as logged
    /// deletes, which followers resuming from before see), and starts sweeping. Returns how many
    /// keys of each kind it deleted.
    func endEarlierLifetimes() async -> (ephemeral: Int, expired: Int) {
        let ephemeral = releaseOwner(Lifetime.recoveredOwner)
        var expired = 0
        while true {
            let removed = sweepExpired()
            expired += removed
            if removed < Self.sweepBatch * Self.sweepRecords { break }
        }
        if hasDeadlines { startSweeper() }
        // Durable before the namespace serves anyone (under `always`; else as the policy says).
        if ephemeral + expired > 0 { try? await syncer.waitDurable(lastSequence) }
        return (ephemeral, expired)
    }

    /// Starts the task that sweeps expired keys at their deadlines, at least ten times a second,
    /// for as long as any key has a deadline; while a backlog of expired keys waits, it takes
    /// a bounded share of the time (``SweepPacing``).
    func startSweeper() {
        guard !closed else { return }
        sweeper = Task(executorPreference: options.backgroundExecutor) { [weak self] in
            while !Task.isCancelled {
                guard let delay = await self?.nextSweepDelay() else { return }
                try? await Task.sleep(nanoseconds: delay)
                await self?.pacedSweep()
            }
        }
    }

    /// How long until the next sweep, in nanoseconds; nil (and the sweeper ends) when no key has
    /// a deadline left.
    private func nextSweepDelay() -> UInt64? {
        let earliest = min(data.lifetimes.earliestDeadline ?? .max, data.deadline == 0 ? .max : data.deadline)
        guard hasDeadlines, !closed, earliest != .max else {
            sweeper = nil
            return nil
        }
        return sweepPacing.delay(now: SweepPacing.monotonicNanoseconds(), wallNow: WallClock.milliseconds(), earliest: earliest)
    }

    /// One sweep, timed for the pacing.
    private func pacedSweep() {
        // Read before the sweep: its own deletes are runs too.
        let busy = servedSinceSweep
        let start = SweepPacing.monotonicNanoseconds()
        sweepExpired()
        sweepPacing.swept(from: start, to: SweepPacing.monotonicNanoseconds(), busy: busy)
        servedSinceSweep = false
    }

    /// Sweeps soon: a read met a key whose deadline has passed (lazy expiry).
    func scheduleSweep() {
        guard promptSweep == nil, !closed else { return }
        promptSweep = Task(executorPreference: options.backgroundExecutor) { [weak self] in await self?.promptSweepDone() }
    }

    /// The sweep a read asked for, unless sweeping has had its share of the time (the sweeper
    /// comes soon enough then, and the key is gone for reads meanwhile).
    private func promptSweepDone() {
        promptSweep = nil
        if sweepPacing.maySweep(at: SweepPacing.monotonicNanoseconds()) { pacedSweep() }
    }

    /// Whether exactly the keys with a lifetime have marked map entries (for tests).
    func lifetimeMarksMatch() -> Bool { data.marksMatchLifetimes() }
}
