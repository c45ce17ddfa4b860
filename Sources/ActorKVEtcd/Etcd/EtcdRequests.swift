import ActorKVStore

/// A request operation of etcd's KV API, rendered as the v3 JSON gateway's body (keys and values
/// base64). Pure: no I/O.
public enum EtcdRequest: Sendable, Equatable {
    /// Keys from `key` (to `rangeEnd`, exclusive, if given), at most `limit` (0: all), as of
    /// `revision` (0: the latest); with `newestFirst`, the most recently written first; with
    /// `keysOnly`, without their values.
    case range(key: [UInt8], rangeEnd: [UInt8]? = nil, limit: Int = 0, countOnly: Bool = false, revision: Int64 = 0, newestFirst: Bool = false,
               keysOnly: Bool = false)
    /// Stores `value` under `key`, attached to `lease` (0: none); with `previous`, the answer
    /// holds the key-value it replaced.
    case put(key: [UInt8], value: [UInt8], lease: Int64 = 0, previous: Bool = false)
    /// Removes `key` (to `rangeEnd`, exclusive, if given).
    case deleteRange(key: [UInt8], rangeEnd: [UInt8]? = nil)

    /// The JSON object of the request alone (the body of `/v3/kv/range`, `/put`, `/deleterange`).
    public var body: [UInt8] {
        var out = JSONWriter()
        write(into: &out)
        return out.bytes
    }

    /// The gateway path that takes it alone.
    public var path: String {
        switch self {
        case .range: "/v3/kv/range"
        case .put: "/v3/kv/put"
        case .deleteRange: "/v3/kv/deleterange"
        }
    }

    func write(into out: inout JSONWriter) {
        out.open()
        switch self {
        case .range(let key, let rangeEnd, let limit, let countOnly, let revision, let newestFirst, let keysOnly):
            out.field("key", base64: key)
            if let rangeEnd { out.field("range_end", base64: rangeEnd) }
            if limit > 0 { out.field("limit", Int64(limit)) }
            if countOnly { out.field("count_only", true) }
            if keysOnly { out.field("keys_only", true) }
            if revision > 0 { out.field("revision", revision) }
            if newestFirst {
                out.field("sort_order", string: "DESCEND")
                out.field("sort_target", string: "MOD")
            }
        case .put(let key, let value, let lease, let previous):
            out.field("key", base64: key)
            out.field("value", base64: value)
            if lease != 0 { out.field("lease", lease) }
            if previous { out.field("prev_kv", true) }
        case .deleteRange(let key, let rangeEnd):
            out.field("key", base64: key)
            if let rangeEnd { out.field("range_end", base64: rangeEnd) }
        }
        out.close()
    }

    /// As an operation inside a transaction (`{"request_put": {...}}`).
    func writeAsOperation(into out: inout JSONWriter) {
        out.open()
        switch self {
        case .range: out.key("request_range")
        case .put: out.key("request_put")
        case .deleteRange: out.key("request_delete_range")
        }
        write(into: &out)
        out.close()
    }
}

/// A comparison in a transaction: the key's `mod_revision` equals a revision (0: the key is
/// absent), or, over a range of keys, every key's is below one.
public struct EtcdCompare: Sendable, Equatable {
    /// The key compared (the first of the range, with ``rangeEnd``).
    public var key: [UInt8]
    /// With it, every key from ``key`` to this (exclusive) is compared.
    public var rangeEnd: [UInt8]?
    /// The revision it must have last been written at (0: it must not exist), or with ``less``,
    /// one it must have been written before.
    public var modRevision: Int64
    /// Whether the mod_revision must be below ``modRevision`` rather than equal to it.
    public var less: Bool

    /// A comparison of `key`'s mod_revision with `modRevision`.
    public init(key: [UInt8], modRevision: Int64) {
        self.init(key: key, rangeEnd: nil, modRevision: modRevision, less: false)
    }

