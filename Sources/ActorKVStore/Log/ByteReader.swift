/// Reads little-endian integers and length-prefixed byte strings from a buffer, with bounds checks.
struct ByteReader {
    struct Failure: Error { let reason: String }

    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var remaining: Int { bytes.count - position }

    mutating func u8() throws(Failure) -> UInt8 {
        guard remaining >= 1 else { throw Failure(reason: "truncated body") }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func u32() throws(Failure) -> UInt32 {
        guard remaining >= 4 else { throw Failure(reason: "truncated body") }
        defer { position += 4 }
        return UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
    }

    mutating func u64() throws(Failure) -> UInt64 {
        guard remaining >= 8 else { throw Failure(reason: "truncated body") }
        defer { position += 8 }
        return UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: position, as: UInt64.self))
    }

    mutating func lengthPrefixed() throws(Failure) -> [UInt8] {
        Array(try borrowedLengthPrefixed())
    }

    /// ``lengthPrefixed()`` without the copy: the bytes, in the buffer being read.
    mutating func borrowedLengthPrefixed() throws(Failure) -> UnsafeRawBufferPointer {
        let length = Int(try u32())
        guard remaining >= length else { throw Failure(reason: "a length of \(length) runs past the body") }
        defer { position += length }
        return UnsafeRawBufferPointer(rebasing: bytes[position..<(position + length)])
    }

    /// Passes over `count` bytes.
    mutating func skip(_ count: Int) throws(Failure) {
        guard remaining >= count else { throw Failure(reason: "truncated body") }
        position += count
    }

    /// Passes over what follows a record's mutations: its end mark, one or two
    /// ``LogRecordCodec/endMark`` bytes, or nothing in a record of log format 1.
    mutating func skipEndMark() throws(Failure) {
        let rest = UnsafeRawBufferPointer(rebasing: bytes[position...])
        guard rest.count <= 2, rest.allSatisfy({ $0 == LogRecordCodec.endMark }) else {
            throw Failure(reason: "\(rest.count) stray bytes after the mutations")
        }
        position = bytes.count
    }
}
