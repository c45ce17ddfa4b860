import ActorKVProtocol

/// The snapshot file format: one JSON document holding a namespace's whole live map. Pure: no I/O
/// (``decode(window:reserve:)`` reads only through the window it is given).
///
///     {"format":"actorkv-snapshot","version":2,"namespace":"config","lastSequence":42,
///      "createdAt":1763800000,"count":2,"entries":[
///     ["blob",{"base64":"AP8K"},17],
///     ["theme","dark",42]
///     ],"crc32c":"1a2b3c4d"}
///
/// Entries are `[key, value, version]` in ascending key order: the version is the sequence
/// number of the log record that last wrote the key, from 1 to `lastSequence`. A key with a
/// lifetime has a fourth element, `{"deadline":1763800000000}` (milliseconds since the epoch),
/// `{"ephemeral":true}` or both (format version 3; version 2 has no lifetimes). A namespace with
/// a deadline of its own (``Mutation/namespaceDeadline(_:)``) has `"deadline":1763800000000`
/// after `createdAt` (a reader that does not know the field skips it), and one created empty after
/// a removal `"startedEmptyAt":7`, the sequence its life began at (``Header/startedEmptyAt``). A key or value
/// that is valid UTF-8 is a JSON string; any other bytes are `{"base64":"…"}`, so every byte
/// string round-trips. Format version 1 (before keys had versions) has `[key, value]` pairs and
/// is still read: its keys take `lastSequence` as their version. `lastSequence` comes before
/// `entries`.
/// A snapshot written by a compaction leaves out the keys whose deadline had passed when it was
/// taken: they were gone for every read already, and the sweeper's deletes of them, logged after
/// the snapshot, find nothing to delete when replayed.
/// `crc32c` is the CRC-32C, in hex, of every byte before the comma that precedes `"crc32c"`.
/// `lastSequence` is the sequence number of the last log record the snapshot includes: recovery
/// replays only records after it.
public enum SnapshotCodec {
    /// The value of the `format` field.
    public static let formatName = "actorkv-snapshot"
    /// The format version this code writes.
    public static let currentVersion: UInt64 = 3
    /// The format versions this code reads: 1 has no per-key versions, 2 no lifetimes.
    public static let readableVersions: ClosedRange<UInt64> = 1...3

    /// What a snapshot holds.
    public struct Contents: Sendable {
        /// The fields other than the entries.
        public var header: Header
        /// The keys, values and versions.
        public var map: OrderedMap
        /// The lifetimes of the keys that have one (an ephemeral key's owner is
        /// ``Lifetime/recoveredOwner``).
        public var lifetimes: KeyLifetimes
    }

    /// The fields of a snapshot other than its entries.
    public struct Header: Sendable, Equatable {
        /// The namespace the snapshot belongs to.
        public var namespace: String
        /// The last log sequence number included.
        public var lastSequence: UInt64
        /// Seconds since 1970 when the snapshot was taken.
        public var createdAt: UInt64
        /// The namespace's own deadline, in milliseconds since the epoch (0: none; the field
        /// `deadline`, written only when there is one).
        public var deadline: UInt64
        /// The sequence this life of the namespace began at, holding no key (a name created after
        /// a removal numbers its first write after the ``SequenceFloor``): while the log still
        /// holds every change after it, `CHANGES … FROM 0` is served from there. 0: at 0 (every
        /// namespace's history starts empty there), or not empty (a renamed or copied namespace
        /// begins with keys). The field `startedEmptyAt`, written only when not 0.
        public var startedEmptyAt: UInt64

        /// Creates a header.
        public init(namespace: String, lastSequence: UInt64, createdAt: UInt64, deadline: UInt64 = 0, startedEmptyAt: UInt64 = 0) {
            self.namespace = namespace
            self.lastSequence = lastSequence
            self.createdAt = createdAt
            self.deadline = deadline
            self.startedEmptyAt = startedEmptyAt
        }
    }

    /// Why a snapshot could not be read, and where.
    public struct Failure: Error, Sendable, Equatable {
        /// The byte offset in the file.
        public let offset: Int
        /// What was wrong there.
        public let reason: String
    }

