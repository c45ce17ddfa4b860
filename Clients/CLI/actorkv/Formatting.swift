// How keys and values are printed: escaped TAB-separated fields, JSON members, LF line ends.
import Foundation

/// Escapes backslash, tab, newline and carriage return, so a key or value fits in one TAB field.
func escapedField(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    for b in bytes {
        switch b {
        case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case UInt8(ascii: "\t"): out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case UInt8(ascii: "\r"): out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        default: out.append(b)
        }
    }
    return out
}

/// `text` with each CRLF line end made LF, as every other command prints its lines (INFO's text
/// ends its lines with CRLF on the wire, which a script would otherwise find at each value's end).
func lfLineEnds(_ text: String) -> [UInt8] {
    let bytes = Array(text.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    for (i, byte) in bytes.enumerated() where !(byte == 0x0D && i + 1 < bytes.count && bytes[i + 1] == 0x0A) {
        out.append(byte)
    }
    return out
}

/// A JSON member `"name":"text"` for valid UTF-8, else `"name_base64":"..."`.
func jsonMember(_ name: String, _ bytes: [UInt8]) -> String {
    guard let text = String(validating: bytes, as: UTF8.self) else {
        return "\"\(name)_base64\":\"\(Data(bytes).base64EncodedString())\""
    }
    var out = "\"\(name)\":\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
