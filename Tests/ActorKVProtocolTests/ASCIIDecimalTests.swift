import ActorKVProtocol
import Testing

/// ASCIIDecimal.parse: a whole argument read with the `*N`/`$len` header grammar (Redis's string2ll).
@Suite("Decimal arguments")
struct ASCIIDecimalTests {
    @Test("integers as Redis writes them are read", arguments: [
        ("0", 0), ("7", 7), ("100000", 100_000), ("-1", -1),
        ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min),
    ] as [(String, Int64)])
    func reads(_ text: String, _ value: Int64) {
        #expect(ASCIIDecimal.parse(bytes(text)[...]) == value)
    }

    @Test("anything else is nil", arguments: [
        "", "+1", "01", "00", "-0", "-", " 1", "1 ", "1\r", "1\r\n", "1\n", "1e3", "0x10", "1.0",
        "\u{0661}", "\u{FF11}", "9223372036854775808", "-9223372036854775809", "99999999999999999999",
    ])
    func rejects(_ text: String) {
        #expect(ASCIIDecimal.parse(bytes(text)[...]) == nil)
    }

    @Test("a slice in the middle of an array is read on its own")
    func slice() {
        let array = bytes("x12y")
        #expect(ASCIIDecimal.parse(array[1..<3]) == 12)
    }

    @Test("digitCount and write agree with String(n) on each side of every power of ten, at 0 and at UInt64.max")
    func digitsAtEveryBoundary() {
        var values: [UInt64] = [0, 1, UInt64.max, UInt64.max - 1]
        var power: UInt64 = 10
        for _ in 1...19 {
            values += [power - 1, power, power + 1]
            power = power.multipliedReportingOverflow(by: 10).partialValue
        }
        for value in values {
            let text = String(value)
            #expect(ASCIIDecimal.digitCount(value) == text.utf8.count, "\(value)")
            var out = [UInt8](repeating: 0, count: text.utf8.count)
            out.withUnsafeMutableBufferPointer { ASCIIDecimal.write(value, digits: $0.count, to: $0.baseAddress!) }
            #expect(out == Array(text.utf8), "\(value)")
        }
    }
}
