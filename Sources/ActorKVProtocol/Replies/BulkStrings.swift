/// Byte strings kept one after another in one buffer, with where each one ends: a list of many
/// small strings (a namespace's keys and values, for HGETALL) made and sent without an array,
/// a reference to count or a ``Reply`` per string. Sent as ``Reply/bulks(_:asMap:)``.
///
/// Its strings are copies: make one of strings whose total is bounded (a reply sends them
/// anyway), and keep large values, which a ``Reply/bulk(_:)`` shares, out of it.
public struct BulkStrings: Sendable, Equatable {
    /// The strings' bytes, one after another.
    public private(set) var bytes: [UInt8] = []
    /// Where each string ends in ``bytes``.
    private var ends: [Int] = []
    /// The bytes their bulk strings' framing takes: `$<len>\r\n` and `\r\n` for each.
    public private(set) var framingBytes = 0

    /// No strings, with room for `strings` strings of `bytes` bytes in all.
    public init(reservingStrings strings: Int = 0, bytes: Int = 0) {
        self.bytes.reserveCapacity(bytes)
        ends.reserveCapacity(strings)
    }

    /// These strings, in order.
    public init(_ strings: [[UInt8]]) {
        for string in strings { append(string) }
    }

    /// How many strings there are.
    public var count: Int { ends.count }

    /// Whether there are none.
    public var isEmpty: Bool { ends.isEmpty }

    /// The string at `index`.
    public subscript(index: Int) -> ArraySlice<UInt8> { bytes[range(of: index)] }

    /// Where the string at `index` lies in ``bytes``.
    public func range(of index: Int) -> Range<Int> { (index == 0 ? 0 : ends[index - 1])..<ends[index] }

    /// Adds `string` after the others.
    public mutating func append(_ string: [UInt8]) {
        string.withUnsafeBufferPointer { append($0) }
    }

    /// Adds `string` after the others.
    public mutating func append(_ string: ArraySlice<UInt8>) {
        string.withUnsafeBufferPointer { append($0) }
    }

    /// Adds the bytes `string` points to after the others. (The one way strings are added: a
    /// generic one, called from another module, would copy byte by byte.)
    public mutating func append(_ string: UnsafeBufferPointer<UInt8>) {
        bytes.append(contentsOf: string)
        ends.append(bytes.count)
        framingBytes += Self.framing(ofLength: string.count)
    }

    /// The size of their encoding as bulk strings, one after another (no aggregate header).
    public var encodedSize: Int { bytes.count + framingBytes }

    /// The strings at `indices`, each appended to `buffer` as a bulk string, `$<len>\r\n<bytes>\r\n`.
    ///
    /// The buffer grows once, by their exact size, and is then written in place: appending the
    /// four pieces of each string checked the buffer's room and uniqueness four times per string,
    /// a fifth of an HGETALL's time.
    public func encode(_ indices: Range<Int>, into buffer: inout [UInt8]) {
        guard !indices.isEmpty else { return }
        let first = range(of: indices.lowerBound).lowerBound
        var size = ends[indices.upperBound - 1] - first, start = first
        for index in indices {
            size += Self.framing(ofLength: ends[index] - start)
            start = ends[index]
        }
        var at = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: size))
        buffer.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { all in
                var start = first
                for index in indices {
                    let end = ends[index]
                    at = Self.writeBulk(UnsafeBufferPointer(rebasing: all[start..<end]), to: out, at: at)
                    start = end
                }
            }
        }
    }

    /// Writes `string` as a bulk string into `out` at `at`, which has room for it; returns where
    /// it ends.
    @inline(__always)
    private static func writeBulk(_ string: UnsafeBufferPointer<UInt8>, to out: UnsafeMutableBufferPointer<UInt8>, at start: Int) -> Int {
        var at = start
        out[at] = ASCII.dollar
        // The length's digits, written from the last.
        let digits = framing(ofLength: string.count) - 5
        var rest = string.count
        for place in stride(from: at + digits, to: at, by: -1) {
            out[place] = ASCII.zero + UInt8(rest % 10)
            rest /= 10
        }
        at += digits + 1
        out[at] = ASCII.cr
        out[at + 1] = ASCII.lf
        at += 2
        if let source = string.baseAddress, string.count > 0 {
            (out.baseAddress! + at).update(from: source, count: string.count)
        }
        at += string.count
        out[at] = ASCII.cr
        out[at + 1] = ASCII.lf
        return at + 2
    }

    /// The framing of one bulk string of `length` bytes: `$`, the length's digits, and two CRLFs.
    static func framing(ofLength length: Int) -> Int {
        var digits = 1, rest = length
        while rest >= 10 { rest /= 10; digits += 1 }
        return 5 + digits
    }
}
