#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads a log segment from disk a window at a time and scans it with ``LogScanner``, so that
/// recovery holds about one window of a segment in memory however long the log grew before a
/// crash (a whole-file read of a 150 MB log also cost recovery a tenth of its time in fresh
/// pages the kernel had to zero).
///
/// The outcome is exactly that of ``LogScanner/scan(_:after:base:_:)`` over the whole file: every
/// window but the last ends at a record boundary; whatever stops a window short of the end of the
/// file (an incomplete record, damage, zeros) is looked at again in a window that starts there and
/// grows until it reaches the end of the file, and the scanner judges damage only by what follows
/// it, so its verdict comes from the same bytes it would have seen.
enum LogSegmentScanner {
    /// What a scan of a segment found.
    struct Outcome: Equatable {
        /// How the segment ends; offsets are file positions.
        var end: LogScanner.End
        /// How many bytes the file held (fewer than its size at first if it shrank while read).
        var fileSize: Int
        /// When the segment ends torn: the torn bytes up to the last nonzero one (zeros reserved
        /// after them are not counted). Otherwise 0.
        var tornBytes: Int
    }

    /// The bytes read at a time: large enough that a window's records dwarf the cost of a read.
    static let standardWindow = 8 << 20

    /// Scans the segment at `path`, calling `body` with each whole record and its file position.
    /// `previous` is the sequence number before the segment's first record, when known.
    static func scan(_ path: String, after previous: UInt64?, window: Int = standardWindow,
                     _ body: (LogRecord, _ offset: Int) throws(StoreError) -> Void) throws(StoreError) -> Outcome {
        precondition(window > 0, "the window must hold at least one byte")
        let fd: Int32
        let size: Int
        do {
            fd = try SystemCalls.open(path, O_RDONLY)
            size = try SystemCalls.fileSize(fd)
        } catch {
            throw StoreError.io("reading", path, error)
        }
        defer { SystemCalls.close(fd) }
        var reader = Reader(fd: fd, path: path, size: size)
        var start = 0
        var length = min(window, size)
        var last = previous
        while true {
            try reader.load(at: start, count: length)
            length = min(length, reader.size - start)  // the file may have shrunk
            let reachesEnd = start + length >= reader.size
            let end = try reader.buffer.withBytes { (raw) throws(StoreError) in
                try LogScanner.scan(UnsafeRawBufferPointer(rebasing: raw[0..<length]), after: last, base: start) { (record, offset) throws(StoreError) in
                    try body(record, start + offset)
                    last = record.sequence
                }
            }
            if reachesEnd { return outcome(end, windowStart: start, bytes: reader.buffer[0..<length], fileSize: reader.size) }
            let consumed = recordBytes(before: end, length: length)
            if consumed > 0 {
                start += consumed
                length = min(window, reader.size - start)
            } else {
                // Not even one record: a record longer than the window, or damage; look further.
                length = min(2 * length, reader.size - start)
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
    private static func outcome(_ end: LogScanner.End, windowStart start: Int, bytes: ArraySlice<UInt8>, fileSize: Int) -> Outcome {
        switch end {
        case .clean:
            return Outcome(end: .clean, fileSize: fileSize, tornBytes: 0)
        case .unused(let valid):
            return Outcome(end: .unused(validLength: start + valid), fileSize: fileSize, tornBytes: 0)
        case .torn(let valid):
            let lastNonzero = bytes.lastIndex { $0 != 0 } ?? valid
            return Outcome(end: .torn(validLength: start + valid), fileSize: fileSize, tornBytes: max(0, lastNonzero + 1 - valid))
        case .corrupt(let offset, let reason):
            return Outcome(end: .corrupt(offset: start + offset, reason: reason), fileSize: fileSize, tornBytes: 0)
        }
    }

    /// One open segment and a buffer reused across windows.
    private struct Reader {
        let fd: Int32
        let path: String
        /// The file's size; lowered if a read finds the end sooner.
        var size: Int
        var buffer: [UInt8] = []

        init(fd: Int32, path: String, size: Int) {
            self.fd = fd
            self.path = path
            self.size = size
        }

        /// Reads `count` bytes at `offset` into the start of `buffer` (fewer at the end of the file).
        mutating func load(at offset: Int, count: Int) throws(StoreError) {
            if buffer.count < count { buffer = [UInt8](repeating: 0, count: count) }
            var done = 0
            while done < count {
                let (fd, path) = (fd, path)
                let n: Int
                do {
                    n = try buffer.withMutableBytes { (raw) throws(Errno) in
                        try SystemCalls.pread(fd, UnsafeMutableRawBufferPointer(rebasing: raw[done..<count]), at: offset + done, path: path)
                    }
                } catch {
                    throw StoreError.io("reading", path, error)
                }
                if n == 0 {
                    size = offset + done
                    return
                }
                done += n
            }
        }
    }
}
