import ActorKVStore
import ActorKVTestSupport
import Testing

@Suite("Log record codec and scanner")
struct LogCodecTests {
    /// Records exercising every mutation kind and awkward bytes.
    static let samples: [LogRecord] = [
        LogRecord(sequence: 1, mutations: [.put(key: b("plain"), value: b("value"))]),
        LogRecord(sequence: 2, mutations: [.put(key: [0x00], value: [0x00, 0xFF, 0x0D, 0x0A, 0x00])]),
        LogRecord(sequence: 3, mutations: [.put(key: [0xC0, 0x80, 0xFF, 0xFE], value: [])]),  // invalid UTF-8, empty value
        LogRecord(sequence: 4, mutations: [.delete(key: b("plain")), .delete(key: [0xFF]), .delete(key: b("\r\n"))]),
        LogRecord(sequence: 5, mutations: [
            .put(key: b("batch:1"), value: b("x")), .delete(key: [0x00]),
            .put(key: [UInt8](repeating: 0xAB, count: 300), value: [UInt8](repeating: 0, count: 1000)),
        ]),
        LogRecord(sequence: UInt64.max, mutations: [.put(key: b("é😀"), value: b("\u{0}\"\\"))]),
    ]

    static func decode(_ bytes: [UInt8], at offset: Int = 0) -> LogRecordCodec.Decoded {
        bytes.withUnsafeBytes { LogRecordCodec.decode($0, at: offset) }
    }

    static func scan(_ bytes: [UInt8]) -> LogScanner.End { records(in: bytes).end }

    @Test("records round-trip one by one and as a stream, with their offsets")
    func roundTrip() throws {
        var stream: [UInt8] = []
        var offsets: [Int] = []
        for record in Self.samples {
            let encoded = LogRecordCodec.encode(record)
            #expect(Self.decode(encoded) == .record(record, next: encoded.count))
            offsets.append(stream.count)
            LogRecordCodec.encode(record, into: &stream)
        }
        let (found, end) = records(in: stream)
        #expect(end == .clean)
        #expect(found.map(\.record) == Self.samples)
        #expect(found.map(\.offset) == offsets)
    }

    @Test("bodyLength(of:) predicts the encoded body length")
    func bodyLengthPrediction() {
        for record in Self.samples + [LogRecord(sequence: 9, mutations: [])] {
            #expect(LogRecordCodec.bodyLength(of: record.mutations) == LogRecordCodec.encode(record).count - LogRecordCodec.headerLength)
        }
    }

    @Test("a record encodes the same from any collection of its mutations (as the namespace writes a put or a delete)")
    func encodeFromAnyCollection() {
        for record in Self.samples {
            let expected = LogRecordCodec.encode(record)
            var lazy: [UInt8] = [1, 2, 3]
            LogRecordCodec.encode(sequence: record.sequence, mutations: record.mutations.lazy.map { $0 },
                                  durableThrough: record.durableThrough, into: &lazy)
            #expect(lazy == [1, 2, 3] + expected)
            #expect(LogRecordCodec.bodyLength(of: record.mutations.lazy.map { $0 }) == expected.count - LogRecordCodec.headerLength)
            if record.mutations.count == 1 {
                var one: [UInt8] = []
                LogRecordCodec.encode(sequence: record.sequence, mutations: CollectionOfOne(record.mutations[0]),
                                      durableThrough: record.durableThrough, into: &one)
                #expect(one == expected)
            }
        }
        #expect(Self.samples.contains { $0.mutations.count == 1 } && Self.samples.contains { $0.mutations.count > 1 })
    }

    @Test("a put from a key slice (as a server passes a request's key) encodes as the same put from an array")
    func encodePutFromSlice() {
        var puts = 0
        for record in Self.samples where record.mutations.count == 1 {
            guard case .put(let key, let value) = record.mutations[0] else { continue }
            puts += 1
            let expected = LogRecordCodec.encode(record)
            // The key in the middle of a larger buffer: its indices do not start at zero.
            let buffer: [UInt8] = [0xEE, 0xEE, 0xEE] + key + [0xDD]
            let slice = buffer[3..<(3 + key.count)]
            var encoded: [UInt8] = [1, 2]
            LogRecordCodec.encodePut(sequence: record.sequence, key: slice, value: value[...],
                                     durableThrough: record.durableThrough, into: &encoded)
            #expect(encoded == [1, 2] + expected)
            #expect(LogRecordCodec.putBodyLength(key: slice, value: value[...]) == expected.count - LogRecordCodec.headerLength)
            #expect(Self.decode(encoded, at: 2) == .record(record, next: 2 + expected.count))
        }
        #expect(puts > 1)
    }

