#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// What a store's namespaces need for as long as any of them is in use, also after the ``Store``
/// object itself is gone: the data directory's lock, and the once-a-second background work (the
/// `everysec` fsync, the periodic compaction check).
///
/// The background work looks only at the namespaces that have some: those written since their
/// log was last durable (under `everysec`) or since their last snapshot (while a periodic
/// compaction may come due). A namespace leaves the list once it has neither, and its log's first
/// write puts it back (``LogSyncer/callOnWrite(_:)``); with nothing listed the ticks stop. So
/// namespaces that nobody writes cost no wake-up, however many there are, and opening or creating
/// one costs the same whatever the number already open.
///
/// The store and each of its namespaces hold the housekeeper; it holds the namespaces only
/// weakly. So code that keeps a `Namespace` or a `Repository` and lets the store go still has
/// its directory locked (a second store on it gets `locked` instead of appending to the same log)
/// and its writes fsync'd in the background. ``Store/close()`` stops the work and releases the
/// lock; without it, both end when the store and the last of its namespaces are freed.
final class Housekeeper: Sendable {
    /// Where a namespace stands for the periodic compaction, as the namespace reports it
    /// (``Namespace/housekeep(now:)``).
    struct Look: Sendable {
        /// The namespace's last sequence number then.
        var sequence: UInt64
        /// Whether anything was written after its snapshot (and it is not closed).
        var changedSinceSnapshot: Bool
        /// When the interval is counted from: its snapshot's time, or its opening if later.
        var since: UInt64
    }

    /// How much looking the ticks did (for tests: the housekeeper's own bookkeeping).
    struct Counts: Sendable, Equatable {
        /// Ticks run.
        var ticks = 0
        /// Namespaces looked at, over all ticks (one per listed namespace per tick).
        var looked = 0
        /// Of those, the looks that went into the namespace's actor (a compaction may be due).
        var visits = 0
    }

    /// One namespace the housekeeper looks after, and what it knows of it. Its fields other than
    /// the weak reference are read and written only by ``tick(now:)`` (one at a time) and by
    /// ``adopt(_:look:)`` before the entry is first listed.
    private final class Entry: @unchecked Sendable {
        weak var namespace: Namespace?
        /// The sequence number through which ``changedSinceSnapshot`` is known.
        var seen: UInt64
        /// Whether something written through ``seen`` may not be in a snapshot yet (true may be
        /// stale: a compaction the namespace ran itself is learned at the next visit).
        var changedSinceSnapshot: Bool
        /// Where the compaction interval was counted from at the last look: the real time is
        /// never earlier, so a compaction is never found due late.
        var since: UInt64

        init(_ namespace: Namespace, look: Look) {
            self.namespace = namespace
            (seen, changedSinceSnapshot, since) = (look.sequence, look.changedSinceSnapshot, look.since)
        }

        func learn(_ look: Look) {
            (seen, changedSinceSnapshot, since) = (look.sequence, look.changedSinceSnapshot, look.since)
        }
    }

    private struct State {
        /// The namespaces with something to do (or not yet known to have nothing).
        var listed: [Entry] = []
        var ticks: Task<Void, Never>?
        var stopped = false
        var counts = Counts()
    }

    private let state = Mutex(State())
    private let lock: DirectoryLock
    private let everysec: Bool
    private let compactionInterval: Double
    /// Whether ticks run by themselves once a second; false for tests, which call ``tick(now:)``.
    private let automatic: Bool

    init(lock: DirectoryLock, everysec: Bool, compactionInterval: Double, automatic: Bool = true) {
        self.lock = lock
        self.everysec = everysec
        self.compactionInterval = compactionInterval
        self.automatic = automatic
    }

    /// Looks after `namespace` from now on; `look` is where it stood when it was made (the
    /// writes it made since, deleting keys of the previous run, are found at the first tick).
    func adopt(_ namespace: Namespace, look: Look) {
        let entry = Entry(namespace, look: look)
        namespace.syncer.callOnWrite { [self] in list(entry) }
        list(entry)
    }

    /// Puts `entry` on the list, starting the ticks if they are not running (and the store is not closed).
    private func list(_ entry: Entry) {
        state.withLock { s in
            s.listed.append(entry)
            guard automatic, s.ticks == nil, !s.stopped else { return }
            s.ticks = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    guard let self, !Task.isCancelled else { return }
                    await self.tick(now: UInt64(time(nil)))
                    if self.stopTicksIfIdle() { return }
                }
            }
        }
    }

    /// Ends the ticks if no namespace is listed (a write lists one again, and starts them).
    private func stopTicksIfIdle() -> Bool {
        state.withLock { s in
            guard s.listed.isEmpty else { return false }
            s.ticks = nil
            return true
        }
    }

    /// One round over the listed namespaces at wall-clock second `now`: under `everysec`, each
    /// one's log is fsync'd in the background; one whose periodic compaction may be due is asked
    /// to compact (``Namespace/housekeep(now:)``); one with nothing left to do leaves the list.
    func tick(now: UInt64) async {
        let entries = state.withLock { s -> [Entry] in
            s.counts.ticks += 1
            defer { s.listed = [] }
            return s.listed
        }
        var kept: [Entry] = []
        var visits = 0
        for entry in entries {
            guard let ns = entry.namespace else { continue }
            if everysec { ns.syncer.syncInBackground() }
            let written = ns.syncer.writtenSequence
            if written > entry.seen {
                entry.seen = written
                entry.changedSinceSnapshot = true
            }
            let interval = compactionInterval
            if interval > 0, entry.changedSinceSnapshot, Double(now) - Double(entry.since) >= interval {
                entry.learn(await ns.housekeep(now: now))
                visits += 1
            }
            // Without a periodic compaction, what was written matters only until it is durable.
            let through = interval > 0 ? entry.seen : .max
            if !(interval > 0 && entry.changedSinceSnapshot), ns.syncer.rearm(ifWrittenThrough: through, clean: everysec) {
                continue
            }
            kept.append(entry)
        }
        state.withLock { s in
            s.listed.append(contentsOf: kept)
            s.counts.looked += entries.count
            s.counts.visits += visits
        }
    }

    /// How many namespaces are listed now, whether the ticks run, and how much looking they have
    /// done (for tests).
    var activity: (listed: Int, ticking: Bool, counts: Counts) {
        state.withLock { s in (s.listed.count, s.ticks != nil, s.counts) }
    }

    /// Stops the background work for good (the store is closing).
    func stop() {
        state.withLock { s in
            s.stopped = true
            s.ticks?.cancel()
            s.ticks = nil
        }
    }

    /// Releases the directory lock (the store is closed: its namespaces take no more writes).
    func releaseLock() { lock.release() }

    deinit { state.withLock { $0.ticks?.cancel() } }
}

extension Housekeeper.Look {
    /// Where a namespace at `sequence` stands, its snapshot through `snapshotSequence` taken at
    /// wall-clock second `snapshotTime`, opened at `openedAt`: changed if anything came after its
    /// snapshot (and it is not `closed`), the interval counted from the later of the two times.
    init(sequence: UInt64, snapshotSequence: UInt64, snapshotTime: UInt64, openedAt: UInt64, closed: Bool = false) {
        self.init(sequence: sequence, changedSinceSnapshot: !closed && sequence > snapshotSequence,
                  since: max(snapshotTime, openedAt))
    }
}