    /// Encodes `map` with `header`, handing the bytes to `sink` in chunks of about `chunkSize`,
    /// so that a large map never exists twice in memory. With `expiredAt` (milliseconds since the
    /// epoch; 0: keep every key), the keys whose deadline has passed by then are left out. With
    /// `everyVersion` (0: each key's own), every entry is given that version (a renamed
    /// namespace's keys, all written by the rename). Returns how many entries it wrote.
    @discardableResult
    public static func encode<E: Error>(_ map: OrderedMap, header: Header, lifetimes: KeyLifetimes = KeyLifetimes(), expiredAt now: UInt64 = 0,
                                        everyVersion: UInt64 = 0, chunkSize: Int = 1 << 20,
                                        sink: (UnsafeRawBufferPointer) throws(E) -> Void) throws(E) -> Int {
        var writer = ChunkWriter(chunkSize: chunkSize)
        writer.append("{\"format\":\"\(formatName)\",\"version\":\(currentVersion),\"namespace\":")
        appendValue(Array(header.namespace.utf8), to: &writer.buffer)
        writer.append(",\"lastSequence\":\(header.lastSequence),\"createdAt\":\(header.createdAt)")
        if header.deadline != 0 { writer.append(",\"deadline\":\(header.deadline)") }
        if header.startedEmptyAt != 0 { writer.append(",\"startedEmptyAt\":\(header.startedEmptyAt)") }
        let expired = now == 0 ? 0 : lifetimes.expiredCountByScanning(at: now)
        writer.append(",\"count\":\(map.count - expired),\"entries\":[")
        var first = true
        var failure: E?
        var marked = 0
        var leftOut = 0
        map.forEachEntry { key, value, version, isMarked in
            // Only a marked entry has a lifetime (the namespace keeps marks and lifetimes in step).
            var lifetime = Lifetime.none
            if isMarked {
                marked += 1
                lifetime = lifetimes.lifetime(of: Array(key))
                if now != 0 && lifetime.hasExpired(at: now) {
                    leftOut += 1
                    return true
                }
            }
            writer.buffer.append(contentsOf: first ? entryOpen[1...] : entryOpen[...])
            first = false
            appendValue(key, to: &writer.buffer)
            writer.buffer.append(UInt8(ascii: ","))
            value.withUnsafeBytes { appendValue($0, to: &writer.buffer) }
            writer.buffer.append(UInt8(ascii: ","))
            ASCIIDecimal.append(magnitude: everyVersion == 0 ? version : everyVersion, to: &writer.buffer)
            appendLifetime(lifetime, to: &writer.buffer)
            writer.buffer.append(UInt8(ascii: "]"))
            do throws(E) { try writer.flushIfFull(sink) } catch { failure = error; return false }
            return true
        }
        assert(failure != nil || marked == lifetimes.count, "a key with a lifetime is not marked in the map, or one marked has none")
        assert(failure != nil || leftOut == expired, "the count of expired keys does not match the entries left out")
        if let failure { throw failure }
        writer.append("\n]")
        try writer.flush(sink)
        let crc = String(writer.crc, radix: 16)
        writer.append(",\"crc32c\":\"\(String(repeating: "0", count: 8 - crc.count) + crc)\"}\n")
        try writer.flush(sink, checksummed: false)
        return map.count - leftOut
    }

    /// Encodes a whole snapshot into one array (for tests and small maps).
    public static func encode(_ map: OrderedMap, header: Header, lifetimes: KeyLifetimes = KeyLifetimes(), expiredAt now: UInt64 = 0) -> [UInt8] {
        var out: [UInt8] = []
        encode(map, header: header, lifetimes: lifetimes, expiredAt: now) { (chunk: UnsafeRawBufferPointer) throws(Never) in out.append(contentsOf: chunk) }
        return out
    }

