@testable import ActorKVStore
import ActorKVTestSupport

/// A key as the log says it must be after some sequence number.
struct ExpectedEntry: Equatable, Sendable, CustomStringConvertible {
    var value: [UInt8]
    var version: UInt64
    /// Milliseconds since the epoch; 0 none.
    var deadline: UInt64 = 0
    /// The owning connection; 0 none.
    var owner: UInt64 = 0

    var description: String {
        let text = String(decoding: value.prefix(24), as: UTF8.self) + (value.count > 24 ? "…(\(value.count) bytes)" : "")
        return "\(text)@v\(version)" + (deadline != 0 ? " deadline \(deadline)" : "") + (owner != 0 ? " owner \(owner)" : "")
    }
}

/// A namespace's keys and what each holds.
typealias NamespaceState = [[UInt8]: ExpectedEntry]

/// What a recorded trace says each namespace must recover to: the state after every prefix of its
/// log sequence, read from the records the trace wrote (decoded with the log codec, applied as
/// recovery applies them), and, at each crash point, the sequence number below which nothing may
/// be lost. Pure: no I/O.
struct LogHistory {
    /// Per namespace, the state after each sequence number (index 0: before any record).
    private(set) var states: [String: [NamespaceState]] = [:]
    /// Per crash point (0 ... trace length), per namespace: every record through this sequence
    /// number must survive a crash there.
    private(set) var required: [[String: UInt64]] = []
    /// Where each record was written, per namespace and sequence number: the trace operation, the
    /// file (as in the trace), its offset there and its encoding.
    private(set) var written: [String: [UInt64: (operation: Int, path: String, offset: Int, bytes: [UInt8])]] = [:]

    /// Reads the trace of a store whose data directory is `dataDirectory` (absolute, as in the
    /// trace) and started empty. `acknowledged` holds, per namespace, the writes the store
    /// acknowledged: the trace length when the write returned, and its sequence number. Under
    /// `always` each of those must survive a crash after it; under every policy a record must
    /// survive once an fsync of its file completed after it was written.
    init(trace: [FileOperationRecorder.Operation], dataDirectory: String, policy: DurabilityPolicy,
         acknowledged: [(point: Int, namespace: String, sequence: UInt64)]) throws {
        var pending: [String: (namespace: String, sequence: UInt64)] = [:]
        var durable: [String: UInt64] = [:]
        var acks = acknowledged.sorted { $0.point < $1.point }[...]
        required.reserveCapacity(trace.count + 1)
        for (index, operation) in trace.enumerated() {
            durable.merge(Self.acknowledged(through: index, &acks, policy: policy)) { max($0, $1) }
            required.append(durable)
            switch operation {
            case .write(let path, let offset, let bytes):
                guard let namespace = Self.namespace(ofSegment: path, in: dataDirectory) else { continue }
                for (record, start, end) in Self.records(in: bytes) {
                    try add(record, namespace: namespace, at: index)
                    written[namespace, default: [:]][record.sequence] = (index, path, offset + start, Array(bytes[start..<end]))
                    pending[path] = (namespace, record.sequence)
                }
            case .sync(let path):
                if let synced = pending.removeValue(forKey: path) {
                    durable[synced.namespace] = max(durable[synced.namespace] ?? 0, synced.sequence)
                }
            case .unlink(let path), .open(let path, truncates: true):
                pending[path] = nil
            case .truncate, .rename, .mkdir, .open:
                continue
            }
        }
        durable.merge(Self.acknowledged(through: trace.count, &acks, policy: policy)) { max($0, $1) }
        required.append(durable)
    }

    /// The acknowledgements at or before `point` taken from `acks`, highest sequence per namespace
    /// (none unless the policy is `always`).
    private static func acknowledged(through point: Int, _ acks: inout ArraySlice<(point: Int, namespace: String, sequence: UInt64)>,
                                     policy: DurabilityPolicy) -> [String: UInt64] {
        var result: [String: UInt64] = [:]
        while let ack = acks.first, ack.point <= point {
            acks.removeFirst()
            if policy == .always { result[ack.namespace] = max(result[ack.namespace] ?? 0, ack.sequence) }
        }
        return result
    }

    private mutating func add(_ record: LogRecord, namespace: String, at index: Int) throws {
        var history = states[namespace] ?? [[:]]
        guard record.sequence == UInt64(history.count) else {
            throw TestFailure("namespace \(namespace): trace operation \(index) writes record \(record.sequence) after \(history.count - 1)")
        }
        var state = history[history.count - 1]
        for mutation in record.mutations {
            switch mutation {
            case .put(let key, let value): state[key] = ExpectedEntry(value: value, version: record.sequence)
            case .delete(let key):
                state[key] = nil
                if state.keys.allSatisfy(\.isEmpty) { state[[]] = nil }  // the last key's delete ends the namespace's deadline
            case .lifetime(let key, let lifetime) where key.isEmpty:
                // The namespace's own deadline, kept as an entry of the empty key (as
                // `Namespace.entriesWithLifetimes` shows it), only while a key is there.
                let holdsKeys = state.keys.contains { !$0.isEmpty }
                state[[]] = holdsKeys && lifetime.deadline != 0 ? ExpectedEntry(value: [], version: 0, deadline: lifetime.deadline) : nil
            case .lifetime(let key, let lifetime):
                state[key]?.deadline = lifetime.deadline
                state[key]?.owner = lifetime.owner
            }
        }
        history.append(state)
        states[namespace] = history
    }

    /// The namespace whose log segment `path` is (`DATA/ns/000001.log`), or nil for other files.
    static func namespace(ofSegment path: String, in dataDirectory: String) -> String? {
        guard path.hasPrefix(dataDirectory + "/"), path.hasSuffix(".log") else { return nil }
        let parts = path.dropFirst(dataDirectory.count + 1).split(separator: "/")
        return parts.count == 2 ? String(parts[0]) : nil
    }

    /// The whole records at the start of `bytes`, one after another (none in a header or in
    /// zeros), with where each starts and ends in `bytes`.
    static func records(in bytes: [UInt8]) -> [(record: LogRecord, start: Int, end: Int)] {
        bytes.withUnsafeBytes { raw in
            var found: [(record: LogRecord, start: Int, end: Int)] = []
            var offset = 0
            while case .record(let record, let next) = LogRecordCodec.decode(raw, at: offset) {
                found.append((record, offset, next))
                offset = next
            }
            return found
        }
    }

    /// The state of namespace `name` as a recovery at wall-clock time `now` must show it after
    /// sequence `sequence`: ephemeral keys (their owners are gone) and keys past their deadline
    /// left out.
    /// The namespace's own deadline (the empty key's entry) goes with the last key: the workload
    /// gives only deadlines far off, which no recovery reaches.
    func visible(_ name: String, after sequence: Int, now: UInt64) -> NamespaceState {
        var state = states[name]![sequence].filter { $0.value.owner == 0 && ($0.value.deadline == 0 || $0.value.deadline > now) }
        if state.keys.allSatisfy(\.isEmpty) { state[[]] = nil }
        return state
    }
}
