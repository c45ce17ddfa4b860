/// Walks the records of one log segment and classifies how it ends. Pure: no I/O.
///
/// A crash can leave two kinds of damage that are safe to cut, because none of it was ever
/// fsync'd: an append cut short (`kill -9`, power loss mid-write), and, after a power loss, writes
/// that were never fsync'd and that the disk wrote back out of order: some 512-byte sectors hold
/// the new records, others still the zeros or the older, shorter contents they had before. Every
/// record says how far the log was fsync'd when it was written (``LogRecord/durableThrough``), so
/// damage that a later record proves was already durable is corruption, whatever its shape.
///
/// The rules, at the first record that does not decode (`firstLost` is the sequence number it
/// should have carried):
/// - only zeros from there to the end: the log ends there (``End/unused(validLength:)``): space
///   reserved ahead of the writer, or that the file system extended and never filled;
/// - a checksum mismatch on a record with data in every sector of it and at its end, or an
///   impossible length other than 0 not cut by a sector boundary into zeros: corrupt. Damage a
///   power loss leaves is zeros, a sector the disk never wrote; anything else (a flipped bit, a
///   sector torn into garbage) may have hit a record already fsync'd (the next append rewrote the
///   sector holding its end), and cutting it would lose an acknowledged write unseen;
/// - fewer bytes left than the record needs, with a sequence number in its header other than the
///   next one (or zeros): corrupt, for the same reason;
/// - a later whole record whose `durableThrough` reaches `firstLost`: corrupt;
/// - a checksum mismatch on a record that ends exactly at the end of the bytes, or is followed only
///   by zeros; or fewer bytes left than the record needs; either with no whole record with the
///   next sequence number inside the span the length claims: torn at that offset;
/// - otherwise, zeros running up to a 512-byte boundary between the damage and the next whole
///   record (a sector written back before the rest, or not at all): torn — the unsynced tail;
/// - otherwise (a flipped bit, a damaged length with whole records after it, an impossible
///   length followed by data): corrupt. A checksum-valid body that does not parse: corrupt.
///
/// The zeros these rules read as a sector never written are never the edge of a whole record of
/// log format 2: its first byte (its length's low byte) and last (its end mark) are never zero
/// (``LogRecordCodec/endMark``). Only a sector lying wholly inside a record (a value with 512 zero
/// bytes in a row) can be zeros in a whole record, and format 1's records could end in zeros.
///
/// Whether a torn tail is acceptable is the caller's call: only in the last segment.
public enum LogScanner {
    /// How a segment ends.
    public enum End: Equatable, Sendable {
        /// Every byte belongs to a whole record.
        case clean
        /// Every byte up to `validLength` belongs to a whole record, and every byte after it is zero.
        case unused(validLength: Int)
        /// The records end at `validLength`; the bytes after it are a torn tail.
        case torn(validLength: Int)
        /// Unreadable bytes at `offset` that a crash cannot explain.
        case corrupt(offset: Int, reason: String)

        /// The same ending with its positions moved `distance` bytes later (from positions in a
        /// part of a file to positions in the file).
        func shifted(by distance: Int) -> End {
            switch self {
            case .clean: .clean
            case .unused(let valid): .unused(validLength: distance + valid)
            case .torn(let valid): .torn(validLength: distance + valid)
            case .corrupt(let offset, let reason): .corrupt(offset: distance + offset, reason: reason)
            }
        }
    }

    /// The sector size the out-of-order writeback rule assumes (the smallest a disk writes).
    static let sectorSize = 512

