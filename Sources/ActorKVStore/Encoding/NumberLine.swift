/// The text of the store's small marker files: one line, a fixed sentence ending in a decimal
/// number, and a newline (``CleanCloseMarker``, ``SequenceFloor``). Pure: no I/O.
enum NumberLine {
    /// The line `prefix` + `number` + newline.
    static func text(_ prefix: String, _ number: UInt64) -> String { prefix + String(number) + "\n" }

    /// The number `bytes` name, or nil unless they are exactly such a line: `prefix`, decimal
    /// digits that fit a UInt64, and the newline (a line cut short is no line).
    static func number(in bytes: [UInt8], prefix: String) -> UInt64? {
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasPrefix(prefix), text.hasSuffix("\n") else { return nil }
        let digits = text.dropFirst(prefix.count).dropLast()
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(digits)
    }
}
