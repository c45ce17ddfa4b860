#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What opening a namespace found on disk.
struct RecoveredNamespace {
    var data: LiveData
    var lastSequence: UInt64
    var snapshotSequence: UInt64
    var snapshotCreatedAt: UInt64
    /// The snapshot's ``SnapshotCodec/Header/startedEmptyAt``.
    var startedEmptyAt: UInt64
    /// The segments before the active one, oldest first.
    var olderSegments: [SegmentSpan]
    /// The bytes of those holding changes after the snapshot (the rest are kept as history).
    var olderBytes: Int
    /// The sequence number of the active segment's first record (or of the next one written).
    var activeFirstSequence: UInt64
    var active: LogSegment
    /// Where the active segment's records start (after its header; 0 in a format-0 segment).
    var activeStart: Int
    var activeLength: Int
    /// The bytes of the active segment's records that the snapshot holds (kept as history).
    var activeCoveredBytes: Int
    /// The active segment's size on disk: beyond `activeLength` it holds zeros reserved ahead.
    var activeFileSize: Int
    var recordsReplayed: Int
    var tornBytesCut: Int
}

/// What reading a namespace's files found, before anything is changed.
struct NamespaceReading {
    var data: LiveData
    var lastSequence: UInt64
    var snapshotSequence: UInt64
    var snapshotCreatedAt: UInt64
    /// The snapshot's ``SnapshotCodec/Header/startedEmptyAt``.
    var startedEmptyAt: UInt64
    /// The segment numbers, ascending.
    var segments: [UInt64]
    /// Where each segment's records end (its valid length).
    var lengths: [Int]
    /// Each segment's first sequence number (for one with no records, the next one's).
    var firstSequences: [UInt64] = []
    /// The last segment's size on disk and where its records start.
    var lastFileSize: Int
    var lastRecordsStart: Int
    /// The bytes of the last segment's records that the snapshot holds: those before its first
    /// record after the snapshot (all of them if it has none).
    var lastCoveredBytes = 0
    /// The bytes of records the snapshot holds in the segments before the last that also hold
    /// records after it (one at most: sealed by a compaction that failed, or crashed, before its
    /// snapshot, after an earlier one left its records in place).
    var olderCoveredBytes = 0
    var recordsReplayed: Int
    /// A torn tail at the end of the last segment, which opening cuts.
    var tornTail: TornTail?
    /// Whether an unfinished `snapshot.json.tmp` is there, which opening removes.
    var temporarySnapshotLeft: Bool
    /// The sequence the namespace's clean-close marker names, nil if there is none.
    var closedCleanlyThrough: UInt64?

    /// Whether everything read was fsync'd already: the last clean close was through the last
    /// sequence read (its records were all fsync'd before the marker was written, and none came
    /// after), and there is no torn tail to cut. Then opening need not fsync the last segment.
    var knownDurable: Bool { closedCleanlyThrough == lastSequence && tornTail == nil }
}

/// A torn tail found at the end of a namespace's last log segment.
public struct TornTail: Sendable, Equatable {
    /// The segment file.
    public var path: String
    /// Where the records end and the torn bytes begin.
    public var offset: Int
    /// The torn bytes, through the last nonzero one: what was written of an append cut short
    /// (INFO's `torn_bytes_cut`). The zeros after them are not counted here.
    public var bytes: Int
    /// How many bytes cutting removes: everything from `offset` to the end of the file, the zeros
    /// after the torn bytes (reserved ahead, or never written) included.
    public var bytesCut: Int

    /// The cut told to a person, `verb` after the torn bytes ("would be cut"; empty for the
    /// recovery log, which says "cut" first), with the whole count when zeros go with them.
    func description(_ verb: String = "") -> String {
        let zeros = bytesCut > bytes ? ", \(bytesCut) bytes in all with the zeros after it" : ""
        return "a torn tail of \(bytes) bytes at offset \(offset) of \(path)\(verb.isEmpty ? "" : " " + verb)\(zeros)"
    }
}

