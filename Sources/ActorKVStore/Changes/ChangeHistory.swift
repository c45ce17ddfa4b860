#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A log segment a namespace keeps: its number, the sequence number its first record has (or
/// would have, while it holds none), and its length in bytes.
struct SegmentSpan: Sendable, Equatable {
    var number: UInt64
    var firstSequence: UInt64
    var bytes: Int
}

/// Which log segments a namespace keeps for change feeds that resume, and how many leading
/// segments a compaction may drop. Pure.
///
/// A compaction through `covered` makes every segment before the new active one redundant for
/// recovery. It still keeps those holding any of the last `history` changes (those numbered from
/// `covered - history + 1` on), so that `CHANGES … FROM` can be served from them, as long as
/// they take at most `historyBytes`: segments are kept or dropped whole, so the log keeps at
/// most the last `history` changes plus the rest of the oldest segment that holds one of them,
/// and the segments kept for history take at most `historyBytes` (a namespace of large values
/// keeps fewer changes, rather than gigabytes of them).
enum HistoryRetention {
    /// How many of `older` (oldest first; `next` is the first sequence of the segment after the
    /// last of them) may be dropped: those the snapshot covers that hold none of the last
    /// `history` changes, and then more of the oldest while those left take more than
    /// `historyBytes`.
    static func droppable(_ older: [SegmentSpan], next: UInt64, covered: UInt64, history: Int, historyBytes: Int = .max) -> Int {
        let kept = changesKept(history)
        let keepFrom = covered >= kept ? covered - kept + 1 : 1
        var left = older.reduce(0) { $0 + $1.bytes }
        var count = 0
        while count < older.count {
            let end = lastSequence(of: count, in: older, next: next)
            guard end <= covered, end < keepFrom || left > max(0, historyBytes) else { break }
            left -= older[count].bytes
            count += 1
        }
        return count
    }

    /// Whether a compaction through `covered` seals the active segment (whose first change is
    /// `activeFirst`, its records `recordBytes` long) and starts a new one: when it holds a
    /// change older than the last `history`, which the new segment lets a later compaction
    /// drop, or `sealBytes` of records (``StoreOptions/segmentSealBytes``). Otherwise
    /// everything it holds is history to keep anyway, and sealing it would only add a file: a
    /// namespace compacted every minute for a write or two would gain a segment a minute, up to
    /// `history` of them, all read at start.
    static func seals(activeFirst: UInt64, recordBytes: Int, covered: UInt64, history: Int, sealBytes: Int) -> Bool {
        guard recordBytes > 0, activeFirst <= covered else { return false }
        return recordBytes >= sealBytes || covered - activeFirst >= changesKept(history)
    }

    /// `history` as a count of changes (a negative setting keeps none).
    private static func changesKept(_ history: Int) -> UInt64 { UInt64(max(0, history)) }

    /// The last change segment `index` of `segments` holds (one before the next segment's first;
    /// `next` is the first sequence after the last of them). Below its first if it holds none.
    static func lastSequence(of index: Int, in segments: [SegmentSpan], next: UInt64) -> UInt64 {
        (index + 1 < segments.count ? segments[index + 1].firstSequence : next) - 1
    }

    /// The oldest change the segments hold: the first sequence of the oldest one (if it holds
    /// nothing, the next record written will have it).
    static func oldestSequence(_ segments: [SegmentSpan]) -> UInt64 {
        segments.first?.firstSequence ?? 1
    }
}

/// Where a read of history stopped, so that the next one goes on from there without reading the
/// segment from its start again.
public struct HistoryPosition: Sendable, Equatable {
    let segment: UInt64
    let offset: Int
    /// The last change read: the position is good for a read after it only.
    let after: UInt64
}

/// What a reader of history needs from a namespace at one moment: where its segments are.
public struct HistorySource: Sendable {
    let files: NamespaceFiles
    let segments: [SegmentSpan]
}

/// Reads a namespace's changes from its log segments (the history that `CHANGES … FROM` asks for
/// when it is older than what the feed holds in memory). Blocking I/O: run it off the actors.
public enum ChangeHistory {
    /// What one read found.
    public struct Chunk: Sendable {
        /// The changes after the cursor, in order, none past the bound.
        public var changes: [Change]
        /// Where to go on from.
        public var next: HistoryPosition?
    }

