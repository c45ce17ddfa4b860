/// One change of a namespace: the mutations of one log record, numbered as the record is.
///
/// A change that the namespace publishes as it writes is read from its record as logged, in
/// one copy of its run's records that the changes of that run share: publishing a run costs one
/// copy of its bytes and an array of changes, not an array per change and per key and value
/// (which, while anyone followed a namespace, cost its writers a twentieth of their time).
/// A change made from mutations (read back from the log files, or from etcd) keeps those.
public struct Change: Sendable, Equatable {
    /// The record's sequence number: the version it gave the keys it wrote.
    public let sequence: UInt64
    /// About how many bytes it holds (keys and values, and a little for each), which the feed's
    /// lag bound counts.
    public let byteSize: Int
    /// Its mutations, when it was made from them (otherwise empty).
    private let decoded: [Mutation]
    /// Otherwise its record, framed as ``LogRecordCodec`` encodes it, at ``range`` of these
    /// (empty when it was made from mutations; a record is never empty).
    private let records: [UInt8]
    private let range: Range<Int>

    /// A change of `mutations` numbered `sequence`.
    public init(sequence: UInt64, mutations: [Mutation]) {
        self.sequence = sequence
        decoded = mutations
        records = []
        range = 0..<0
        byteSize = mutations.reduce(16) { total, mutation in
            switch mutation {
            case .put(let key, let value): total + key.count + value.count + 16
            case .delete(let key): total + key.count + 16
            case .lifetime: total
            }
        }
    }

    private init(sequence: UInt64, records: [UInt8], range: Range<Int>) {
        self.sequence = sequence
        decoded = []
        self.records = records
        self.range = range
        byteSize = range.count
    }

    /// The changes of `records`: whole records as ``LogRecordCodec`` encodes them, back to back
    /// (a run's, as it was just written to the log), each read from a copy of `records` that
    /// they share.
    static func changes(ofRecords records: [UInt8]) -> [Change] {
        let copy = records.withUnsafeBufferPointer { Array($0) }  // exactly as large as the records
        return copy.withUnsafeBytes { raw in
            var changes: [Change] = []
            var offset = 0
            while offset < raw.count {
                let bodyLength = Int(UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)))
                let end = offset + LogRecordCodec.headerLength + bodyLength
                precondition(bodyLength >= LogRecordCodec.minimumBodyLength && end <= raw.count, "Change: a record runs past its run's bytes")
                changes.append(Change(sequence: LogScanner.sequenceField(raw, at: offset)!, records: copy, range: offset..<end))
                offset = end
            }
            return changes
        }
    }

    /// What it did, in order.
    public var mutations: [Mutation] {
        guard !records.isEmpty else { return decoded }
        let found = records.withUnsafeBytes { LogRecordCodec.decode($0, at: range.lowerBound) }
        guard case .record(let record, _) = found else { preconditionFailure("Change: its record does not decode: \(found)") }
        return record.mutations
    }

    /// Calls `body`, in order, with each key it puts or deletes and the key's new value (nil
    /// for a delete); a lifetime, which changes no value, is passed over. The bytes are
    /// borrowed for the call: no array is made for them.
    public func forEachWrite(_ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer?) -> Void) {
        guard records.isEmpty else {
            return records.withUnsafeBytes { Self.forEachWrite(inRecord: UnsafeRawBufferPointer(rebasing: $0[range]), body) }
        }
        for mutation in decoded {
            switch mutation {
            case .put(let key, let value):
                key.withUnsafeBytes { key in value.withUnsafeBytes { body(key, $0) } }
            case .delete(let key):
                key.withUnsafeBytes { body($0, nil) }
            case .lifetime:
                continue
            }
        }
    }

    /// ``forEachWrite(_:)`` over one framed record (see ``LogRecordCodec``'s layout), which
    /// the namespace encoded itself: one that does not read back whole is a bug.
    private static func forEachWrite(inRecord record: UnsafeRawBufferPointer, _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer?) -> Void) {
        var reader = ByteReader(UnsafeRawBufferPointer(rebasing: record[LogRecordCodec.headerLength...]))
        do {
            try reader.skip(12)  // the sequence and durable lag
            for _ in 0..<Int(try reader.u32()) {
                let kind = try reader.u8()
                let key = try reader.borrowedLengthPrefixed()
                switch kind {
                case 1: body(key, try reader.borrowedLengthPrefixed())
                case 2: body(key, nil)
                case 3: try reader.skip(9)  // a deadline and flags
                default: preconditionFailure("Change: mutation kind \(kind) in a record it wrote")
                }
            }
            try reader.skipEndMark()
        } catch {
            preconditionFailure("Change: a record it wrote does not read back: \(error.reason)")
        }
    }

    /// Equal when they have the same number and the same mutations, however each is held.
    public static func == (lhs: Change, rhs: Change) -> Bool {
        lhs.sequence == rhs.sequence && lhs.mutations == rhs.mutations
    }
}