/// Rebuilds a namespace from its snapshot and log. Blocking: runs off the actors.
///
/// Every file is read and checked (``read(name:files:)``) before anything is changed. Then the
/// only changes recovery makes: an unfinished snapshot's temporary file is removed, a torn tail
/// is cut off the last segment, and an empty last segment gets its header. Anything unreadable
/// throws a `corrupt` ``StoreError`` naming the file and byte offset, and leaves every file as it was.
enum NamespaceRecovery {
    static func recover(name: String, files: NamespaceFiles, log: @Sendable (String) -> Void) throws(StoreError) -> RecoveredNamespace {
        let found = try read(name: name, files: files)
        if found.closedCleanlyThrough == nil, let text = CleanCloseMarker.unreadableText(files: files) {
            log("namespace \(name): \(CleanCloseMarker.path(in: files)) is unreadable (\(text.debugDescription)), so it was ignored: the namespace opens as after a crash")
        }
        if found.temporarySnapshotLeft {
            try? files.system.unlink(files.temporarySnapshotPath)
            log("namespace \(name): removed an unfinished snapshot.json.tmp left by an interrupted compaction")
        }
        // A clean-close marker whose write failed (a full disk at shutdown) and was not removed then.
        try? files.system.unlink(CleanCloseMarker.temporaryPath(in: files))
        var lengths = found.lengths
        var fileSize = found.lastFileSize
        var recordsStart = found.lastRecordsStart
        var coveredBytes = found.lastCoveredBytes
        if let torn = found.tornTail {
            try cut(torn.path, to: torn.offset, system: files.system)
            fileSize = torn.offset
            log("namespace \(name): cut \(torn.description()) (an append cut short, or writes never fsync'd)")
        }
        let activeNumber = found.segments.last ?? 1
        var activeLength = lengths.popLast() ?? 0
        let active: LogSegment
        if found.segments.isEmpty {
            active = try files.createSegment(activeNumber)
            (recordsStart, activeLength, fileSize) = (LogSegmentHeader.length, LogSegmentHeader.length, LogSegmentHeader.length)
            coveredBytes = 0
        } else {
            do {
                let fd = try files.system.open(files.segmentPath(activeNumber), O_RDWR)
                active = LogSegment(number: activeNumber, path: files.segmentPath(activeNumber), fd: fd, system: files.system)
                var durable = found.knownDurable
                if activeLength == 0 {
                    // Empty (a crash before its header was written, or zeros): new records go
                    // after a header, like those of any segment this build starts.
                    (recordsStart, coveredBytes, durable) = (LogSegmentHeader.length, 0, false)
                    do {
                        try NamespaceFiles.writeHeader(to: active)
                        (activeLength, fileSize) = (LogSegmentHeader.length, max(fileSize, LogSegmentHeader.length))
                    } catch {
                        // A full disk: the data is all in the files read, so open it for reads
                        // and write the header before the first record (``Namespace/appendToLog``).
                        log("namespace \(name): could not write the header of the empty log segment \(active.path) (\(error)); it is written before the first record")
                    }
                }
                // New records will claim everything recovered was durable: after a kill -9 it may
                // still be only in the page cache, so make the claim true first (unless a clean
                // close through the last sequence made it true already).
                if !durable { try files.system.fdatasync(fd, path: active.path) }
            } catch {
                throw StoreError.io("opening", files.segmentPath(activeNumber), error)
            }
        }
        let older = zip(zip(found.segments, found.firstSequences), lengths).map { SegmentSpan(number: $0.0, firstSequence: $0.1, bytes: $1) }
        let activeFirst = found.firstSequences.last ?? found.lastSequence + 1
        return RecoveredNamespace(
            data: found.data, lastSequence: found.lastSequence,
            snapshotSequence: found.snapshotSequence, snapshotCreatedAt: found.snapshotCreatedAt, startedEmptyAt: found.startedEmptyAt,
            olderSegments: older, olderBytes: Self.bytesAfterSnapshot(older, next: activeFirst, snapshot: found.snapshotSequence) - found.olderCoveredBytes,
            activeFirstSequence: activeFirst,
            active: active, activeStart: recordsStart, activeLength: activeLength, activeCoveredBytes: coveredBytes,
            activeFileSize: fileSize,
            recordsReplayed: found.recordsReplayed, tornBytesCut: found.tornTail?.bytes ?? 0)
    }