    /// The changes after `cursor` through `upper`, about `maxBytes` of them (at least one if
    /// there is one), read from `source`'s segments, starting at `position` when it is where
    /// the last read stopped. Throws ``StoreError/Code/compacted`` if the segment that holds the
    /// change after `cursor` is gone, and `corrupt` or `io` as recovery would.
    public static func read(_ source: HistorySource, after cursor: UInt64, through upper: UInt64, maxBytes: Int,
                            from position: HistoryPosition?) throws(StoreError) -> Chunk {
        var chunk = Chunk(changes: [], next: nil)
        guard upper > cursor else { return chunk }
        guard var index = source.segments.lastIndex(where: { $0.firstSequence <= cursor + 1 }) else {
            throw compacted(source)
        }
        var offset = position.flatMap { $0.segment == source.segments[index].number && $0.after == cursor ? $0.offset : nil }
        var last = cursor
        var bytes = 0
        while index < source.segments.count {
            let segment = source.segments[index]
            let done = try scan(source.files, segment.number, from: offset) { (change, end) throws(StoreError) -> Bool in
                guard change.sequence > last else { return false }
                guard change.sequence == last + 1 else {
                    throw StoreError(.corrupt, "\(source.files.segmentPath(segment.number)): change \(change.sequence) where \(last + 1) was expected")
                }
                if change.sequence > upper { return true }
                chunk.changes.append(change)
                bytes += change.byteSize
                last = change.sequence
                chunk.next = HistoryPosition(segment: segment.number, offset: end, after: last)
                return last == upper || bytes >= maxBytes
            }
            if done { return chunk }
            index += 1
            offset = nil
        }
        return chunk
    }

    private static func compacted(_ source: HistorySource) -> StoreError {
        StoreError(.compacted, "oldest available sequence is \(HistoryRetention.oldestSequence(source.segments))")
    }

    /// Calls `body` with each whole record of a segment from `start` (nil: the first record), and
    /// the position after it, until `body` returns true (then returns true) or the records end
    /// (false). A segment that is gone throws `compacted`.
    private static func scan(_ files: NamespaceFiles, _ number: UInt64, from start: Int?,
                             _ body: (Change, Int) throws(StoreError) -> Bool) throws(StoreError) -> Bool {
        let path = files.segmentPath(number)
        let fd: Int32
        do { fd = try files.system.open(path, O_RDONLY) } catch {
            if error.rawValue == ENOENT { throw StoreError(.compacted, "log segment \(number) was compacted away while it was read") }
            throw StoreError.io("opening", path, error)
        }
        defer { SystemCalls.close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset = start ?? 0
        var first = start == nil
        while true {
            let count: Int
            do {
                count = try buffer.withMutableBytes { (raw) throws(Errno) -> Int in try files.system.pread(fd, raw, at: offset, path: path) }
            } catch {
                throw StoreError.io("reading", path, error)
            }
            let step = try buffer.withBytes { (raw) throws(StoreError) -> Step in
                let bytes = UnsafeRawBufferPointer(rebasing: raw[0..<count])
                var at = 0
                if first {
                    guard case .records(let from) = LogSegmentHeader.read(bytes) else { return .end }
                    at = from
                }
                while true {
                    switch LogRecordCodec.decode(bytes, at: at) {
                    case .record(let record, let next):
                        if try body(Change(sequence: record.sequence, mutations: record.mutations), offset + next) { return .stop }
                        at = next
                    case .incomplete:
                        // A record cut by the end of the read (read on from it), or the end of the file.
                        return count < buffer.count && at == count ? .end : .more(consumed: at)
                    case .invalidLength, .checksumMismatch, .malformed:
                        // The end of the records: zeros reserved ahead, or a torn tail past the
                        // changes asked for (those are whole: they were read back by recovery or written since).
                        return .end
                    }
                }
            }
            switch step {
            case .stop: return true
            case .end: return false
            case .more(let consumed):
                first = false
                if consumed == 0 {
                    // A record longer than the buffer (or the file ends inside one).
                    if count < buffer.count { return false }
                    buffer = [UInt8](repeating: 0, count: buffer.count * 2)
                }
                offset += consumed
            }
        }
    }

    private enum Step {
        case stop, end
        case more(consumed: Int)
    }
}