    /// A comparison of the mod_revisions of the keys in [`key`, `rangeEnd`) with `modRevision`:
    /// each below it with `less`, else each equal to it.
    public init(key: [UInt8], rangeEnd: [UInt8]?, modRevision: Int64, less: Bool) {
        self.key = key
        self.rangeEnd = rangeEnd
        self.modRevision = modRevision
        self.less = less
    }
}

/// A transaction: if every comparison holds, `success` runs, else `failure`; atomically.
public struct EtcdTransaction: Sendable, Equatable {
    /// The comparisons, all of which must hold.
    public var compare: [EtcdCompare] = []
    /// What runs when they hold.
    public var success: [EtcdRequest] = []
    /// What runs when one does not.
    public var failure: [EtcdRequest] = []

    /// A transaction of these parts.
    public init(compare: [EtcdCompare] = [], success: [EtcdRequest] = [], failure: [EtcdRequest] = []) {
        self.compare = compare
        self.success = success
        self.failure = failure
    }

    /// The body of `/v3/kv/txn`.
    public var body: [UInt8] {
        var out = JSONWriter()
        out.open()
        out.key("compare")
        out.openArray()
        for c in compare {
            out.element()
            out.open()
            out.field("key", base64: c.key)
            if let end = c.rangeEnd { out.field("range_end", base64: end) }
            out.field("target", string: "MOD")
            out.field("result", string: c.less ? "LESS" : "EQUAL")
            out.field("mod_revision", c.modRevision)
            out.close()
        }
        out.closeArray()
        for (name, ops) in [("success", success), ("failure", failure)] where !ops.isEmpty {
            out.key(name)
            out.openArray()
            for op in ops {
                out.element()
                op.writeAsOperation(into: &out)
            }
            out.closeArray()
        }
        out.close()
        return out.bytes
    }
}

/// Writes the small JSON objects the gateway takes. Field values are base64 strings, decimal
/// strings (etcd's int64 fields), booleans, or plain ASCII strings.
struct JSONWriter {
    private(set) var bytes: [UInt8] = []
    private var first = true

    init() { bytes.reserveCapacity(128) }

    mutating func open() { bytes.append(UInt8(ascii: "{")); first = true }
    mutating func close() { bytes.append(UInt8(ascii: "}")); first = false }
    mutating func openArray() { bytes.append(UInt8(ascii: "[")); first = true }
    mutating func closeArray() { bytes.append(UInt8(ascii: "]")); first = false }

    /// Before an array element.
    mutating func element() {
        if !first { bytes.append(UInt8(ascii: ",")) }
        first = true
    }

    mutating func key(_ name: String) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: name.utf8)
        bytes.append(contentsOf: "\":".utf8)
        first = true
    }

    mutating func field(_ name: String, base64 value: [UInt8]) {
        key(name)
        bytes.append(UInt8(ascii: "\""))
        Base64.encode(value, into: &bytes)
        bytes.append(UInt8(ascii: "\""))
        first = false
    }

    mutating func field(_ name: String, string value: String) {
        key(name)
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: value.utf8)
        bytes.append(UInt8(ascii: "\""))
        first = false
    }

    mutating func field(_ name: String, _ value: Int64) {
        field(name, string: String(value))
    }

    mutating func field(_ name: String, _ value: Bool) {
        key(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
        first = false
    }
}

/// etcd's key ranges, in bytes.
public enum EtcdKeys {
    /// The end of the range of every key that starts with `prefix` (the prefix with its last
    /// byte below 0xFF increased, the bytes after it dropped; `[0]` for an all-0xFF prefix:
    /// every key after it).
    public static func rangeEnd(ofPrefix prefix: [UInt8]) -> [UInt8] {
        var end = prefix
        while let last = end.last {
            if last < 0xFF {
                end[end.count - 1] = last + 1
                return end
            }
            end.removeLast()
        }
        return [0]
    }

    /// The smallest key after `key` (`key` + a zero byte).
    public static func after(_ key: [UInt8]) -> [UInt8] { key + [0] }
}
