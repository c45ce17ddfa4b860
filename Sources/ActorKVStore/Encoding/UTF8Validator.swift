/// Tells whether bytes are well-formed UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF).
public enum UTF8Validator {
    /// True when `bytes` is well-formed UTF-8.
    public static func isValid(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { isValid($0) }
    }

    /// True when `bytes` is well-formed UTF-8.
    public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
        isValid(bytes.assumingMemoryBound(to: UInt8.self))
    }

    /// True when `bytes` is well-formed UTF-8.
    public static func isValid(_ b: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0
        let n = b.count
        while i < n {
            // ASCII, the usual case, eight bytes at a time.
            while n - i >= 8, UnsafeRawBufferPointer(b).loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                i += 8
            }
            guard i < n else { break }
            let c = b[i]
            if c < 0x80 { i += 1; continue }
            let need: Int
            var lo: UInt8 = 0x80, hi: UInt8 = 0xBF
            switch c {
            case 0xC2...0xDF: need = 1
            case 0xE0: need = 2; lo = 0xA0
            case 0xE1...0xEC, 0xEE, 0xEF: need = 2
            case 0xED: need = 2; hi = 0x9F
            case 0xF0: need = 3; lo = 0x90
            case 0xF1...0xF3: need = 3
            case 0xF4: need = 3; hi = 0x8F
            default: return false
            }
            guard i + need < n else { return false }
            let second = b[i + 1]
            guard second >= lo && second <= hi else { return false }
            for k in 2...max(2, need) where k <= need {
                guard b[i + k] & 0xC0 == 0x80 else { return false }
            }
            i += need + 1
        }
        return true
    }
}
