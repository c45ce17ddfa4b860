import ActorKVProtocol
import ActorKVStore

/// Encodes a `change` message straight into its final place: the message's length is worked
/// out first, the buffer grown once by that much, and the pieces written through a pointer.
/// The bytes are those ``ChangeMessages/message(for:namespace:prefix:)`` encodes to
/// (`ChangeTapeTests` compares them, in both protocol versions). Appending piece by piece (a
/// header, a decimal, CRLF, each a separate array append with its own checks) cost most of a
/// change's encoding while the tape took 700k changes a second.
enum ChangeMessageEncoder {
    /// The size of a message: its length in bytes and how many key-value pairs it holds.
    struct Size {
        let length: Int
        let pairs: Int
    }

    /// The size of the message of `change` for keys under `prefix`, or nil when it touches none
    /// of them (it has no message).
    static func size(of change: Change, namespace: [UInt8], prefix: [UInt8], version: RESPVersion) -> Size? {
        var pairs = 0
        var length = 0
        let nullLength = version == .resp3 ? 3 : 5  // `_\r\n` or `$-1\r\n`
        ChangeMessages.forEachPair(in: change, under: prefix) { key, value in
            pairs += 1
            length += bulkLength(key.count) + (value.map { bulkLength($0.count) } ?? nullLength)
        }
        guard pairs > 0 else { return nil }
        length += 1 + changeHead.utf8CodeUnitCount + bulkLength(namespace.count)
            + 3 + ASCIIDecimal.digitCount(change.sequence) + headerLength(UInt64(pairs * 2))
        return Size(length: length, pairs: pairs)
    }

    /// Writes the message of `change` at `out`, which has room for `size` (what
    /// ``size(of:namespace:prefix:version:)`` gave for the same arguments).
    static func write(_ change: Change, size: Size, namespace: [UInt8], prefix: [UInt8], version: RESPVersion, to out: UnsafeMutablePointer<UInt8>) {
        var cursor = Cursor(at: out)
        cursor.byte(version == .resp3 ? UInt8(ascii: ">") : UInt8(ascii: "*"))
        cursor.text(changeHead)
        cursor.bulk(namespace)
        cursor.header(UInt8(ascii: ":"), change.sequence)
        cursor.header(UInt8(ascii: "*"), UInt64(size.pairs * 2))
        ChangeMessages.forEachPair(in: change, under: prefix) { key, value in
            cursor.bulk(key)
            if let value { cursor.bulk(value) } else { cursor.null(version) }
        }
        precondition(cursor.at == out + size.length, "a change message's length was miscounted")
    }

    /// Appends the message of `change` for keys under `prefix` to `buffer`; returns false,
    /// appending nothing, when it touches none of them.
    static func append(_ change: Change, namespace: [UInt8], prefix: [UInt8], version: RESPVersion, to buffer: inout [UInt8]) -> Bool {
        guard let size = size(of: change, namespace: namespace, prefix: prefix, version: version) else { return false }
        let start = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: size.length))
        buffer.withUnsafeMutableBufferPointer { all in
            write(change, size: size, namespace: namespace, prefix: prefix, version: version, to: all.baseAddress! + start)
        }
        return true
    }

    /// What follows a message's type byte up to its namespace: 4 parts, the first `change`.
    private static let changeHead: StaticString = "4\r\n$6\r\nchange\r\n"

    /// `$<count>\r\n<bytes>\r\n`.
    private static func bulkLength(_ count: Int) -> Int { headerLength(UInt64(count)) + count + 2 }

    /// `<type><n>\r\n`.
    private static func headerLength(_ n: UInt64) -> Int { 1 + ASCIIDecimal.digitCount(n) + 2 }

    /// Where the next byte goes, in memory sized by ``size(of:namespace:prefix:version:)``.
    private struct Cursor {
        var at: UnsafeMutablePointer<UInt8>

        mutating func header(_ type: UInt8, _ n: UInt64) {
            byte(type)
            let digits = ASCIIDecimal.digitCount(n)
            ASCIIDecimal.write(n, digits: digits, to: at)
            at += digits
            crlf()
        }

        mutating func byte(_ value: UInt8) {
            at.pointee = value
            at += 1
        }

        mutating func text(_ text: StaticString) {
            at.update(from: text.utf8Start, count: text.utf8CodeUnitCount)
            at += text.utf8CodeUnitCount
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
    }
}
