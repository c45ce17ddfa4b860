/// Walks the records of one log segment and classifies how it ends. Pure: no I/O.
///
/// The rules that tell a torn tail (what a crash mid-append leaves, safe to cut) from
/// corruption (refuse to open):
/// - fewer bytes left than the record needs: torn at that offset — unless a whole,
///   checksum-valid record with the next sequence number starts inside the span the length
///   claims: then the length field is damaged (an append writes a record's length with its
///   first bytes, so a genuine torn record can have nothing whole after it), and it is corrupt;
/// - a checksum mismatch on a record that ends exactly at the end of the file, or is followed
///   only by zeros (the file system's unfilled tail starts at a block, not a record, boundary):
///   torn; one with other bytes after it: corrupt;
/// - an impossible length field: torn if every byte from there on is zero (a tail the file
///   system extended but never filled), corrupt otherwise;
/// - a checksum-valid body that does not parse: corrupt.
///
/// Whether a torn tail is acceptable is the caller's call: only in the last segment.
public enum LogScanner {
    /// How a segment ends.
    public enum End: Equatable, Sendable {
        /// Every byte belongs to a whole record.
        case clean
        /// The records end at `validLength`; the bytes after it are a torn tail.
        case torn(validLength: Int)
        /// Unreadable bytes at `offset` that a crash cannot explain.
        case corrupt(offset: Int, reason: String)
    }

    /// Calls `body` for each whole record in order, then says how the bytes end. An error thrown by
    /// `body` stops the walk and is rethrown.
    public static func scan<E: Error>(_ bytes: UnsafeRawBufferPointer,
                                      _ body: (LogRecord, _ offset: Int) throws(E) -> Void) throws(E) -> End {
        var offset = 0
        var previous: UInt64?
        while offset < bytes.count {
            switch LogRecordCodec.decode(bytes, at: offset) {
            case .record(let record, let next):
                try body(record, offset)
                previous = record.sequence
                offset = next
            case .incomplete:
                if let (later, sequence) = wholeRecord(in: bytes, after: offset, previous: previous) {
                    return .corrupt(offset: offset, reason: "the record's length runs past the end of the file, yet a whole record (sequence \(sequence)) starts inside it at byte \(later): a damaged length field, not a torn append")
                }
                return .torn(validLength: offset)
            case .checksumMismatch(let end):
                if end == bytes.count || allZero(bytes, from: end) { return .torn(validLength: offset) }
                return .corrupt(offset: offset, reason: "checksum mismatch in a record followed by more data")
            case .invalidLength(let length):
                if allZero(bytes, from: offset) { return .torn(validLength: offset) }
                return .corrupt(offset: offset, reason: "impossible record length \(length)")
            case .malformed(let reason):
                return .corrupt(offset: offset, reason: "malformed record: \(reason)")
            }
        }
        return .clean
    }

    /// A checksum-valid record that starts after the header at `offset` and carries a sequence
    /// number that can follow the record at `offset`: the one in that record's own header plus
    /// one, or the previous record's plus two (in case the damage reached the header's sequence
    /// number too). Nil if there is none.
    ///
    /// Only positions holding an expected sequence number are decoded, so the walk is linear in
    /// the bytes after `offset` (at most one append's worth when the tail is really torn).
    static func wholeRecord(in bytes: UnsafeRawBufferPointer, after offset: Int, previous: UInt64?) -> (offset: Int, sequence: UInt64)? {
        let header = LogRecordCodec.headerLength
        var expected: [UInt64] = []
        if let previous { expected.append(previous &+ 2) }
        if bytes.count - offset >= header + 8 {
            expected.append(UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + header, as: UInt64.self)) &+ 1)
        }
        var candidate = offset + header
        while !expected.isEmpty && candidate + header + LogRecordCodec.minimumBodyLength <= bytes.count {
            let sequence = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: candidate + header, as: UInt64.self))
            if expected.contains(sequence), case .record = LogRecordCodec.decode(bytes, at: candidate) {
                return (candidate, sequence)
            }
            candidate += 1
        }
        return nil
    }

    private static func allZero(_ bytes: UnsafeRawBufferPointer, from offset: Int) -> Bool {
        bytes[offset...].allSatisfy { $0 == 0 }
    }
}
