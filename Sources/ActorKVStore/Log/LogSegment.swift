#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One open log segment file. The descriptor closes when the last reference goes away, so the
/// syncer can keep fsyncing a segment that the namespace has already rotated away from.
final class LogSegment: Sendable {
    /// The segment's number: segments replay in ascending order.
    let number: UInt64
    /// The file's path.
    let path: String
    /// The open descriptor (read-write).
    let fd: Int32
    /// The syscalls its writes and fsyncs go through: its store's.
    let system: SystemCalls

    init(number: UInt64, path: String, fd: Int32, system: SystemCalls) {
        self.number = number
        self.path = path
        self.fd = fd
        self.system = system
    }

    deinit { SystemCalls.close(fd) }
}

/// The file layout of one namespace's directory:
///
///     <data-dir>/<namespace>/snapshot.json        the last snapshot
///     <data-dir>/<namespace>/snapshot.json.tmp    a snapshot being written (removed on open)
///     <data-dir>/<namespace>/000001.log …         log segments, replayed in ascending order
///     <data-dir>/<namespace>/closed-cleanly       the last sequence at the last clean close (CleanCloseMarker)
struct NamespaceFiles: Sendable {
    /// The namespace's directory.
    let directory: String
    /// The syscalls its files are touched through: its store's.
    let system: SystemCalls

    var snapshotPath: String { directory + "/snapshot.json" }
    var temporarySnapshotPath: String { directory + "/snapshot.json.tmp" }

    func segmentPath(_ number: UInt64) -> String {
        let digits = String(number)
        return directory + "/" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits + ".log"
    }

    /// The most segments a namespace can go through (one per compaction): far more than any
    /// store will, and far from where `number + 1` would overflow.
    static let maximumSegmentNumber: UInt64 = 1 << 48

    /// The segment number a file name stands for, or nil if it is not one: digits and `.log`,
    /// written as this build writes them (at least six digits, no extra leading zeros), at most
    /// ``maximumSegmentNumber``. Any other name is not a segment and is left alone.
    static func segmentNumber(fileName name: String) -> UInt64? {
        guard name.hasSuffix(".log") else { return nil }
        let digits = name.dropLast(4)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              let number = UInt64(digits), number <= maximumSegmentNumber,
              NamespaceFiles(directory: "", system: .plain).segmentPath(number) == "/" + name else { return nil }
        return number
    }

    /// Creates (or opens, if an earlier attempt left it) segment `number`, writes its
    /// ``LogSegmentHeader``, and makes its directory entry durable. Its records start at
    /// ``LogSegmentHeader/length``.
    ///
    /// The header is not fsync'd here: it reaches the disk with the segment's first fsync, before
    /// any record in it is acknowledged as durable. A crash before that leaves an empty or all-zero
    /// file, or a torn header, which recovery reads as an empty segment (and cuts).
    ///
    /// If the header or the directory fsync fails, the new file is removed again (best effort):
    /// left behind, an empty segment after the one still being appended to would make a later
    /// torn tail of that one look like damage in a segment that is not the last.
    func createSegment(_ number: UInt64) throws(StoreError) -> LogSegment {
        let path = segmentPath(number)
        let fd: Int32
        do { fd = try system.open(path, O_RDWR | O_CREAT, mode: 0o600) } catch {
            throw StoreError.io("creating log segment", path, error)
        }
        let segment = LogSegment(number: number, path: path, fd: fd, system: system)
        do {
            try Self.writeHeader(to: segment)
            try system.fsyncDirectory(directory)
            return segment
        } catch {
            try? system.unlink(path)
            try? system.fsyncDirectory(directory)
            throw StoreError.io("creating log segment", path, error)
        }
    }

    /// Writes a ``LogSegmentHeader`` at the start of `segment`, which holds no records.
    static func writeHeader(to segment: LogSegment) throws(Errno) {
        try LogSegmentHeader.encoded.withBytes { (raw) throws(Errno) in
            try segment.system.pwriteAll(segment.fd, raw, at: 0, path: segment.path)
        }
    }

    /// Removes segments (the oldest ones, given oldest first) and makes the removal durable.
    ///
    /// Each removal is made durable before the next: a power loss may keep any subset of the
    /// unlinks not yet fsync'd, and keeping a later one without an earlier would leave a segment
    /// missing between two kept ones, which recovery refuses as a gap in the log's history.
    func removeSegments(_ numbers: [UInt64]) throws(StoreError) {
        for (index, number) in numbers.enumerated() {
            let path = segmentPath(number)
            do { try system.unlink(path) } catch { throw StoreError.io("removing", path, error) }
            if index == numbers.count - 1 { try system.failpoint("compaction.afterLogDrop") }
            do { try system.fsyncDirectory(directory) } catch { throw StoreError.io("fsync of directory", directory, error) }
        }
    }

    /// Reads a whole file through `system`.
    static func readAll(_ path: String, system: SystemCalls) throws(StoreError) -> [UInt8] {
        try FileWindow(path: path, capacity: .max, system: system).withBytes { Array($0) }
    }
}