    /// The bytes of the segments among `older` that hold changes after the snapshot (those
    /// before it are kept only as history, which compaction does not count).
    static func bytesAfterSnapshot(_ older: [SegmentSpan], next: UInt64, snapshot: UInt64) -> Int {
        older.indices.reduce(0) { total, i in
            HistoryRetention.lastSequence(of: i, in: older, next: next) > snapshot ? total + older[i].bytes : total
        }
    }

    /// Reads and checks every file of a namespace, changing none: the snapshot, then each log
    /// segment in order, replaying the records after the snapshot. Throws `corrupt` (file and
    /// byte offset) for anything a crash cannot explain, `io` if a file cannot be read.
    static func read(name: String, files: NamespaceFiles) throws(StoreError) -> NamespaceReading {
        let names: [String]
        do { names = try files.system.listDirectory(files.directory) } catch {
            throw StoreError.io("listing", files.directory, error)
        }
        let segments = names.compactMap(NamespaceFiles.segmentNumber(fileName:)).sorted()
        let hasSnapshot = names.contains("snapshot.json")
        var state = try loadSnapshot(name: name, files: files, present: hasSnapshot)
        var replay = Replay(snapshotSequence: state.lastSequence, data: state.data, snapshotMissing: !hasSnapshot)
        // The replay holds the only reference to the snapshot's map, so that its writes change the
        // nodes in place instead of copying each path still shared with a second reference.
        state.data = LiveData()
        var found = NamespaceReading(
            data: LiveData(), lastSequence: state.lastSequence, snapshotSequence: state.lastSequence,
            snapshotCreatedAt: state.createdAt, startedEmptyAt: state.startedEmptyAt, segments: segments, lengths: [], lastFileSize: 0, lastRecordsStart: 0,
            recordsReplayed: 0, tornTail: nil, temporarySnapshotLeft: names.contains("snapshot.json.tmp"))
        for (index, number) in segments.enumerated() {
            let path = files.segmentPath(number)
            var first: UInt64?
            var firstAfterSnapshot: Int?
            // Segments are numbered one after another and compaction drops only the oldest, so
            // a number skipped between two kept segments is a segment gone, and a change skipped
            // between them is history gone, even where the snapshot covers it (CHANGES … FROM
            // would find the hole only when a follower reached it).
            let boundary = index > 0 ? Boundary(files: files, before: segments[index - 1], lastChange: replay.previous,
                                                after: number, snapshot: state.lastSequence) : nil
            let scanned = try LogSegmentScanner.scan(path, after: replay.previous ?? state.lastSequence, system: files.system) { (record, offset) throws(StoreError) in
                if first == nil, let boundary { try boundary.check(firstChange: record.sequence) }
                try replay.apply(record, path: path, offset: offset)
                if first == nil { first = record.sequence }
                if firstAfterSnapshot == nil, record.sequence > state.lastSequence { firstAfterSnapshot = offset }
            }
            if first == nil, let boundary { try boundary.check(firstChange: nil) }
            found.firstSequences.append(first ?? (replay.previous ?? state.lastSequence) + 1)
            found.lastFileSize = scanned.fileSize
            found.lastRecordsStart = scanned.recordsStart
            switch scanned.end {
            case .clean:
                found.lengths.append(scanned.fileSize)
            case .unused(let validLength):
                found.lengths.append(validLength)
            case .torn(let validLength) where index == segments.count - 1:
                found.tornTail = TornTail(path: path, offset: validLength, bytes: scanned.tornBytes,
                                          bytesCut: scanned.fileSize - validLength)
                found.lengths.append(validLength)
            case .torn(let validLength):
                let what = validLength == 0 && scanned.recordsStart == 0 ? "header or record" : "record"
                throw StoreError.corrupt(path, offset: validLength, "incomplete \(what) in a segment that is not the last")
            case .corrupt(let offset, let reason):
                throw StoreError.corrupt(path, offset: offset, reason)
            }
            found.lastCoveredBytes = max(0, (firstAfterSnapshot ?? found.lengths[index]) - scanned.recordsStart)
            if firstAfterSnapshot != nil, index < segments.count - 1 { found.olderCoveredBytes += found.lastCoveredBytes }
        }
        found.data = replay.data
        found.lastSequence = max(replay.lastSequence, state.lastSequence)
        found.recordsReplayed = replay.replayed
        // The torn tail is judged by the whole file's last sequence too: after a clean close,
        // nothing it held may look torn.
        found.closedCleanlyThrough = try CleanCloseMarker.check(
            lastSequence: found.lastSequence, files: files, present: names.contains(CleanCloseMarker.fileName))
        return found
    }