    /// Appends `,{"deadline":…,"ephemeral":true}` for a key with a lifetime (nothing for none).
    private static func appendLifetime(_ lifetime: Lifetime, to out: inout [UInt8]) {
        guard !lifetime.isNone else { return }
        out.append(contentsOf: ",{".utf8)
        if lifetime.deadline != 0 {
            out.append(contentsOf: "\"deadline\":".utf8)
            ASCIIDecimal.append(magnitude: lifetime.deadline, to: &out)
        }
        if lifetime.isEphemeral {
            if lifetime.deadline != 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: "\"ephemeral\":true".utf8)
        }
        out.append(UInt8(ascii: "}"))
    }

    /// Decodes a snapshot, checking its format, version and checksum and that its keys are in
    /// strictly ascending order.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> (header: Header, map: OrderedMap) {
        let contents = try decodeContents(bytes)
        return (contents.header, contents.map)
    }

    /// Decodes a snapshot with its keys' lifetimes, as ``decode(_:)-(UnsafeRawBufferPointer)`` does.
    public static func decodeContents(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> Contents {
        var parser = SnapshotParser(bytes)
        do throws(JSONScanner.Failure) {
            return try parser.parse()
        } catch {
            throw Failure(offset: error.offset, reason: error.reason)
        }
    }

    /// The window recovery reads a snapshot through, and how much of it must lie ahead of an
    /// entry before the decoder reads the entry without sliding the window first.
    static let windowCapacity = 16 << 20
    static let windowReserve = 8 << 20

    /// Decodes a snapshot read through `window`, which the decoder slides forward between
    /// entries whenever fewer than `reserve` bytes are left ahead, so that only about one window
    /// of the file is in memory at a time. Throws the window's read error.
    ///
    /// Only a complete, checksum-valid document whose window reached the end of the file is
    /// decoded this way. Anything else — damage anywhere, an entry longer than the reserve — is
    /// ``WindowedDecode/needsWholeFile``: the caller reads the whole file and decodes it as before,
    /// so every verdict (and offset) on a damaged file is the whole-file decoder's.
    static func decode(window: FileWindow, reserve: Int = windowReserve) throws(StoreError) -> WindowedDecode {
        var parser = SnapshotParser(window: window, reserve: reserve)
        do throws(JSONScanner.Failure) {
            return .decoded(try parser.parse())
        } catch {
            if let failure = parser.readFailure { throw failure }
            return .needsWholeFile
        }
    }

    /// The outcome of ``decode(window:reserve:)``.
    enum WindowedDecode {
        /// The snapshot, read in windows.
        case decoded(Contents)
        /// The windowed pass stopped short; decode the whole file instead.
        case needsWholeFile
    }

    /// Decodes a snapshot held in an array.
    public static func decode(_ bytes: [UInt8]) throws(Failure) -> (header: Header, map: OrderedMap) {
        try bytes.withBytes { (raw) throws(Failure) in try decode(raw) }
    }

    /// `,\n[`, what opens each entry (the first without the comma).
    private static let entryOpen: [UInt8] = Array(",\n[".utf8)

    /// Appends `bytes` as a JSON string, or as `{"base64":"…"}` when they are not UTF-8.
    static func appendValue(_ bytes: [UInt8], to out: inout [UInt8]) {
        bytes.withUnsafeBytes { appendValue($0, to: &out) }
    }

    /// Appends `bytes` as a JSON string, or as `{"base64":"…"}` when they are not UTF-8. Runs of
    /// bytes that need no escape are copied whole.
    static func appendValue(_ bytes: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        guard UTF8Validator.isValid(bytes) else {
            out.append(contentsOf: "{\"base64\":\"".utf8)
            Base64.encode(Array(bytes), into: &out)
            out.append(contentsOf: "\"}".utf8)
            return
        }
        out.append(UInt8(ascii: "\""))
        var start = 0
        for index in 0..<bytes.count {
            let b = bytes[index]
            guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
            appendEscape(b, to: &out)
            start = index + 1
        }
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[start...]))
        out.append(UInt8(ascii: "\""))
    }

    /// Appends JSON's escape for `b`, a quote, a backslash or a control character.
    private static func appendEscape(_ b: UInt8, to out: inout [UInt8]) {
        switch b {
        case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
        case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
        case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
        default:
            let hex = Array("0123456789abcdef".utf8)
            out.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                    hex[Int(b >> 4)], hex[Int(b & 15)]])
        }
    }
}

/// Accumulates output, checksums it, and hands it on in chunks.
private struct ChunkWriter {
    let chunkSize: Int
    var buffer: [UInt8] = []
    var crc: UInt32 = 0

    init(chunkSize: Int) {
        self.chunkSize = chunkSize
        buffer.reserveCapacity(chunkSize + 4096)
    }

    mutating func append(_ text: String) { buffer.append(contentsOf: text.utf8) }

    mutating func flushIfFull<E: Error>(_ sink: (UnsafeRawBufferPointer) throws(E) -> Void) throws(E) {
        if buffer.count >= chunkSize { try flush(sink) }
    }

    mutating func flush<E: Error>(_ sink: (UnsafeRawBufferPointer) throws(E) -> Void,
                                  checksummed: Bool = true) throws(E) {
        if checksummed { crc = CRC32C.checksum(buffer, continuing: crc) }
        try buffer.withBytes { (raw) throws(E) in try sink(raw) }
        buffer.removeAll(keepingCapacity: true)
    }
}

/// Reads the document described in ``SnapshotCodec``.
private struct SnapshotParser {
    var scanner: JSONScanner
    var namespace: String?
    var version: UInt64?
    var lastSequence: UInt64?
    var createdAt: UInt64 = 0
    var deadline: UInt64 = 0
    var startedEmptyAt: UInt64 = 0
    var count: UInt64?
    var map: OrderedMap?
    var lifetimes = KeyLifetimes()
    /// When reading a file a window at a time: the window, which `scanner` reads.
    private var window: FileWindow?
    /// The bytes that must lie ahead of an entry in the window (see `SnapshotCodec.decode(window:reserve:)`).
    private var reserve = 0
    /// The CRC-32C of the bytes before the window (they are all covered by the checksum).
    private var crcBefore: UInt32 = 0
    /// Why reading the next window failed, if it did (the parse stops with a failure there).
    private(set) var readFailure: StoreError?

