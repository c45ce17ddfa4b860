/// The first bytes of every log segment this build starts: a magic and the log's format version.
/// Pure: no I/O.
///
///     "AKVLOG" | u16 version (little-endian)      8 bytes, then the records
///
/// Without it, a segment written in some later format would be read as records of this one, and
/// a first record that does not decode, followed by nothing or by zeros, passes for a torn append
/// that recovery cuts off. With it, a version this build does not know makes the namespace refuse
/// to open, naming the file and the version, and the file is left as it is.
///
/// Segments started before the header existed (format 0: records from byte 0) stay readable.
/// They cannot be mistaken for a header: the magic's first four bytes, read as a record's length
/// field, are 1,280,723,777, more than ``LogRecordCodec/maximumBodyLength``.
///
/// Format 2 differs from format 1 only in its records' end mark (``LogRecordCodec``); this build
/// reads both, and the records it appends to a segment of either carry the mark. (A build that
/// knows only format 1 refuses a format-2 segment by its version, and one of format 1 to which
/// marked records were appended as malformed: neither is read wrong.)
public enum LogSegmentHeader {
    /// The bytes a segment starts with.
    public static let magic: [UInt8] = Array("AKVLOG".utf8)
    /// The format version this build writes (it reads this one, ``oldestReadVersion`` and those
    /// between, and headerless format-0 segments).
    public static let currentVersion: UInt16 = 2
    /// The oldest format with a header that this build reads.
    public static let oldestReadVersion: UInt16 = 1
    /// The header's length: where the records of a segment with a header start.
    public static let length = 8

    /// The header of a new segment.
    public static var encoded: [UInt8] {
        magic + [UInt8(truncatingIfNeeded: currentVersion), UInt8(truncatingIfNeeded: currentVersion >> 8)]
    }

    /// What the first bytes of a segment say about the rest.
    public enum Reading: Equatable, Sendable {
        /// Records start at this file position: ``length`` after a header, 0 without one.
        case records(from: Int)
        /// The header alone decides how the segment ends: torn at 0 (the bytes stop inside a
        /// header, as a crash while starting a segment leaves them), or corrupt (an unknown version).
        case ends(LogScanner.End)
    }

    /// Reads a segment's first bytes: at least ``length`` of them, unless the file is shorter.
    public static func read(_ bytes: UnsafeRawBufferPointer) -> Reading {
        let shared = min(bytes.count, magic.count)
        guard shared > 0, bytes.prefix(shared).elementsEqual(magic.prefix(shared)) else { return .records(from: 0) }
        guard bytes.count >= length else { return .ends(.torn(validLength: 0)) }
        let version = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: magic.count, as: UInt16.self))
        guard (oldestReadVersion...currentVersion).contains(version) else {
            return .ends(.corrupt(offset: magic.count, reason: "unknown log format version \(version) (this build reads versions \(oldestReadVersion) to \(currentVersion) and segments without a header)"))
        }
        return .records(from: length)
    }
}
