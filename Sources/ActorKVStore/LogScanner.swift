/// Walks the records of one log segment and classifies how it ends. Pure: no I/O.
///
/// The rules that tell a torn tail (what a crash mid-append leaves, safe to cut) from
/// corruption (refuse to open):
/// - fewer bytes left than the record needs: torn at that offset;
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
        while offset < bytes.count {
            switch LogRecordCodec.decode(bytes, at: offset) {
            case .record(let record, let next):
                try body(record, offset)
                offset = next
            case .incomplete:
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

    private static func allZero(_ bytes: UnsafeRawBufferPointer, from offset: Int) -> Bool {
        bytes[offset...].allSatisfy { $0 == 0 }
    }
}