    @Test("the frame is the documented one: length, CRC-32C over length and body, body ending with the end mark")
    func frameLayout() {
        let record = LogRecord(sequence: 0x0102, mutations: [.put(key: [7], value: [8, 9])])
        let e = LogRecordCodec.encode(record)
        let length = Int(e[0]) | Int(e[1]) << 8 | Int(e[2]) << 16 | Int(e[3]) << 24
        #expect(length == e.count - 8)
        // body: u64 sequence, u32 durable lag (0: no claim), u32 count, kind 1, u32 keyLen, key, u32 valueLen, value, end mark
        #expect(Array(e[8...]) == [0x02, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 7, 2, 0, 0, 0, 8, 9, 0xA5])
        let crc = UInt32(e[4]) | UInt32(e[5]) << 8 | UInt32(e[6]) << 16 | UInt32(e[7]) << 24
        #expect(crc == CRC32C.checksum(Array(e[8...]), continuing: CRC32C.checksum(Array(e[0..<4]))))
        // A claim is stored as the distance back from the record's own sequence number.
        let claiming = LogRecord(sequence: 0x0102, mutations: [.put(key: [7], value: [8, 9])], durableThrough: 0x00F0)
        let c = LogRecordCodec.encode(claiming)
        #expect(Array(c[16..<20]) == [0x12, 0, 0, 0])
        #expect(Self.decode(c) == .record(claiming, next: c.count))
        // A claim further back than a u32 reaches is dropped (0), never made larger.
        let far = LogRecord(sequence: 1 << 40, mutations: [], durableThrough: 1)
        #expect(Self.decode(LogRecordCodec.encode(far)) == .record(LogRecord(sequence: 1 << 40, mutations: []), next: 25))
    }