    /// Calls `body` for each whole record in order, then says how the bytes end. `previous` is
    /// the sequence number before the segment's first record, when the caller knows it. An error
    /// thrown by `body` stops the walk and is rethrown.
    ///
    /// `base` is the position of `bytes` in the file (sector boundaries are file positions): the
    /// bytes may be the tail of a segment from a record boundary on. Offsets passed to `body` and
    /// returned stay relative to `bytes`; the byte positions quoted in a reason are file positions.
    public static func scan<E: Error>(_ bytes: UnsafeRawBufferPointer, after previous: UInt64? = nil, base: Int = 0,
                                      _ body: (LogRecord, _ offset: Int) throws(E) -> Void) throws(E) -> End {
        var offset = 0
        var last = previous
        while offset < bytes.count {
            let damage: Damage
            switch LogRecordCodec.decode(bytes, at: offset) {
            case .record(let record, let next):
                try body(record, offset)
                last = record.sequence
                offset = next
                continue
            case .incomplete:
                if allZero(bytes, from: offset) { return .unused(validLength: offset) }
                if let expected = last.map({ $0 &+ 1 }), let found = sequenceField(bytes, at: offset), found != expected, found != 0 {
                    // An append cut short starts with its own header: this one is damage (a
                    // sector torn into garbage where a record or a segment's header was).
                    return .corrupt(offset: offset, reason: "a record's length runs past the end of the file and its sequence number \(found) is not the next one (\(expected)): damage, not an append cut short")
                }
                guard let (later, sequence) = wholeRecord(in: bytes, after: offset, previous: last) else {
                    return .torn(validLength: offset)
                }
                damage = Damage(reason: "the record's length runs past the end of the file, yet a whole record (sequence \(sequence)) starts inside it at byte \(base + later): a damaged length field, not a torn append", tornIfAlone: false)
            case .checksumMismatch(let end):
                let endsAlone = end == bytes.count || allZero(bytes, from: end)
                if endsAlone, let (later, sequence) = wholeRecord(in: bytes, after: offset, previous: last, startingBefore: end) {
                    // A torn append's length is its own: no whole later record lies inside it.
                    damage = Damage(reason: "checksum mismatch in a record whose length covers a whole record (sequence \(sequence)) at byte \(base + later): a damaged length field, not a torn append", tornIfAlone: false)
                } else if !looksUnwritten(bytes, from: offset, to: end, base: base) {
                    // Every sector of it holds data: not a write the disk never made, but damage
                    // (a flipped bit, a sector torn into garbage), maybe to a record already fsync'd.
                    return .corrupt(offset: offset, reason: "checksum mismatch in a record with data in every sector of it")
                } else {
                    damage = Damage(reason: "checksum mismatch in a record followed by more data", tornIfAlone: endsAlone)
                }
            case .invalidLength(let length):
                if allZero(bytes, from: offset) { return .unused(validLength: offset) }
                if length != 0, !lengthCutBySector(bytes, at: offset, base: base) {
                    // Not zeros, nor a length whose last bytes a sector never written left zero: damage.
                    return .corrupt(offset: offset, reason: "impossible record length \(length)")
                }
                damage = Damage(reason: "impossible record length \(length)", tornIfAlone: false)
            case .malformed(let reason):
                return .corrupt(offset: offset, reason: "malformed record: \(reason)")
            }
            return judge(damage, in: bytes, at: offset, firstLost: (last ?? 0) &+ 1, base: base)
        }
        return .clean
    }

    /// Scans a whole segment file's bytes: its ``LogSegmentHeader`` (if it has one), then its
    /// records. Offsets passed to `body` and returned are positions in `bytes`.
    public static func scanSegment<E: Error>(_ bytes: UnsafeRawBufferPointer, after previous: UInt64? = nil,
                                             _ body: (LogRecord, _ offset: Int) throws(E) -> Void) throws(E) -> End {
        let start: Int
        switch LogSegmentHeader.read(bytes) {
        case .ends(let end): return end
        case .records(let from): start = from
        }
        let end = try scan(UnsafeRawBufferPointer(rebasing: bytes[start...]), after: previous, base: start) { (record, offset) throws(E) in
            try body(record, start + offset)
        }
        return end.shifted(by: start)
    }

    /// What is wrong with the first record that does not decode, before the records after it are looked at.
    private struct Damage {
        /// Why it is corrupt if nothing explains it.
        let reason: String
        /// Whether it is a torn append on its own (nothing but zeros after it).
        let tornIfAlone: Bool
    }

    private static func judge(_ damage: Damage, in bytes: UnsafeRawBufferPointer, at offset: Int, firstLost: UInt64, base: Int) -> End {
        let later = laterRecords(in: bytes, after: offset, firstLost: firstLost)
        if let proof = later.proof {
            return .corrupt(offset: offset, reason: "\(damage.reason); the record at byte \(base + proof.offset) (sequence \(proof.sequence)) was written after sequence \(firstLost) was fsync'd")
        }
        if damage.tornIfAlone || zerosToSectorEnd(in: bytes, from: offset, through: later.first ?? bytes.count, base: base) {
            return .torn(validLength: offset)
        }
        return .corrupt(offset: offset, reason: damage.reason)
    }

