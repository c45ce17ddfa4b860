import ActorKVStore
import ActorKVTestSupport
import Testing

@Suite("CRC-32C")
struct CRC32CTests {
    /// The plain bit-at-a-time definition (reflected, polynomial 0x82F63B78), as a reference.
    static func reference(_ bytes: some Sequence<UInt8>, continuing crc: UInt32 = 0) -> UInt32 {
        var c = ~crc
        for byte in bytes {
            c ^= UInt32(byte)
            for _ in 0..<8 { c = (c & 1) != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        }
        return ~c
    }

    @Test("standard check value and empty input")
    func knownVectors() {
        #expect(CRC32C.checksum(b("123456789")) == 0xE306_9283)
        #expect(CRC32C.checksum([UInt8]()) == 0)
        #expect(CRC32C.checksum([UInt8](), continuing: 0x1234_5678) == 0x1234_5678)
        #expect(CRC32C.checksum(b("a")) == 0xC1D0_4330)
    }

    @Test("RFC 3720 (iSCSI) test vectors")
    func iscsiVectors() {
        #expect(CRC32C.checksum([UInt8](repeating: 0, count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum((0..<32).map { UInt8($0) }) == 0x46DD_794E)
        #expect(CRC32C.checksum((0..<32).reversed().map { UInt8($0) }) == 0x113F_DB5C)
    }

    @Test("the CPU instruction and slicing-by-8 both equal the bitwise reference for every length 0…80 and every alignment")
    func bothImplementationsMatchReference() {
        var rng = SeededGenerator(seed: 7)
        let data = rng.bytes(100)
        data.withUnsafeBytes { raw in
            for start in 0..<8 {
                for length in 0...(80 - start) {
                    let slice = UnsafeRawBufferPointer(rebasing: raw[start..<(start + length)])
                    let expected = Self.reference(slice)
                    #expect(CRC32C.checksum(slice) == expected, "start \(start) length \(length)")
                    #expect(CRC32C.softwareChecksum(slice) == expected, "software: start \(start) length \(length)")
                    #expect(CRC32C.checksum(slice, continuing: 0xDEAD_BEEF) == Self.reference(slice, continuing: 0xDEAD_BEEF))
                }
            }
        }
    }

    #if arch(x86_64)
    @Test("on x86-64 the instruction is used, so the tests above compare it with the tables")
    func hardwarePathIsTested() {
        // Every x86-64 CPU since 2008 has SSE 4.2; without it these tests would only cover the tables.
        #expect(CRC32C.usesHardware)
    }
    #endif

    @Test("long inputs equal the reference, and checksums continue across any split")
    func longInputsAndContinuation() {
        var rng = SeededGenerator(seed: 42)
        for length in [1000, 4093, 65_537] {
            let data = rng.bytes(length)
            #expect(CRC32C.checksum(data) == Self.reference(data), "length \(length)")
            #expect(data.withUnsafeBytes { CRC32C.softwareChecksum($0) } == Self.reference(data), "software, length \(length)")
        }
        let data = rng.bytes(300)
        let whole = CRC32C.checksum(data)
        for split in 0...data.count {
            let first = CRC32C.checksum(Array(data[..<split]))
            #expect(CRC32C.checksum(Array(data[split...]), continuing: first) == whole, "split \(split)")
        }
    }

    @Test("every single-bit change of a 64-byte input changes the checksum")
    func detectsSingleBitFlips() {
        var rng = SeededGenerator(seed: 3)
        let data = rng.bytes(64)
        let original = CRC32C.checksum(data)
        for i in 0..<data.count {
            for bit in 0..<8 {
                var changed = data
                changed[i] ^= 1 << bit
                #expect(CRC32C.checksum(changed) != original)
            }
        }
    }
}