    /// Two log segments that follow each other in a namespace's directory: the changes and the
    /// segment numbers must run on from one to the other without a gap.
    private struct Boundary {
        let files: NamespaceFiles
        /// The segment before, and the last change read from it and those before it (nil: none).
        let before: UInt64
        let lastChange: UInt64?
        /// The segment after.
        let after: UInt64
        /// The last change the snapshot holds (0: no snapshot).
        let snapshot: UInt64

        /// Throws `corrupt` if a segment is missing between the two, or changes are: `firstChange`
        /// is the first change of the segment after (nil: it holds none). A change that goes
        /// back is left to the replay, which names its offset.
        func check(firstChange: UInt64?) throws(StoreError) {
            let segmentsMissing = after > before + 1
            let changesMissing = firstChange.map { first in lastChange.map { first > $0 + 1 } ?? false } ?? false
            guard segmentsMissing || changesMissing else { return }
            throw StoreError(.corrupt, message(firstChange: firstChange))
        }

        private func name(_ number: UInt64) -> String {
            String(files.segmentPath(number).split(separator: "/").last ?? "")
        }

        private func message(firstChange: UInt64?) -> String {
            let segmentsMissing = after > before + 1
            let files = after == before + 2 ? "log segment \(name(before + 1)) is"
                : "log segments \(name(before + 1)) through \(name(after - 1)) are"
            // The changes missing, when both ends are known (none if they run on).
            let changes: ClosedRange<UInt64>? = lastChange.flatMap { last in
                firstChange.flatMap { first in first > last + 1 ? (last + 1)...(first - 1) : nil }
            }
            let listed = changes.map { $0.count == 1 ? "change \($0.lowerBound)" : "changes \($0.lowerBound) through \($0.upperBound)" }
            let what: String
            switch (listed, segmentsMissing) {
            case (let listed?, true):
                what = "\(files) missing, and \(listed) with \(after == before + 2 ? "it" : "them")"
            case (let listed?, false):
                what = "\(listed) \(changes?.count == 1 ? "is" : "are") missing (the end of one segment or the start of the next is gone)"
            case (nil, _):
                what = "\(files) missing"
            }
            let last = lastChange.map { "its last change is sequence \($0)" } ?? "no change before it"
            let first = firstChange.map { "its first is sequence \($0)" } ?? "it holds no change"
            let text = "\(self.files.directory): the log has a gap between \(self.files.segmentPath(before)) (\(last)) and \(self.files.segmentPath(after)) (\(first)): \(what); "
            // Whether the data is whole: the snapshot holds every change the gap can have held.
            let bound = changes?.upperBound ?? (firstChange != nil && lastChange != nil ? lastChange : nil)
            if let bound, bound <= snapshot {
                return text + "the snapshot (through sequence \(snapshot)) holds what the missing changes did, so the data is whole, but CHANGES … FROM cannot be served across the gap; the files were left untouched (restore what is missing, or, to give up the history before the gap, remove \(self.files.segmentPath(before)) and the log segments before it)"
            }
            let lost = bound == nil
                ? "the segment after it holds no change, so how far the missing changes went is not known, and the snapshot reaches sequence \(snapshot): writes after it may be missing"
                : "the snapshot reaches only sequence \(snapshot), so writes after it are missing"
            return text + lost + "; the files were left untouched (restore what is missing from a copy)"
        }
    }

