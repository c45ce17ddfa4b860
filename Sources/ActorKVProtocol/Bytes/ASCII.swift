/// Byte values of the ASCII characters the codec looks at.
enum ASCII {
    static let cr: UInt8 = 13
    static let lf: UInt8 = 10
    static let space: UInt8 = 32
    static let tab: UInt8 = 9
    static let star: UInt8 = 42       // *
    static let dollar: UInt8 = 36     // $
    static let plus: UInt8 = 43       // +
    static let minus: UInt8 = 45      // -
    static let colon: UInt8 = 58      // :
    static let comma: UInt8 = 44      // ,
    static let hash: UInt8 = 35       // #
    static let percent: UInt8 = 37    // %
    static let greaterThan: UInt8 = 62  // >
    static let underscore: UInt8 = 95   // _
    static let doubleQuote: UInt8 = 34
    static let singleQuote: UInt8 = 39
    static let backslash: UInt8 = 92
    static let zero: UInt8 = 48
    static let nine: UInt8 = 57
    static let lowerX: UInt8 = 120

    /// C's `isspace`: space, \t, \n, \v, \f, \r. Redis's `sdssplitargs` skips these between
    /// inline words and accepts them after a closing quote.
    @inline(__always)
    static func isSpace(_ byte: UInt8) -> Bool {
        byte == space || (byte >= tab && byte <= cr)
    }

    /// The bytes that end an unquoted inline word, as in Redis's `sdssplitargs`: space, \t, \n,
    /// \r (not \v or \f, which are part of the word; NUL, which ends the whole line in Redis, is
    /// an ordinary byte here).
    @inline(__always)
    static func endsWord(_ byte: UInt8) -> Bool {
        byte == space || byte == tab || byte == lf || byte == cr
    }

    /// The value of a hexadecimal digit (either case), or nil.
    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 48...57: return byte - 48
        case 97...102: return byte - 87
        case 65...70: return byte - 55
        default: return nil
        }
    }

    /// The byte as text for an error message: printable ASCII as is, anything else as `\xHH`.
    static func printable(_ byte: UInt8) -> String {
        if byte >= 0x20 && byte < 0x7F {
            return String(UnicodeScalar(byte))
        }
        let digits: [Character] = Array("0123456789abcdef")
        return "\\x" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0xF)])
    }
}
