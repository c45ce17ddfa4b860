/// Encodes and decodes log records. Pure: no I/O.
///
/// A segment is a ``LogSegmentHeader`` followed by records. The frame, all integers little-endian:
///
///     u32 bodyLength | u32 crc32c(bodyLength bytes + body) | body
///     body = u64 sequence | u32 durableLag | u32 mutationCount | mutation* | end mark
///     mutation = u8 kind (1 put, 2 delete, 3 lifetime) | u32 keyLength | key
///                | [u32 valueLength | value]     (put)
///                | [u64 deadline | u8 flags]    (lifetime: deadline in ms since the epoch, 0 none;
///                                                flags bit 0: ephemeral, the other bits 0;
///                                                with an empty key, the namespace's own deadline)
///     end mark = 0xA5, twice when once would make bodyLength a multiple of 256
///
/// The end mark (log format 2) makes sure that no whole record has a first or last byte of
/// zero: the torn-append rule (``LogScanner``) reads a share of a sector that is all zeros as a
/// part the disk never wrote, and a record that ended in zeros (a lifetime's flags, a binary
/// value) or began with one (a length that is a multiple of 256) had that shape even when whole,
/// so damage to it, when last, could not be told from an append cut short. Records of format 1,
/// without the mark, are read as before.
public enum LogRecordCodec {
    /// Bytes before the body.
    public static let headerLength = 8
    /// The smallest body: a sequence number, a durable lag and a zero count.
    public static let minimumBodyLength = 16
    /// The largest body accepted (1 GiB); a larger length field is corruption.
    public static let maximumBodyLength = 1 << 30

    /// What ``decode(_:at:)`` found at an offset.
    public enum Decoded: Equatable, Sendable {
        /// A whole, checksum-valid record and the offset just after it.
        case record(LogRecord, next: Int)
        /// The bytes end before the record does.
        case incomplete
        /// The length field is zero, too small or too large.
        case invalidLength(Int)
        /// The checksum does not match; `end` is where the record would end.
        case checksumMismatch(end: Int)
        /// The checksum matches but the body does not parse (a bug or deliberate tampering).
        case malformed(String)
    }

    /// The byte that ends every record this build writes (see the layout above).
    public static let endMark: UInt8 = 0xA5

    /// The body length the record of `mutations` encodes to (compare with ``maximumBodyLength``).
    public static func bodyLength<C: Collection<Mutation>>(of mutations: C) -> Int {
        marked(mutations.reduce(minimumBodyLength) { total, mutation in
            switch mutation {
            case .put(let key, let value): return total + putOverhead + key.count + value.count
            case .delete(let key): return total + 5 + key.count
            case .lifetime(let key, _): return total + lifetimeOverhead + key.count
            }
        })
    }

    /// The length of a body of `unmarked` bytes once its end mark is added: one byte, or two
    /// when one would make the length's first byte (the record's first) zero.
    static func marked(_ unmarked: Int) -> Int {
        (unmarked + 1) % 256 == 0 ? unmarked + 2 : unmarked + 1
    }

    /// Appends the encoding of `record` to `buffer`.
    public static func encode(_ record: LogRecord, into buffer: inout [UInt8]) {
        encode(sequence: record.sequence, mutations: record.mutations, durableThrough: record.durableThrough, into: &buffer)
    }

    /// Appends the encoding of the record of `mutations` with these numbers (as
    /// ``encode(_:into:)`` does for a ``LogRecord``) to `buffer`, from any collection: a single
    /// put needs no array of its own.
    public static func encode<C: Collection<Mutation>>(sequence: UInt64, mutations: C, durableThrough: UInt64, into buffer: inout [UInt8]) {
        let start = beginRecord(sequence: sequence, mutations: mutations.count, durableThrough: durableThrough, into: &buffer)
        for mutation in mutations {
            switch mutation {
            case .put(let key, let value): appendPut(key: key, value: value, to: &buffer)
            case .delete(let key):
                buffer.append(2)
                appendBytes(key, to: &buffer)
            case .lifetime(let key, let lifetime):
                buffer.append(3)
                appendBytes(key, to: &buffer)
                append(lifetime.deadline, to: &buffer)
                buffer.append(lifetime.isEphemeral ? 1 : 0)
            }
        }
        finishRecord(at: start, in: &buffer)
    }

    /// The bytes a put adds to a body besides its key and value: its tag and their two lengths.
    static let putOverhead = 9
    /// The bytes a lifetime adds besides its key: its tag, the key's length, deadline and flags.
    static let lifetimeOverhead = 14

    /// The body length of the record of one put of `key` and `value`.
    public static func putBodyLength(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>) -> Int {
        marked(minimumBodyLength + putOverhead + key.count + value.count)
    }

    /// Appends the record of one put, exactly as ``encode(sequence:mutations:durableThrough:into:)``
    /// encodes `[.put(key:value:)]`, from a key that need not be an array of its own.
    public static func encodePut(sequence: UInt64, key: ArraySlice<UInt8>, value: ArraySlice<UInt8>, durableThrough: UInt64, into buffer: inout [UInt8]) {
        let start = beginRecord(sequence: sequence, mutations: 1, durableThrough: durableThrough, into: &buffer)
        appendPut(key: key, value: value, to: &buffer)
        finishRecord(at: start, in: &buffer)
    }

