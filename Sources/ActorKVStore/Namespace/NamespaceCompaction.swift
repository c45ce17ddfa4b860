#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A namespace's compaction: a snapshot written off the actor from a copy-on-write copy of the
/// map, then the log it covers dropped (kept back for change history as configured).
extension Namespace {
    /// Writes a snapshot of everything written so far and drops the log it covers; returns once the
    /// snapshot is durable. A compaction already running is waited for first.
    public func compact() async throws {
        while let running = compactionTask { _ = try? await running.value }
        try await startCompaction().value
    }

    /// Compacts if the periodic interval has passed and anything changed since the last snapshot
    /// (the housekeeper's visit, at wall-clock second `now`); returns where the namespace stands
    /// for the next one.
    func housekeep(now: UInt64) -> Housekeeper.Look {
        let interval = options.compaction.interval
        let look = Housekeeper.Look(sequence: lastSequence, snapshotSequence: statistics.snapshotSequence,
                                    snapshotTime: statistics.snapshotTime, openedAt: openedAt, closed: closed)
        if interval > 0, compactionTask == nil, look.changedSinceSnapshot, Double(now) - Double(look.since) >= interval {
            startCompaction()
        }
        return look
    }

    @discardableResult
    func startCompaction() -> Task<Void, any Error> {
        let task = Task {
            try await self.performCompaction()
            self.compactIfDue()
        }
        compactionTask = task
        return task
    }

    private func performCompaction() async throws {
        defer { compactionTask = nil }
        do {
            if let blocker = writeBlocker() { throw blocker }
            // Through the syncer, so that a failed fsync ends durability as it does for writers.
            let syncer = self.syncer
            try await BlockingIO.run { () throws(StoreError) in try syncer.syncNow() }
            let covered = lastSequence
            let coveredBytes = max(0, activeLength - activeStart)
            // The copy-on-write copy is handed over in a box and released on the I/O thread: the
            // nodes that writes copied meanwhile are freed there, not on this actor (at 1M keys
            // that was a pause of tens of milliseconds for the writers).
            let frozen = FrozenMap(data.map)
            let lifetimes = data.lifetimes.frozen()
            let deadline = data.deadline
            // Keys already expired are gone for reads: the snapshot leaves them out.
            let expiredAt = data.lifetimes.hasDeadlines ? WallClock.milliseconds() : 0
            let sealing = HistoryRetention.seals(activeFirst: activeFirstSequence, recordBytes: activeLength - activeStart,
                                                 covered: covered, history: options.changesHistory,
                                                 sealBytes: options.segmentSealBytes)
            if sealing { try rotate() }
            let dropping = Array(olderSegments.prefix(HistoryRetention.droppable(
                olderSegments, next: activeFirstSequence, covered: covered, history: options.changesHistory,
                historyBytes: options.changesHistoryBytes)))
            try self.files.system.failpoint("compaction.afterRotate")
            let header = SnapshotCodec.Header(namespace: name, lastSequence: covered, createdAt: UInt64(time(nil)), deadline: deadline,
                                              startedEmptyAt: startedEmptyAt)
            let files = self.files
            let (size, keyCount) = try await BlockingIO.run { () throws(StoreError) in
                // Writes that came while the fsync above ran are covered too: left in the active
                // segment (not sealed, which fsyncs them), they must be durable before the snapshot
                // is, or a power loss leaves a snapshot ahead of the log and the next write a gap.
                if !sealing { try syncer.syncNow() }
                let written = try SnapshotWriter.write(frozen.take(), lifetimes: lifetimes, expiredAt: expiredAt, header: header, files: files)
                try files.removeSegments(dropping.map(\.number))
                return written
            }
            olderSegments.removeAll { span in dropping.contains(span) }
            if !sealing { activeCoveredBytes = coveredBytes }
            olderBytes = NamespaceRecovery.bytesAfterSnapshot(olderSegments, next: activeFirstSequence, snapshot: covered)
            statistics.snapshotSequence = covered
            statistics.snapshotTime = header.createdAt
            statistics.compactions += 1
            options.log("namespace \(name): snapshot of \(keyCount) keys through sequence \(covered) written (\(size) bytes); dropped \(dropping.count) log segment(s), kept \(olderSegments.count) for change history")
        } catch {
            statistics.ioErrors += 1
            options.log("namespace \(name): compaction failed: \(error)")
            throw error
        }
    }

    /// Starts a new segment unless the active one holds no records: every segment before the
    /// new one is then redundant for a snapshot of the current state (dropped once history
    /// allows).
    private func rotate() throws(StoreError) {
        guard activeLength > activeStart else { return }
        do { try syncer.syncNow() } catch {
            writeFailure = error
            statistics.failure = error.message
            throw error
        }
        let next = try files.createSegment(active.number + 1)
        let (sealed, sealedLength, sealedReserved) = (active, activeLength, activeReserved)
        olderSegments.append(SegmentSpan(number: active.number, firstSequence: activeFirstSequence, bytes: activeLength))
        olderBytes += activeLength - activeCoveredBytes  // records the snapshot holds are history
        activeFirstSequence = lastSequence + 1
        activeCoveredBytes = 0
        active = next
        (activeStart, activeLength, activeReserved) = (LogSegmentHeader.length, LogSegmentHeader.length, LogSegmentHeader.length)
        syncer.rotate(to: next, durableThrough: lastSequence)
        if sealedReserved > sealedLength { trimReservation(of: sealed, to: sealedLength) }
    }

    /// Gives back the zeros reserved ahead of a sealed segment's records (see ``LogReservation``):
    /// kept for change history, it would otherwise hold its reservation (1 MiB under `always`)
    /// for as long as it is kept. Only space: the records are fsync'd, and a segment that keeps
    /// its zeros (the cut not yet on disk at a power loss, or failed) reads the same, so a
    /// failure is logged and nothing else.
    private func trimReservation(of segment: LogSegment, to length: Int) {
        do {
            try segment.system.ftruncate(segment.fd, length, path: segment.path)
        } catch {
            options.log("namespace \(name): could not give back the space reserved ahead in \(segment.path): \(error)")
        }
    }
}
