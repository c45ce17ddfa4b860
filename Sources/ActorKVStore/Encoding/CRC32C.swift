import CActorKVCRC32C

/// CRC-32C (Castagnoli), the checksum of log records and snapshots.
///
/// With the CPU's `crc32` instruction where it has one (SSE 4.2 on x86-64: eight bytes per
/// instruction; it was a seventh of a 1M-record log replay in software), else slicing-by-8 in
/// software: about eight bytes per table round. Both give the same checksums (tested).
public enum CRC32C {
    /// Whether ``checksum(_:continuing:)`` uses the CPU's instruction.
    public static let usesHardware = actorkv_crc32c_hardware() != 0

    private static let polynomial: UInt32 = 0x82F6_3B78

    private static let tables: [[UInt32]] = {
        var t = Array(repeating: Array(repeating: UInt32(0), count: 256), count: 8)
        for i in 0..<256 {
            var c = UInt32(i)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ polynomial : c >> 1 }
            t[0][i] = c
        }
        for i in 0..<256 {
            for k in 1..<8 { t[k][i] = (t[k - 1][i] >> 8) ^ t[0][Int(t[k - 1][i] & 0xFF)] }
        }
        return t
    }()
    private static let flat: [UInt32] = tables.flatMap { $0 }

    /// The checksum of `bytes`, continuing from `crc` (the checksum of what came before, 0 at the start).
    public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        if usesHardware { return ~actorkv_crc32c_update(~crc, bytes.baseAddress, bytes.count) }
        return softwareChecksum(bytes, continuing: crc)
    }

    /// ``checksum(_:continuing:)`` computed with the tables, whatever the CPU (the fallback, and
    /// what tests compare the instruction with).
    public static func softwareChecksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        flat.withUnsafeBufferPointer { t in
            var c = ~crc
            var i = 0
            let n = bytes.count
            while i + 8 <= n {
                let lo = bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self).littleEndian ^ c
                let hi = bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self).littleEndian
                c = t[7 * 256 + Int(lo & 0xFF)] ^ t[6 * 256 + Int((lo >> 8) & 0xFF)]
                    ^ t[5 * 256 + Int((lo >> 16) & 0xFF)] ^ t[4 * 256 + Int(lo >> 24)]
                    ^ t[3 * 256 + Int(hi & 0xFF)] ^ t[2 * 256 + Int((hi >> 8) & 0xFF)]
                    ^ t[1 * 256 + Int((hi >> 16) & 0xFF)] ^ t[Int(hi >> 24)]
                i += 8
            }
            while i < n {
                c = t[Int((c ^ UInt32(bytes[i])) & 0xFF)] ^ (c >> 8)
                i += 1
            }
            return ~c
        }
    }

    /// The checksum of a byte array.
    public static func checksum(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBytes { checksum($0, continuing: crc) }
    }
}