    @Test("a record cut at every byte boundary is incomplete, and the scanner calls it torn at its start")
    func truncationAtEveryBoundary() {
        var prefix: [UInt8] = []
        for record in Self.samples.prefix(3) { LogRecordCodec.encode(record, into: &prefix) }
        for sample in Self.samples {
            // As the next record (4) it is an append cut short; with another sequence number in
            // its header, once the cut leaves that, it is damage (garbage where a record began).
            let record = LogRecord(sequence: 4, mutations: sample.mutations)
            let encoded = LogRecordCodec.encode(record)
            let stray = LogRecordCodec.encode(LogRecord(sequence: 9, mutations: sample.mutations))
            for cut in 0..<encoded.count {
                let partial = Array(encoded[..<cut])
                #expect(Self.decode(partial) == .incomplete, "record \(sample.sequence) cut at \(cut)")
                let end = Self.scan(prefix + partial)
                #expect(end == (cut == 0 ? .clean : .torn(validLength: prefix.count)),
                        "record \(sample.sequence) cut at \(cut): \(end)")
                #expect(records(in: prefix + partial).records.count == 3)
                let strayEnd = Self.scan(prefix + Array(stray[..<cut]))
                if cut >= 16 {
                    guard case .corrupt(let offset, _) = strayEnd, offset == prefix.count else {
                        Issue.record("record \(sample.sequence) numbered 9, cut at \(cut): \(strayEnd)"); continue
                    }
                } else {
                    #expect(strayEnd == (cut == 0 ? .clean : .torn(validLength: prefix.count)))
                }
            }
        }
    }

    @Test("every flipped bit of a record is detected, never read as another record")
    func bitFlipsAreDetected() {
        for record in Self.samples.prefix(5) {
            let encoded = LogRecordCodec.encode(record)
            for position in 0..<encoded.count {
                for bit in 0..<8 {
                    var damaged = encoded
                    damaged[position] ^= 1 << bit
                    switch Self.decode(damaged) {
                    case .checksumMismatch, .invalidLength, .incomplete: break
                    case let other:
                        Issue.record("record \(record.sequence), byte \(position) bit \(bit): decoded as \(other)")
                    }
                }
            }
        }
    }

    @Test("a damaged record followed by a valid one is corrupt, at the damaged record's offset")
    func corruptionBeforeValidData() {
        let first = LogRecordCodec.encode(Self.samples[0])
        // The middle record holds 1000 zero bytes: a flipped bit next to them looks like a sector
        // the disk did not write, so what makes it corrupt is the last record's claim that the
        // middle one was already fsync'd. The second middle record has no zero runs: a flipped bit
        // in it is corrupt even with no claim after it.
        let zeroHeavy = LogRecordCodec.encode(LogRecord(sequence: 2, mutations: Self.samples[4].mutations))
        let plain = LogRecordCodec.encode(LogRecord(sequence: 2, mutations: [.put(key: b("plain"), value: [UInt8](repeating: 0x5A, count: 1200))]))
        let proving = LogRecordCodec.encode(LogRecord(sequence: 3, mutations: Self.samples[1].mutations, durableThrough: 2))
        let silent = LogRecordCodec.encode(LogRecord(sequence: 3, mutations: Self.samples[1].mutations))
        for (middle, last) in [(zeroHeavy, proving), (plain, silent), (plain, proving)] {
            // Damage any byte of the middle record's CRC or body: always corrupt.
            for position in 4..<middle.count {
                var damaged = middle
                damaged[position] ^= 0x10
                let end = Self.scan(first + damaged + last)
                guard case .corrupt(let offset, _) = end else {
                    Issue.record("byte \(position): expected corrupt, got \(end)")
                    continue
                }
                #expect(offset == first.count)
            }
        }
        // Damage to the length field, wherever the claimed length ends: corrupt, because a
        // whole record with the next sequence number follows (see the next test).
        for (middle, next) in [(plain, silent), (zeroHeavy, proving)] {
            for position in 0..<4 {
                for bit in 0..<8 {
                    var damaged = middle
                    damaged[position] ^= 1 << bit
                    let (found, end) = records(in: first + damaged + next)
                    #expect(found.count == 1, "length byte \(position) bit \(bit)")
                    guard case .corrupt(let offset, _) = end else {
                        Issue.record("length byte \(position) bit \(bit): expected corrupt, got \(end)")
                        continue
                    }
                    #expect(offset == first.count)
                }
            }
        }
    }

    @Test("a length that runs past the end is torn only when no whole next record lies inside it")
    func lengthPastTheEnd() {
        let sequenceOf = { (i: UInt64) in LogRecord(sequence: i, mutations: [.put(key: b("k\(i)"), value: b("value \(i)"))]) }
        let a = LogRecordCodec.encode(sequenceOf(7)), b1 = LogRecordCodec.encode(sequenceOf(8)), c = LogRecordCodec.encode(sequenceOf(9))
        var stretched = b1
        stretched[1] ^= 0x40  // record 8 now claims 16 KiB more than it has
        // Record 9 follows: the length is damaged, whether record 8 is the segment's first or not.
        for prefix in [a, []] {
            let end = Self.scan(prefix + stretched + c)
            guard case .corrupt(let offset, let reason) = end else { Issue.record("expected corrupt, got \(end)"); continue }
            #expect(offset == prefix.count)
            #expect(reason.contains("sequence 9"))
        }
        // Nothing whole after it (a crash cut the append): torn, as before.
        #expect(Self.scan(a + stretched) == .torn(validLength: a.count))
        #expect(Self.scan(a + stretched + Array(c.dropLast())) == .torn(validLength: a.count))
        // A whole record with another sequence number inside the span does not count.
        let unrelated = LogRecordCodec.encode(sequenceOf(42))
        #expect(Self.scan(a + stretched + unrelated) == .torn(validLength: a.count))
    }

    @Test("a length damaged to end exactly at the end of the file, or in zeros, over a whole next record is corrupt, not torn")
    func lengthEndingAtTheEndOverARecord() {
        let sequenceOf = { (i: UInt64) in LogRecord(sequence: i, mutations: [.put(key: b("k\(i)"), value: b("value \(i)"))]) }
        let a = LogRecordCodec.encode(sequenceOf(7)), b1 = LogRecordCodec.encode(sequenceOf(8)), c = LogRecordCodec.encode(sequenceOf(9))
        /// Record 8 with its length field grown by `extra` bytes (the checksum no longer matches).
        func grown(_ extra: Int) -> [UInt8] {
            var record = b1
            let length = Int(record[0]) | Int(record[1]) << 8 | Int(record[2]) << 16 | Int(record[3]) << 24
            withUnsafeBytes(of: UInt32(length + extra).littleEndian) { for i in 0..<4 { record[i] = $0[i] } }
            return record
        }
        // The span now ends exactly where record 9 ends: the end of the file.
        let atEnd = Self.scan(a + grown(c.count) + c)
        guard case .corrupt(let offset, let reason) = atEnd else { Issue.record("expected corrupt, got \(atEnd)"); return }
        #expect(offset == a.count)
        #expect(reason.contains("sequence 9") && reason.contains("damaged length"), "\(reason)")
        // Or in zeros after it (space reserved ahead under always).
        let zeros = [UInt8](repeating: 0, count: 64)
        guard case .corrupt = Self.scan(a + grown(c.count + 10) + c + zeros) else { Issue.record("expected corrupt in zeros"); return }
        // A record that fails its checksum at the end with nothing whole inside it stays torn
        // when a sector of it was never written (zeros)...
        // (record 8 with a value long enough to span sectors, its sectors after the first unwritten)...
        let long = LogRecordCodec.encode(LogRecord(sequence: 8, mutations: [.put(key: b("k8"), value: [UInt8](repeating: 0x76, count: 1200))]))
        var unwritten = long
        for i in (512 - a.count)..<unwritten.count { unwritten[i] = 0 }
        #expect(Self.scan(a + unwritten) == .torn(validLength: a.count))
        #expect(Self.scan(a + unwritten + zeros) == .torn(validLength: a.count))
        // ... and is damage when every sector holds data (see lastRecordTornIntoGarbage).
        var damaged = long
        damaged[damaged.count - 1] ^= 1
        guard case .corrupt = Self.scan(a + damaged), case .corrupt = Self.scan(a + damaged + zeros) else {
            Issue.record("a flipped bit in the last record was not corrupt"); return
        }
    }

    /// `body` framed as a record: its length and checksum in front, whatever it holds.
    static func frame(_ body: [UInt8]) -> [UInt8] {
        let n = UInt32(body.count)
        let lengthBytes: [UInt8] = [UInt8(n & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n >> 16 & 0xFF), UInt8(n >> 24)]
        let crc = CRC32C.checksum(body, continuing: CRC32C.checksum(lengthBytes))
        return lengthBytes + [UInt8(crc & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 24)] + body
    }

    @Test("a checksum-valid body that does not parse is corrupt (malformed)")
    func malformedBody() {
        let seq: [UInt8] = [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]  // sequence 1, no durable claim
        let bodies: [[UInt8]] = [
            [1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0] + [0, 0, 0, 0],                // a durable lag past the sequence
            seq + [1, 0, 0, 0] + [9, 1, 0, 0, 0, 0x41],                         // unknown mutation kind
            seq + [1, 0, 0, 0] + [2, 0xFF, 0, 0, 0, 0x41],                      // key length past the body
            seq + [0, 0, 0, 0] + [0xAA],                                        // stray bytes
            seq + [200, 0, 0, 0],                                               // count larger than the body
        ]
        let valid = LogRecordCodec.encode(Self.samples[0])
        for body in bodies {
            let framed = Self.frame(body)
            guard case .malformed = Self.decode(framed) else {
                Issue.record("expected malformed for body \(body), got \(Self.decode(framed))")
                continue
            }
            guard case .corrupt(let offset, let reason) = Self.scan(valid + framed) else {
                Issue.record("expected corrupt")
                continue
            }
            #expect(offset == valid.count)
            #expect(reason.contains("malformed"))
        }
    }

    @Test("a zero-filled tail is unused space; a nonzero tail with an impossible length is corrupt")
    func tails() {
        var log: [UInt8] = []
        for record in Self.samples.prefix(3) { LogRecordCodec.encode(record, into: &log) }
        for zeros in [1, 5, 8, 12, 4096] {
            #expect(Self.scan(log + [UInt8](repeating: 0, count: zeros)) == .unused(validLength: log.count), "zeros \(zeros)")
        }
        // Length 0xFFFFFFFF (> 1 GiB) followed by garbage.
        guard case .corrupt(let offset, let reason) = Self.scan(log + [UInt8](repeating: 0xFF, count: 40)) else {
            Issue.record("garbage tail was not corrupt"); return
        }
        #expect(offset == log.count)
        #expect(reason.contains("length"))
        // Length 3 (< the smallest body) with nonzero bytes after it.
        guard case .corrupt = Self.scan(log + [3, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]) else {
            Issue.record("too-small length was not corrupt"); return
        }
        // Zeros, then something nonzero: not a file-system extended tail, so corrupt.
        guard case .corrupt = Self.scan(log + [UInt8](repeating: 0, count: 16) + [1]) else {
            Issue.record("zeros followed by data was not corrupt"); return
        }
        // A damaged last record that ends exactly at the end of the bytes counts as torn when the
        // damage is a sector's worth of zeros (never written), and is corrupt when it is a flipped bit.
        var damagedLast = LogRecordCodec.encode(Self.samples[4])
        for i in 20..<damagedLast.count { damagedLast[i] = 0 }
        #expect(Self.scan(log + damagedLast) == .torn(validLength: log.count))
        // (Not sample 5: its value is 1000 zeros, a whole sector's worth, which reads as unwritten.)
        var flippedLast = LogRecordCodec.encode(LogRecord(sequence: 4, mutations: [.put(key: b("k"), value: [UInt8](repeating: 0x41, count: 900))]))
        flippedLast[20] ^= 1
        guard case .corrupt(let flippedAt, _) = Self.scan(log + flippedLast), flippedAt == log.count else {
            Issue.record("a flipped bit in the last record was not corrupt at its start"); return
        }
        // A file-system-extended tail whose zeros start inside a record (block, not record,
        // boundary): the header survived, the rest of that record and everything after is zero.
        var lastWrite: [UInt8] = []
        var starts: [Int] = []
        for record in Self.samples.suffix(3) {
            starts.append(lastWrite.count)
            LogRecordCodec.encode(record, into: &lastWrite)
        }
        for (start, zeroFrom) in starts.flatMap({ s in [(s, s + 8), (s, s + 9), (s, s + 20)] }) + [(starts[1], starts[1] + 100)] {
            var unfilled = lastWrite
            for i in zeroFrom..<unfilled.count { unfilled[i] = 0 }
            #expect(Self.scan(log + unfilled) == .torn(validLength: log.count + start), "zeros from \(zeroFrom)")
            // Then a stray nonzero byte: what is left of a record whose first sectors were not
            // written when the zeros reach a sector boundary, corrupt when they do not.
            let whole = log + unfilled + [1]
            let reachesSector = stride(from: 512, through: whole.count, by: 512).contains { boundary in
                boundary > log.count + start && whole[max(log.count + start, boundary - 16)..<boundary].allSatisfy { $0 == 0 }
            }
            let end = Self.scan(log + unfilled + [1])
            if reachesSector {
                #expect(end == .torn(validLength: log.count + start), "zeros from \(zeroFrom) then data: \(end)")
            } else {
                guard case .corrupt = end else { Issue.record("zeros from \(zeroFrom) then data: expected corrupt, got \(end)"); continue }
            }
        }
    }

    /// The log of a power loss under `always` on a reserved (zero-filled) segment: the records
    /// before the loss, then `lost` sectors of zeros where the disk never wrote the newest
    /// records, then a sector it did write (the records written after), which claim `claim` durable.
    static func writebackHole(lostSectors: Int, claim: UInt64) -> (bytes: [UInt8], holeAt: Int) {
        var bytes: [UInt8] = []
        var sequence: UInt64 = 0
        func append(durable: UInt64) {
            sequence += 1
            LogRecordCodec.encode(LogRecord(sequence: sequence, mutations: [.put(key: b("k\(sequence)"), value: b(String(repeating: "v", count: 90)))], durableThrough: durable), into: &bytes)
        }
        while bytes.count < 1500 { append(durable: sequence) }  // each fsync'd before the next
        let holeAt = bytes.count
        let firstLost = sequence + 1
        while bytes.count < 4096 { append(durable: firstLost - 1) }
        for i in (holeAt / 512 + 1) * 512 ..< min(bytes.count, ((holeAt / 512 + 1) + lostSectors) * 512) { bytes[i] = 0 }
        for i in holeAt ..< (holeAt / 512 + 1) * 512 { bytes[i] = 0 }  // the hole starts mid-sector
        append(durable: claim)
        append(durable: claim)
        bytes += [UInt8](repeating: 0, count: 1024)  // reserved space after
        return (bytes, holeAt)
    }

    @Test("a last record whose sector was torn into garbage is corrupt, not cut: it may have been fsync'd")
    func lastRecordTornIntoGarbage() {
        // Found by PowerLossTests (garbage sectors): record 2 was fsync'd; the next append, never
        // fsync'd, rewrote the sector holding record 2's end, and power failed mid-write. The file
        // kept its fsync'd size, so record 2 was last, its checksum failing: the scanner cut it as
        // a torn append, losing an acknowledged write without a word.
        var log = LogRecordCodec.encode(LogRecord(sequence: 1, mutations: [.put(key: b("k1"), value: b("one"))]))
        let start = log.count
        log += LogRecordCodec.encode(LogRecord(sequence: 2, mutations: [.put(key: b("k5"), value: [UInt8](repeating: 0x66, count: 700))]))
        var random = SeededGenerator(seed: 22)
        for i in 512..<log.count { log[i] = UInt8.random(in: 1...255, using: &random) }
        guard case .corrupt(let offset, let reason) = Self.scan(log) else { Issue.record("garbage in the last record was cut"); return }
        #expect(offset == start)
        #expect(reason.contains("every sector"), "\(reason)")
        // The same sector never written back (zeros) is the unsynced tail of a torn append: cut.
        for i in 512..<log.count { log[i] = 0 }
        #expect(Self.scan(log) == .torn(validLength: start))
    }

    /// `record` as log format 1 wrote it: without the end mark.
    static func formatOne(_ record: LogRecord) -> [UInt8] {
        var body = Array(LogRecordCodec.encode(record).dropFirst(LogRecordCodec.headerLength))
        while body.last == LogRecordCodec.endMark { body.removeLast() }
        return frame(body)
    }

    @Test("format 1: a last record whose share of a sector is zeros even when whole reads, damaged, as a torn append; format 2's end mark makes the same damage corrupt")
    func lastRecordShapedLikeATornAppend() {
        // Found by the soak's power-loss run (seed 806076): a record that ends with a lifetime
        // (its flags byte 0) one byte into a new sector. In format 1, that sector's share of the
        // whole record is one zero byte, just what the disk leaves when it never wrote the
        // sector; damaged anywhere else, it had the exact shape of a torn append and was cut
        // (unless a later record said it was fsync'd). RELIABILITY.md, "What recovery cannot
        // tell apart".
        let first = LogRecordCodec.encode(LogRecord(sequence: 1, mutations: [.put(key: b("k1"), value: b("one"))]))
        func second(_ size: Int) -> LogRecord {
            LogRecord(sequence: 2, mutations: [
                .put(key: b("k2"), value: [UInt8](repeating: 0x61, count: size)),
                .lifetime(key: b("k2"), Lifetime(deadline: 1_800_000_000_000, owner: 0)),
            ], durableThrough: 1)
        }
        let size = (1...512).first { (first.count + Self.formatOne(second($0)).count) % 512 == 1 }!
        var log = first + Self.formatOne(second(size))
        #expect(log.last == 0 && log.count % 512 == 1, "the record's share of its last sector is one zero byte")
        #expect(Self.scan(log) == .clean)
        log[first.count + LogRecordCodec.headerLength + 40] ^= 0x08
        #expect(Self.scan(log) == .torn(validLength: first.count), "format 1: indistinguishable from an append the disk did not finish")
        // A record after it that says it was fsync'd makes the same damage corrupt.
        let third = LogRecordCodec.encode(LogRecord(sequence: 3, mutations: [.delete(key: b("k1"))], durableThrough: 2))
        guard case .corrupt(let offset, _) = Self.scan(log + third) else { Issue.record("damage before a durable claim was cut"); return }
        #expect(offset == first.count)

        // Format 2: the same record placed the same way now ends with its mark, in that sector.
        let markedSize = (1...512).first { (first.count + LogRecordCodec.encode(second($0)).count) % 512 == 1 }!
        var marked = first + LogRecordCodec.encode(second(markedSize))
        #expect(marked.last == LogRecordCodec.endMark && marked.count % 512 == 1)
        #expect(Self.scan(marked) == .clean)
        marked[first.count + LogRecordCodec.headerLength + 40] ^= 0x08
        guard case .corrupt(let at, let reason) = Self.scan(marked) else { Issue.record("format 2: damage to the last record was cut"); return }
        #expect(at == first.count && reason.contains("every sector"), "\(reason)")
        // Never written back, that sector is zeros again: a torn append, cut.
        marked[first.count + LogRecordCodec.headerLength + 40] ^= 0x08
        marked[marked.count - 1] = 0
        #expect(Self.scan(marked) == .torn(validLength: first.count))
    }

    @Test("the end mark: one byte, or two when one would make the length's first byte zero; no whole record starts or ends with a zero byte")
    func endMark() {
        for size in 0..<600 {
            let record = LogRecord(sequence: 9, mutations: [.put(key: b("k"), value: [UInt8](repeating: 0, count: size))])
            let e = LogRecordCodec.encode(record)
            #expect(e.first != 0 && e.last == LogRecordCodec.endMark, "value of \(size) zero bytes")
            #expect(LogRecordCodec.bodyLength(of: record.mutations) == e.count - LogRecordCodec.headerLength)
            #expect(Self.decode(e) == .record(record, next: e.count))
            let marks = e.reversed().prefix { $0 == LogRecordCodec.endMark }.count
            let unmarked = e.count - LogRecordCodec.headerLength - marks
            #expect(marks == ((unmarked + 1) % 256 == 0 ? 2 : 1), "value of \(size)")
        }
        // Format 1's records (no mark) decode as before; more than two marks, or another byte, do not.
        let record = LogRecord(sequence: 9, mutations: [.delete(key: b("k"))])
        let old = Self.formatOne(record)
        #expect(Self.decode(old) == .record(record, next: old.count))
        for trailer: [UInt8] in [[0xA5, 0xA5, 0xA5], [0xA4], [0]] {
            let bytes = Self.frame(Array(old.dropFirst(LogRecordCodec.headerLength)) + trailer)
            guard case .malformed = Self.decode(bytes) else { Issue.record("\(trailer) accepted"); continue }
        }
    }

    @Test("a hole the disk never wrote, followed by records that claim nothing about it, is a torn tail")
    func writebackHoleIsTorn() {
        for lost in [0, 1, 2, 3] {
            let (bytes, holeAt) = Self.writebackHole(lostSectors: lost, claim: 1)
            #expect(Self.scan(bytes) == .torn(validLength: holeAt), "\(lost) sectors lost")
        }
    }

    @Test("a hole followed by a record that claims the lost records were fsync'd is corrupt")
    func holeBeforeADurableClaimIsCorrupt() {
        let probe = Self.writebackHole(lostSectors: 1, claim: 1)
        let firstLost = records(in: probe.bytes).records.last!.record.sequence + 1
        for lost in [0, 1, 2] {
            let (bytes, holeAt) = Self.writebackHole(lostSectors: lost, claim: firstLost)
            guard case .corrupt(let offset, let reason) = Self.scan(bytes) else {
                Issue.record("\(lost) sectors lost: expected corrupt, got \(Self.scan(bytes))"); continue
            }
            #expect(offset == holeAt)
            #expect(reason.contains("fsync'd"))
        }
    }

    @Test("decode works at any offset inside a larger buffer")
    func decodeAtOffset() {
        let encoded = LogRecordCodec.encode(Self.samples[1])
        let padded = [UInt8](repeating: 0x55, count: 13) + encoded + [0x77]
        #expect(Self.decode(padded, at: 13) == .record(Self.samples[1], next: 13 + encoded.count))
    }
}
