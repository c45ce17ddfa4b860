// TEMPORARY stand-in until the B+tree lands; deleted then.
public func compareBytes(_ a: [UInt8], _ b: [UInt8]) -> Int {
    let n = min(a.count, b.count)
    for i in 0..<n where a[i] != b[i] { return a[i] < b[i] ? -1 : 1 }
    return a.count - b.count
}
public struct OrderedMap: Sendable {
    var keys: [[UInt8]] = []
    var values: [[UInt8]] = []
    public init() {}
    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }
    func index(_ key: [UInt8]) -> (Int, Bool) {
        var lo = 0, hi = keys.count
        while lo < hi { let m = (lo + hi) / 2; let c = compareBytes(keys[m], key); if c == 0 { return (m, true) }; if c < 0 { lo = m + 1 } else { hi = m } }
        return (lo, false)
    }
    public subscript(key: [UInt8]) -> [UInt8]? { let (i, f) = index(key); return f ? values[i] : nil }
    @discardableResult public mutating func updateValue(_ value: [UInt8], forKey key: [UInt8]) -> [UInt8]? {
        let (i, f) = index(key); if f { let o = values[i]; values[i] = value; return o }
        keys.insert(key, at: i); values.insert(value, at: i); return nil
    }
    @discardableResult public mutating func removeValue(forKey key: [UInt8]) -> [UInt8]? {
        let (i, f) = index(key); guard f else { return nil }; keys.remove(at: i); return values.remove(at: i)
    }
    public func entries(after: [UInt8]?, prefix: [UInt8], limit: Int) -> [(key: [UInt8], value: [UInt8])] {
        var i = 0
        if let after { let (j, f) = index(after); i = f ? j + 1 : j }
        let (p, _) = index(prefix); i = max(i, p)
        var out: [(key: [UInt8], value: [UInt8])] = []
        while i < keys.count && out.count < limit { if !keys[i].starts(with: prefix) { break }; out.append((keys[i], values[i])); i += 1 }
        return out
    }
    public func forEach(_ body: ([UInt8], [UInt8]) throws -> Bool) rethrows { for i in 0..<keys.count { if try !body(keys[i], values[i]) { return } } }
    public struct Builder {
        var map = OrderedMap()
        public init() {}
        public mutating func append(key: [UInt8], value: [UInt8]) -> Bool {
            if let l = map.keys.last, compareBytes(l, key) >= 0 { return false }
            map.keys.append(key); map.values.append(value); return true
        }
        public consuming func build() -> OrderedMap { map }
    }
}