    /// Appends a record's header (zeros for now) and the body's numbers; returns where it starts.
    private static func beginRecord(sequence: UInt64, mutations: Int, durableThrough: UInt64, into buffer: inout [UInt8]) -> Int {
        precondition(durableThrough < sequence || durableThrough == 0, "a record cannot be durable before it is written")
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: headerLength))
        append(sequence, to: &buffer)
        append(durableLag(sequence: sequence, durableThrough: durableThrough), to: &buffer)
        append(UInt32(mutations), to: &buffer)
        return start
    }

    private static func appendPut<Key: BorrowedBytes, Value: BorrowedBytes>(key: Key, value: Value, to buffer: inout [UInt8]) {
        buffer.append(1)
        appendBytes(key, to: &buffer)
        appendBytes(value, to: &buffer)
    }

    /// Ends the record that starts at `start` and whose mutations end at the end of `buffer`:
    /// appends its end mark and fills in its header, the body's length and the checksum.
    private static func finishRecord(at start: Int, in buffer: inout [UInt8]) {
        let unmarked = buffer.count - start - headerLength
        buffer.append(endMark)
        if marked(unmarked) - unmarked == 2 { buffer.append(endMark) }
        let bodyLength = UInt32(buffer.count - start - headerLength)
        buffer.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: bodyLength.littleEndian, toByteOffset: start, as: UInt32.self)
            let crcRange = UnsafeRawBufferPointer(rebasing: raw[start..<(start + 4)])
            let body = UnsafeRawBufferPointer(rebasing: raw[(start + headerLength)...])
            let crc = CRC32C.checksum(body, continuing: CRC32C.checksum(crcRange))
            raw.storeBytes(of: crc.littleEndian, toByteOffset: start + 4, as: UInt32.self)
        }
    }

    /// The encoding of one record.
    public static func encode(_ record: LogRecord) -> [UInt8] {
        var buffer: [UInt8] = []
        encode(record, into: &buffer)
        return buffer
    }

    /// Decodes the record starting at `offset` of `bytes`.
    public static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Decoded {
        guard bytes.count - offset >= headerLength else { return .incomplete }
        let length = Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
        guard length >= minimumBodyLength, length <= maximumBodyLength else { return .invalidLength(length) }
        let end = offset + headerLength + length
        guard end <= bytes.count else { return .incomplete }
        let stored = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
        let lengthBytes = UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + 4)])
        let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + headerLength)..<end])
        guard CRC32C.checksum(body, continuing: CRC32C.checksum(lengthBytes)) == stored else {
            return .checksumMismatch(end: end)
        }
        var reader = ByteReader(body)
        do {
            let record = try parseBody(&reader)
            return .record(record, next: end)
        } catch {
            return .malformed(error.reason)
        }
    }

    /// `sequence - durableThrough`, or 0 (no claim) when there is none or it does not fit.
    private static func durableLag(sequence: UInt64, durableThrough: UInt64) -> UInt32 {
        guard durableThrough > 0, durableThrough < sequence else { return 0 }
        return UInt32(exactly: sequence - durableThrough) ?? 0
    }

    private static func parseBody(_ reader: inout ByteReader) throws(ByteReader.Failure) -> LogRecord {
        let sequence = try reader.u64()
        let lag = UInt64(try reader.u32())
        guard lag <= sequence else { throw .init(reason: "durable lag \(lag) exceeds sequence \(sequence)") }
        let count = Int(try reader.u32())
        guard count <= reader.remaining else { throw .init(reason: "mutation count \(count) exceeds the record") }
        var mutations: [Mutation] = []
        mutations.reserveCapacity(count)
        for _ in 0..<count {
            switch try reader.u8() {
            case 1: mutations.append(.put(key: try reader.lengthPrefixed(), value: try reader.lengthPrefixed()))
            case 2: mutations.append(.delete(key: try reader.lengthPrefixed()))
            case 3:
                let key = try reader.lengthPrefixed()
                let deadline = try reader.u64()
                let flags = try reader.u8()
                guard flags <= 1 else { throw .init(reason: "unknown lifetime flags \(flags)") }
                mutations.append(.lifetime(key: key, Lifetime(deadline: deadline, owner: flags == 1 ? Lifetime.recoveredOwner : 0)))
            case let kind: throw .init(reason: "unknown mutation kind \(kind)")
            }
        }
        try reader.skipEndMark()
        return LogRecord(sequence: sequence, mutations: mutations, durableThrough: lag == 0 ? 0 : sequence - lag)
    }

    private static func append(_ value: UInt64, to buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    private static func append(_ value: UInt32, to buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    private static func appendBytes<Bytes: BorrowedBytes>(_ bytes: Bytes, to buffer: inout [UInt8]) {
        append(UInt32(bytes.count), to: &buffer)
        bytes.withUnsafeBytes { buffer.append(contentsOf: $0.assumingMemoryBound(to: UInt8.self)) }
    }
}