    init(_ bytes: UnsafeRawBufferPointer) { scanner = JSONScanner(bytes) }

    /// A parser over `window`, which it slides forward between entries.
    init(window: FileWindow, reserve: Int) {
        self.window = window
        self.reserve = reserve
        scanner = JSONScanner(window.bytes)
    }

    mutating func parse() throws(JSONScanner.Failure) -> SnapshotCodec.Contents {
        try scanner.expect(UInt8(ascii: "{"))
        var checksumCovers: Int?
        var commaAt = 0
        repeat {
            let key = String(decoding: try scanner.string(), as: UTF8.self)
            try scanner.expect(UInt8(ascii: ":"))
            if key == "crc32c" {
                checksumCovers = commaAt
                try verifyChecksum(covering: commaAt)
            } else {
                guard checksumCovers == nil else { throw scanner.fail("crc32c must be the last field") }
                try field(key)
            }
            _ = scanner.peek()
            commaAt = scanner.position
        } while scanner.consume(UInt8(ascii: ","))
        try scanner.expect(UInt8(ascii: "}"))
        guard scanner.peek() == nil else { throw scanner.fail("data after the end of the document") }
        guard checksumCovers != nil else { throw scanner.fail("missing crc32c") }
        if let window, !window.reachesEnd { throw scanner.fail("the window does not reach the end of the file") }
        return try finish()
    }

    private mutating func field(_ key: String) throws(JSONScanner.Failure) {
        switch key {
        case "format":
            let start = scanner.position
            guard String(decoding: try scanner.string(), as: UTF8.self) == SnapshotCodec.formatName else {
                throw JSONScanner.Failure(offset: start, reason: "not an actorkv snapshot")
            }
        case "version":
            let start = scanner.position
            let v = try scanner.unsignedInteger()
            guard SnapshotCodec.readableVersions.contains(v) else {
                throw JSONScanner.Failure(offset: start, reason: "unknown format version \(v) (this build reads \(SnapshotCodec.readableVersions.lowerBound) to \(SnapshotCodec.readableVersions.upperBound))")
            }
            version = v
        case "namespace": namespace = String(decoding: try scanner.string(), as: UTF8.self)
        case "lastSequence": lastSequence = try scanner.unsignedInteger()
        case "createdAt": createdAt = try scanner.unsignedInteger()
        case "deadline": deadline = try scanner.unsignedInteger()
        case "startedEmptyAt": startedEmptyAt = try scanner.unsignedInteger()
        case "count": count = try scanner.unsignedInteger()
        case "entries":
            guard let version else { throw scanner.fail("entries before the format version") }
            guard let lastSequence else { throw scanner.fail("entries before lastSequence") }
            map = try entries(versioned: version >= 2, withLifetimes: version >= 3, lastSequence: lastSequence)
        default: try scanner.skipValue()
        }
    }

    /// The entries: `[key, value, version]` when `versioned`, else `[key, value]`, whose version
    /// is `lastSequence`; `withLifetimes`, perhaps a lifetime after the version.
    private mutating func entries(versioned: Bool, withLifetimes: Bool, lastSequence: UInt64) throws(JSONScanner.Failure) -> OrderedMap {
        var builder = OrderedMap.Builder()
        try scanner.expect(UInt8(ascii: "["))
        if scanner.consume(UInt8(ascii: "]")) { return builder.build() }
        repeat {
            try slideWindow(keepingFrom: scanner.position)
            let start = scanner.position
            try scanner.expect(UInt8(ascii: "["))
            let key = try bytesValue()
            try scanner.expect(UInt8(ascii: ","))
            let value = try bytesValue()
            let version = versioned ? try entryVersion(upTo: lastSequence) : lastSequence
            // A key with a lifetime has a marked entry (see LiveData).
            var marked = false
            if withLifetimes && scanner.consume(UInt8(ascii: ",")) {
                lifetimes.set(key, try lifetime())
                marked = true
            }
            try scanner.expect(UInt8(ascii: "]"))
            guard builder.append(key: key, value: value, version: version, marked: marked) else {
                throw JSONScanner.Failure(offset: start, reason: "keys out of order or duplicated")
            }
        } while scanner.consume(UInt8(ascii: ","))
        try scanner.expect(UInt8(ascii: "]"))
        return builder.build()
    }

