/// Reading and writing decimal integers in the wire format.
public enum ASCIIDecimal {
    /// A whole argument read as an integer by the rules of a `*N` or `$len` header (Redis's
    /// `string2ll`): an optional `-`, then 1 to 19 ASCII digits, no leading zero, no `-0`, no `+`,
    /// no spaces, within Int64. Nil for anything else.
    public static func parse(_ text: ArraySlice<UInt8>) -> Int64? {
        guard text.count <= 20 else { return nil }
        // The header scanner, on a copy of the text with its line end, so that both read one grammar.
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.count + 2) { line in
            let count = line.initialize(fromContentsOf: text)
            line.initializeElement(at: count, to: ASCII.cr)
            line.initializeElement(at: count + 1, to: ASCII.lf)
            guard case .value(let value, let next) = scanLine(UnsafeBufferPointer(line), from: 0),
                  next == count + 2 else { return nil }
            return value
        }
    }

    /// The outcome of reading a `<integer>\r\n` header line.
    enum LineScan: Equatable {
        /// The `\r\n` has not arrived yet.
        case incomplete
        /// The line cannot be a valid integer line.
        case invalid
        /// The value, and the index just past the `\r\n`.
        case value(Int64, next: Int)
    }

    /// Reads `-?<digits>\r\n` starting at `start` (just after the type byte), as Redis's
    /// `string2ll` does: no sign other than `-`, no leading zeros, no "-0", at most `maxDigits`
    /// digits (19 covers Int64; overflow is invalid).
    ///
    /// Returns `.invalid` as soon as any byte rules the line out, so a bad header fails fast and
    /// a header never needs more than `maxDigits + 3` bytes after its type byte.
    static func scanLine(
        _ bytes: UnsafeBufferPointer<UInt8>, from start: Int, maxDigits: Int = 19
    ) -> LineScan {
        let end = bytes.count
        var index = start
        guard index < end else { return .incomplete }
        let negative = bytes[index] == ASCII.minus
        if negative { index += 1 }
        var magnitude: UInt64 = 0
        var digits = 0
        while index < end {
            let byte = bytes[index]
            if byte == ASCII.cr {
                return finish(bytes, crAt: index, magnitude: magnitude, digits: digits, negative: negative)
            }
            guard byte >= ASCII.zero, byte <= ASCII.nine else { return .invalid }
            if digits == 1 && magnitude == 0 { return .invalid }  // leading zero
            digits += 1
            guard digits <= maxDigits else { return .invalid }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(byte - ASCII.zero))
            guard !overflow1, !overflow2 else { return .invalid }
            magnitude = sum
            index += 1
        }
        return .incomplete
    }

    /// Validates the digits read so far and the `\n` after the `\r` at `crAt`.
    private static func finish(
        _ bytes: UnsafeBufferPointer<UInt8>, crAt cr: Int, magnitude: UInt64, digits: Int, negative: Bool
    ) -> LineScan {
        guard digits > 0, !(negative && magnitude == 0) else { return .invalid }
        guard cr + 1 < bytes.count else { return .incomplete }
        guard bytes[cr + 1] == ASCII.lf else { return .invalid }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return .invalid }
            return .value(Int64(truncatingIfNeeded: 0 &- magnitude), next: cr + 2)
        }
        guard magnitude <= UInt64(Int64.max) else { return .invalid }
        return .value(Int64(magnitude), next: cr + 2)
    }

    /// Appends the decimal digits of `value` (with a leading `-` when negative).
    public static func append(_ value: Int64, to buffer: inout [UInt8]) {
        if value < 0 { buffer.append(ASCII.minus) }
        append(magnitude: value.magnitude, to: &buffer)
    }

    /// Appends the digits of `magnitude`, most significant first, without allocating.
    public static func append(magnitude: UInt64, to buffer: inout [UInt8]) {
        if magnitude < 10 {
            buffer.append(ASCII.zero &+ UInt8(truncatingIfNeeded: magnitude))
            return
        }
        let start = buffer.count
        var rest = magnitude
        while rest != 0 {
            buffer.append(ASCII.zero &+ UInt8(truncatingIfNeeded: rest % 10))
            rest /= 10
        }
        var low = start
        var high = buffer.count - 1
        while low < high {
            buffer.swapAt(low, high)
            low += 1
            high -= 1
        }
    }

    /// How many decimal digits `value` has (1 for 0). From its bit length: `bits x log10(2)`,
    /// rounded down, is the count or one less, and one comparison tells which (a loop dividing
    /// by ten took a chain of multiplications per digit, a visible share of encoding a change
    /// message).
    @inlinable
    public static func digitCount(_ value: UInt64) -> Int {
        let bits = 64 - (value | 1).leadingZeroBitCount
        let guess = (bits &* 1233) >> 12  // 1233 / 4096 is log10(2) to within 5e-6
        return guess == 0 ? 1 : guess &+ (value >= powerOfTen(guess) ? 1 : 0)
    }

    /// Writes the `digits` decimal digits of `value` (``digitCount(_:)`` of it) at `out`, two
    /// at a time from the least significant.
    @inlinable
    public static func write(_ value: UInt64, digits: Int, to out: UnsafeMutablePointer<UInt8>) {
        var rest = value
        var at = out + digits
        while rest >= 100 {
            let pair = rest % 100
            rest /= 100
            at -= 2
            at[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: pair / 10)
            at[1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: pair % 10)
        }
        if rest >= 10 {
            at -= 2
            at[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest / 10)
            at[1] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
        } else {
            at -= 1
            at[0] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest)
        }
        precondition(at == out, "ASCIIDecimal.write: \(value) does not have \(digits) digits")
    }

    /// 10 to the power `exponent` (0...19), from a table the compiler builds from the switch.
    @usableFromInline @inline(__always)
    static func powerOfTen(_ exponent: Int) -> UInt64 {
        switch exponent {
        case 0: 1
        case 1: 10
        case 2: 100
        case 3: 1_000
        case 4: 10_000
        case 5: 100_000
        case 6: 1_000_000
        case 7: 10_000_000
        case 8: 100_000_000
        case 9: 1_000_000_000
        case 10: 10_000_000_000
        case 11: 100_000_000_000
        case 12: 1_000_000_000_000
        case 13: 10_000_000_000_000
        case 14: 100_000_000_000_000
        case 15: 1_000_000_000_000_000
        case 16: 10_000_000_000_000_000
        case 17: 100_000_000_000_000_000
        case 18: 1_000_000_000_000_000_000
        default: 10_000_000_000_000_000_000
        }
    }
}