    private struct SnapshotState {
        var data: LiveData
        var lastSequence: UInt64
        var createdAt: UInt64
        var startedEmptyAt: UInt64 = 0
    }

    private static func loadSnapshot(name: String, files: NamespaceFiles, present: Bool) throws(StoreError) -> SnapshotState {
        guard present else { return SnapshotState(data: LiveData(), lastSequence: 0, createdAt: 0) }
        let path = files.snapshotPath
        let decoded: SnapshotCodec.Contents
        switch try SnapshotCodec.decode(window: FileWindow(path: path, capacity: SnapshotCodec.windowCapacity, system: files.system)) {
        case .decoded(let contents):
            decoded = contents
        case .needsWholeFile:
            // Damaged, or an entry longer than the window's reserve: the whole-file decoder gives
            // the verdict (and the offset of any damage).
            let whole = try FileWindow(path: path, capacity: .max, system: files.system)
            do {
                decoded = try whole.withBytes { (bytes) throws(SnapshotCodec.Failure) in try SnapshotCodec.decodeContents(bytes) }
            } catch {
                throw StoreError.corrupt(path, offset: error.offset, error.reason)
            }
        }
        guard decoded.header.namespace == name else {
            throw StoreError.corrupt(path, offset: 0, "the snapshot belongs to namespace '\(decoded.header.namespace)'")
        }
        let data = LiveData(map: decoded.map, bytes: LiveData.byteCount(of: decoded.map), lifetimes: decoded.lifetimes,
                            deadline: decoded.header.deadline)
        return SnapshotState(data: data, lastSequence: decoded.header.lastSequence, createdAt: decoded.header.createdAt,
                             startedEmptyAt: decoded.header.startedEmptyAt)
    }

    private static func cut(_ path: String, to length: Int, system: SystemCalls) throws(StoreError) {
        do {
            let fd = try system.open(path, O_RDWR)
            defer { SystemCalls.close(fd) }
            try system.ftruncate(fd, length, path: path)
            try system.fdatasync(fd, path: path)
        } catch {
            throw StoreError.io("cutting the torn tail of", path, error)
        }
    }

    /// Applies log records after the snapshot, checking that sequence numbers run without gaps
    /// (from the snapshot on, and from one record to the next before it too).
    private struct Replay {
        let snapshotSequence: UInt64
        var data: LiveData
        var lastSequence: UInt64 = 0
        var previous: UInt64?
        var replayed = 0
        /// There is no snapshot file: a log that does not start at the first change lost the
        /// snapshot that covered the changes before it.
        let snapshotMissing: Bool

        init(snapshotSequence: UInt64, data: LiveData, snapshotMissing: Bool) {
            self.snapshotSequence = snapshotSequence
            self.data = data
            self.lastSequence = snapshotSequence
            self.snapshotMissing = snapshotMissing
        }

        mutating func apply(_ record: LogRecord, path: String, offset: Int) throws(StoreError) {
            if let previous, record.sequence <= previous {
                throw StoreError.corrupt(path, offset: offset, "sequence \(record.sequence) does not follow \(previous)")
            }
            // Each record follows the one before it, before the snapshot too (those records are
            // the history CHANGES … FROM reads); the first one past the snapshot follows it.
            let expected = previous.map { $0 + 1 } ?? (record.sequence > snapshotSequence ? snapshotSequence + 1 : record.sequence)
            guard record.sequence == expected else {
                let missing = previous == nil && snapshotMissing
                    ? ": the log starts at change \(record.sequence), and snapshot.json, which would hold the changes before it, is missing (restore it, or the namespace, from a backup)" : ""
                throw StoreError.corrupt(path, offset: offset, "sequence gap: expected \(expected), found \(record.sequence)\(missing)")
            }
            previous = record.sequence
            guard record.sequence > snapshotSequence else { return }
            for mutation in record.mutations { data.apply(mutation, version: record.sequence) }
            lastSequence = record.sequence
            replayed += 1
        }
    }
}
