/// The opaque position of a scan between pages. Pure.
///
/// On the wire a cursor is text: `0` starts a scan and, returned, ends it; any other cursor is
/// `k` followed by the hex of the last key returned, and the next page starts strictly after that
/// key. Because pages follow key order, a key present for the whole scan appears exactly once,
/// whatever is written between pages.
public enum ScanCursor: Equatable, Sendable {
    /// Before the first key.
    case start
    /// After `key`.
    case after([UInt8])

    /// Parses the wire text of a cursor.
    public init(text: [UInt8]) throws(StoreError) {
        if text == [UInt8(ascii: "0")] { self = .start; return }
        guard text.count >= 3, text.count % 2 == 1, text[0] == UInt8(ascii: "k") else {
            throw StoreError(.invalidCursor, "invalid cursor")
        }
        var key: [UInt8] = []
        key.reserveCapacity(text.count / 2)
        var i = 1
        while i < text.count {
            guard let hi = Self.nibble(text[i]), let lo = Self.nibble(text[i + 1]) else {
                throw StoreError(.invalidCursor, "invalid cursor")
            }
            key.append(hi << 4 | lo)
            i += 2
        }
        self = .after(key)
    }

    /// The wire text: `0` for ``start``.
    public var text: [UInt8] {
        guard case .after(let key) = self else { return [UInt8(ascii: "0")] }
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "k")]
        out.reserveCapacity(1 + key.count * 2)
        for b in key { out.append(hex[Int(b >> 4)]); out.append(hex[Int(b & 15)]) }
        return out
    }

    /// The key after which the page starts, nil at the start.
    public var afterKey: [UInt8]? {
        if case .after(let key) = self { return key }
        return nil
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}

/// One page of a scan.
public struct ScanPage: Sendable, Equatable {
    /// Keys and values in ascending key order.
    public var entries: [KeyValue]
    /// Where the next page starts; ``ScanCursor/start`` (wire `0`) when the scan is over.
    public var next: ScanCursor

    /// Creates a page.
    public init(entries: [KeyValue], next: ScanCursor) {
        self.entries = entries
        self.next = next
    }
}

/// A key and its value.
public struct KeyValue: Sendable, Equatable {
    /// The key.
    public var key: [UInt8]
    /// The value.
    public var value: [UInt8]

    /// Creates a pair.
    public init(key: [UInt8], value: [UInt8]) {
        self.key = key
        self.value = value
    }
}
