/// Reads a log segment from disk a window at a time (a ``FileWindow``) and scans it with
/// ``LogScanner``, so that recovery holds about one window of a segment in memory however long
/// the log grew before a crash (a whole-file read of a 150 MB log also cost recovery a tenth of
/// its time in fresh pages the kernel had to zero).
///
/// The outcome is exactly that of ``LogScanner/scanSegment(_:after:_:)`` over the whole file: the
/// ``LogSegmentHeader`` is read first (the records are scanned from the position after it); every
/// window but the last ends at a record boundary; whatever stops a window short of the end of the
/// file (an incomplete record, damage, zeros) is looked at again in a window that starts there and
/// grows until it reaches the end of the file, and the scanner judges damage only by what follows
/// it, so its verdict comes from the same bytes it would have seen.
enum LogSegmentScanner {
    /// What a scan of a segment found.
    struct Outcome: Equatable {
        /// How the segment ends; offsets are file positions.
        var end: LogScanner.End
        /// Where the records start: after the ``LogSegmentHeader``, or 0 in a segment without one
        /// (format 0) or whose header alone decided how it ends.
        var recordsStart: Int
        /// How many bytes the file held (fewer than its size at first if it shrank while read).
        var fileSize: Int
        /// When the segment ends torn: the torn bytes up to the last nonzero one (zeros reserved
        /// after them are not counted). Otherwise 0.
        var tornBytes: Int
    }

    /// The bytes read at a time: large enough that a window's records dwarf the cost of a read.
    static let standardWindow = 8 << 20

    /// Scans the segment at `path`, read through `system`, calling `body` with each whole record
    /// and its file position. `previous` is the sequence number before the segment's first record,
    /// when known.
    static func scan(_ path: String, after previous: UInt64?, window size: Int = standardWindow, system: SystemCalls,
                     _ body: (LogRecord, _ offset: Int) throws(StoreError) -> Void) throws(StoreError) -> Outcome {
        let window = try FileWindow(path: path, capacity: size, system: system)
        if window.bytes.count < LogSegmentHeader.length && !window.reachesEnd {
            try window.grow(to: LogSegmentHeader.length)
        }
        switch window.withBytes(LogSegmentHeader.read) {
        case .ends(let end):
            return window.withBytes { outcome(end, windowStart: 0, recordsStart: 0, bytes: $0, fileSize: window.fileSize) }
        case .records(let from):
            try window.slide(droppingFirst: from)
        }
        let recordsStart = window.start
        var last = previous
        while true {
            let start = window.start
            let (end, length, final) = try window.withBytes { (bytes) throws(StoreError) in
                let end = try LogScanner.scan(bytes, after: last, base: start) { (record, offset) throws(StoreError) in
                    try body(record, start + offset)
                    last = record.sequence
                }
                let final = window.reachesEnd
                    ? outcome(end, windowStart: start, recordsStart: recordsStart, bytes: bytes, fileSize: window.fileSize) : nil
                return (end, bytes.count, final)
            }
            if let final { return final }
            let consumed = recordBytes(before: end, length: length)
            if consumed > 0 {
                try window.slide(droppingFirst: consumed)
            } else {
                // Not even one record: a record longer than the window, or damage; look further.
                try window.grow(to: 2 * window.capacity)
            }
        }
    }

    /// How many bytes at the start of a window are whole records, given how its scan ended.
    private static func recordBytes(before end: LogScanner.End, length: Int) -> Int {
        switch end {
        case .clean: length
        case .unused(let valid), .torn(let valid): valid
        case .corrupt(let offset, _): offset
        }
    }

    /// The final window's verdict in file positions.
    private static func outcome(_ end: LogScanner.End, windowStart start: Int, recordsStart: Int,
                                bytes: UnsafeRawBufferPointer, fileSize: Int) -> Outcome {
        var tornBytes = 0
        if case .torn(let valid) = end {
            let lastNonzero = bytes.lastIndex { $0 != 0 } ?? valid
            tornBytes = max(0, lastNonzero + 1 - valid)
        }
        return Outcome(end: end.shifted(by: start), recordsStart: recordsStart, fileSize: fileSize, tornBytes: tornBytes)
    }
}