    /// `,version` of an entry: from 1 to `lastSequence`.
    private mutating func entryVersion(upTo lastSequence: UInt64) throws(JSONScanner.Failure) -> UInt64 {
        try scanner.expect(UInt8(ascii: ","))
        let start = scanner.position
        let version = try scanner.unsignedInteger()
        guard version >= 1 && version <= lastSequence else {
            throw JSONScanner.Failure(offset: start, reason: "version \(version) is not between 1 and lastSequence \(lastSequence)")
        }
        return version
    }

    /// An entry's lifetime: `{"deadline":N,"ephemeral":true}`, either field optional, not empty.
    private mutating func lifetime() throws(JSONScanner.Failure) -> Lifetime {
        let start = scanner.position
        var lifetime = Lifetime.none
        try scanner.expect(UInt8(ascii: "{"))
        repeat {
            let field = String(decoding: try scanner.string(), as: UTF8.self)
            try scanner.expect(UInt8(ascii: ":"))
            switch field {
            case "deadline":
                lifetime.deadline = try scanner.unsignedInteger()
            case "ephemeral":
                try scanner.literal("true")
                lifetime.owner = Lifetime.recoveredOwner
            default:
                throw scanner.fail("unknown lifetime field \"\(field)\"")
            }
        } while scanner.consume(UInt8(ascii: ","))
        try scanner.expect(UInt8(ascii: "}"))
        guard !lifetime.isNone else { throw JSONScanner.Failure(offset: start, reason: "an empty lifetime") }
        return lifetime
    }

    private mutating func bytesValue() throws(JSONScanner.Failure) -> [UInt8] {
        if scanner.peek() == UInt8(ascii: "\"") { return try scanner.string() }
        try scanner.expect(UInt8(ascii: "{"))
        guard try scanner.string() == Array("base64".utf8) else { throw scanner.fail("expected \"base64\"") }
        try scanner.expect(UInt8(ascii: ":"))
        let start = scanner.position
        let text = try scanner.string()
        try scanner.expect(UInt8(ascii: "}"))
        guard let decoded = Base64.decode(text) else { throw JSONScanner.Failure(offset: start, reason: "invalid base64") }
        return decoded
    }

    private mutating func verifyChecksum(covering end: Int) throws(JSONScanner.Failure) {
        let start = scanner.position
        let text = try scanner.string()
        guard text.count == 8, let stored = UInt32(String(decoding: text, as: UTF8.self), radix: 16) else {
            throw JSONScanner.Failure(offset: start, reason: "crc32c is not 8 hex digits")
        }
        let actual = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: scanner.bytes[0..<end]), continuing: crcBefore)
        guard actual == stored else {
            throw JSONScanner.Failure(offset: start, reason: "checksum mismatch (stored \(String(stored, radix: 16)), computed \(String(actual, radix: 16)))")
        }
    }

    /// Between entries, when the window holds less than its reserve past `position` and the file
    /// goes on: checksums and drops the bytes before `position`, and reads on.
    private mutating func slideWindow(keepingFrom position: Int) throws(JSONScanner.Failure) {
        guard let current = window, !current.reachesEnd, current.bytes.count - position < reserve else { return }
        crcBefore = CRC32C.checksum(UnsafeRawBufferPointer(rebasing: current.bytes[0..<position]), continuing: crcBefore)
        do {
            try current.slide(droppingFirst: position)
        } catch {
            readFailure = error
            throw JSONScanner.Failure(offset: position, reason: error.message)
        }
        scanner = JSONScanner(current.bytes)
    }

    private func finish() throws(JSONScanner.Failure) -> SnapshotCodec.Contents {
        guard version != nil else { throw scanner.fail("missing version") }
        guard let namespace else { throw scanner.fail("missing namespace") }
        guard let lastSequence else { throw scanner.fail("missing lastSequence") }
        // Far beyond any real store (2^62 writes), and room left so that the next write's number
        // cannot overflow.
        guard lastSequence < 1 << 62 else { throw scanner.fail("impossible lastSequence \(lastSequence)") }
        guard let map else { throw scanner.fail("missing entries") }
        if let count, count != UInt64(map.count) {
            throw scanner.fail("count says \(count) entries but \(map.count) were read")
        }
        return SnapshotCodec.Contents(header: SnapshotCodec.Header(namespace: namespace, lastSequence: lastSequence, createdAt: createdAt,
                                                                   deadline: map.count == 0 ? 0 : deadline, startedEmptyAt: startedEmptyAt),
                                      map: map, lifetimes: lifetimes)
    }
}