    /// The first whole record after `offset` that may follow the damage (sequence above
    /// `firstLost - 1`), and the first of them, if any, that claims `firstLost` was durable.
    ///
    /// Positions whose sequence field is out of range are skipped without decoding, and each
    /// record found is stepped over whole, so the walk is linear in the bytes after `offset`.
    static func laterRecords(in bytes: UnsafeRawBufferPointer, after offset: Int, firstLost: UInt64)
        -> (first: Int?, proof: (offset: Int, sequence: UInt64)?) {
        let header = LogRecordCodec.headerLength
        var first: Int?
        var candidate = offset + 1
        while candidate + header + LogRecordCodec.minimumBodyLength <= bytes.count {
            let sequence = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: candidate + header, as: UInt64.self))
            guard sequence >= firstLost, sequence - firstLost < 1 << 32,
                  case .record(let record, let next) = LogRecordCodec.decode(bytes, at: candidate) else {
                candidate += 1
                continue
            }
            if first == nil { first = candidate }
            if record.durableThrough >= firstLost { return (first, (candidate, record.sequence)) }
            candidate = next
        }
        return (first, nil)
    }

    /// Whether the record at `offset`, ending at `end` with nothing but zeros after it, shows a
    /// part the disk never wrote: the share of some 512-byte sector in it all zeros, or at least
    /// 16 zeros running to its end (and so on to the end of the file: an extension the file
    /// system never filled). A record failing its checksum for that reason is a torn append; one
    /// with data in every sector and at its end is damaged.
    static func looksUnwritten(_ bytes: UnsafeRawBufferPointer, from offset: Int, to end: Int, base: Int = 0) -> Bool {
        if end - offset >= 16, bytes[(end - 16)..<end].allSatisfy({ $0 == 0 }) { return true }
        var start = offset
        while start < end {
            let stop = min(end, ((base + start) / sectorSize + 1) * sectorSize - base)
            if bytes[start..<stop].allSatisfy({ $0 == 0 }) { return true }
            start = stop
        }
        return false
    }

    /// The sequence number in the header of the record at `offset`, if the bytes reach that far.
    static func sequenceField(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64? {
        let start = offset + LogRecordCodec.headerLength
        guard bytes.count - start >= 8 else { return nil }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt64.self))
    }

    /// Whether the length field at `offset` is cut by a sector boundary after which its bytes are
    /// zero: the first bytes of a length written, the rest in a sector the disk never wrote.
    static func lengthCutBySector(_ bytes: UnsafeRawBufferPointer, at offset: Int, base: Int = 0) -> Bool {
        let boundary = ((base + offset) / sectorSize + 1) * sectorSize - base
        let fieldEnd = min(offset + 4, bytes.count)
        return boundary < fieldEnd && bytes[boundary..<fieldEnd].allSatisfy { $0 == 0 }
    }

    /// Whether zeros run from somewhere after `offset` up to a sector boundary no later than
    /// `limit` (at least 16 of them, or all the bytes from `offset` to that boundary): the shape a
    /// sector leaves when the disk did not write its newest contents. `bytes` start at file position `base`.
    static func zerosToSectorEnd(in bytes: UnsafeRawBufferPointer, from offset: Int, through limit: Int, base: Int = 0) -> Bool {
        var boundary = ((base + offset) / sectorSize + 1) * sectorSize - base
        while boundary <= limit {
            let start = max(offset, boundary - 16)
            if bytes[start..<boundary].allSatisfy({ $0 == 0 }) { return true }
            boundary += sectorSize
        }
        return false
    }

    /// A checksum-valid record that starts after the header at `offset` and carries a sequence
    /// number that can follow the record at `offset`: the one in that record's own header plus
    /// one, or the previous record's plus two (in case the damage reached the header's sequence
    /// number too). Nil if there is none.
    ///
    /// Only positions holding an expected sequence number are decoded, so the walk is linear in
    /// the bytes after `offset` (at most one append's worth when the tail is really torn).
    /// With `startingBefore`, only records that start before that offset count (inside the span
    /// a damaged record's length claims).
    static func wholeRecord(in bytes: UnsafeRawBufferPointer, after offset: Int, previous: UInt64?,
                            startingBefore limit: Int = .max) -> (offset: Int, sequence: UInt64)? {
        let header = LogRecordCodec.headerLength
        var expected: [UInt64] = []
        if let previous { expected.append(previous &+ 2) }
        if let own = sequenceField(bytes, at: offset) { expected.append(own &+ 1) }
        var candidate = offset + header
        while !expected.isEmpty && candidate < limit && candidate + header + LogRecordCodec.minimumBodyLength <= bytes.count {
            let sequence = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: candidate + header, as: UInt64.self))
            if expected.contains(sequence), case .record = LogRecordCodec.decode(bytes, at: candidate) {
                return (candidate, sequence)
            }
            candidate += 1
        }
        return nil
    }

    /// Whether every byte from `offset` on is zero. Eight bytes at a time: this runs over the
    /// preallocated, never written tail of a segment each time a log is opened.
    static func allZero(_ bytes: UnsafeRawBufferPointer, from offset: Int) -> Bool {
        var position = offset
        while position + 8 <= bytes.count {
            if bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self) != 0 { return false }
            position += 8
        }
        while position < bytes.count {
            if bytes[position] != 0 { return false }
            position += 1
        }
        return true
    }
}
