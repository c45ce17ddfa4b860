import ActorKVProtocol
import ActorKVStore

/// Encodes a `change` message straight into its final place: the message's length is worked
/// out first, the buffer grown once by that much, and the pieces written through a pointer.
/// The bytes are those ``ChangeMessages/message(for:namespace:prefix:)`` encodes to
/// (`ChangeTapeTests` compares them, in both protocol versions). Appending piece by piece (a
/// header, a decimal, CRLF, each a separate array append with its own checks) cost most of a
/// change's encoding while the tape took 700k changes a second.
enum ChangeMessageEncoder {
    /// Appends the message of `change` for keys under `prefix`; returns false, appending
    /// nothing, when it touches none of them.
    static func append(_ change: Change, namespace: [UInt8], prefix: [UInt8], version: RESPVersion, to buffer: inout [UInt8]) -> Bool {
        var pairs = 0
        var length = 0
        let nullLength = version == .resp3 ? 3 : 5  // `_\r\n` or `$-1\r\n`
        ChangeMessages.forEachPair(in: change, under: prefix) { key, value in
            pairs += 1
            length += bulkLength(key.count) + (value.map { bulkLength($0.count) } ?? nullLength)
        }
        guard pairs > 0 else { return false }
        let sequence = change.sequence
        length += headerLength(4) + bulkLength(changeWord.count) + bulkLength(namespace.count)
            + 3 + digitCount(sequence) + headerLength(UInt64(pairs * 2))
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: length))
        buffer.withUnsafeMutableBufferPointer { all in
            var out = Cursor(at: all.baseAddress! + start)
            out.header(version == .resp3 ? UInt8(ascii: ">") : UInt8(ascii: "*"), 4)
            out.bulk(changeWord)
            out.bulk(namespace)
            out.header(UInt8(ascii: ":"), sequence)
            out.header(UInt8(ascii: "*"), UInt64(pairs * 2))
            ChangeMessages.forEachPair(in: change, under: prefix) { key, value in
                out.bulk(key)
                if let value { out.bulk(value) } else { out.null(version) }
            }
            assert(out.at == all.baseAddress! + start + length, "a change message's length was miscounted")
        }
        return true
    }

    private static let changeWord = Array("change".utf8)

    /// `$<count>\r\n<bytes>\r\n`.
    private static func bulkLength(_ count: Int) -> Int { headerLength(UInt64(count)) + count + 2 }

    /// `<type><n>\r\n`.
    private static func headerLength(_ n: UInt64) -> Int { 1 + digitCount(n) + 2 }

    private static func digitCount(_ n: UInt64) -> Int {
        var digits = 1
        var rest = n
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    /// Where the next byte goes; the memory is the buffer's, sized by ``append(_:namespace:prefix:version:to:)``.
    private struct Cursor {
        var at: UnsafeMutablePointer<UInt8>

        mutating func header(_ type: UInt8, _ n: UInt64) {
            at.pointee = type
            at += 1
            decimal(n)
            crlf()
        }

        mutating func bulk(_ bytes: [UInt8]) {
            bytes.withUnsafeBytes { bulk($0) }
        }

        mutating func bulk(_ bytes: UnsafeRawBufferPointer) {
            header(UInt8(ascii: "$"), UInt64(bytes.count))
            if let base = bytes.baseAddress { UnsafeMutableRawPointer(at).copyMemory(from: base, byteCount: bytes.count) }
            at += bytes.count
            crlf()
        }

        mutating func null(_ version: RESPVersion) {
            if version == .resp3 {
                at.pointee = UInt8(ascii: "_")
                at += 1
            } else {
                for byte in "$-1".utf8 {
                    at.pointee = byte
                    at += 1
                }
            }
            crlf()
        }

        mutating func crlf() {
            at[0] = UInt8(ascii: "\r")
            at[1] = UInt8(ascii: "\n")
            at += 2
        }

        /// `n` in decimal, most significant digit first.
        mutating func decimal(_ n: UInt64) {
            let count = ChangeMessageEncoder.digitCount(n)
            var rest = n
            for index in stride(from: count - 1, through: 0, by: -1) {
                at[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
            at += count
        }
    }
}
