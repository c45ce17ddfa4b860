import ActorKVStore

/// Resolves a batch's steps against the keys' values and versions as read from etcd at one
/// revision, as the local engine's write planner does against its map: each step sees the
/// steps before it; a guard that fails or a step that refuses leaves nothing written. Pure.
///
/// What comes out is what one etcd transaction must do: the final write of each key (etcd takes
/// one operation per key in a transaction), guarded by every key read still having the version
/// it was read at (else the batch is resolved again against newer values).
public enum BatchResolver {
    /// A key's state as read: its value and version (etcd's mod_revision), or nil if absent.
    public typealias State = VersionedValue?

    /// What the batch comes to.
    public enum Resolution: Equatable, Sendable {
        /// Write these (a nil value deletes the key), in this order, and reply with `outcomes`
        /// (one per step). A write that `keepsLease` stays on the lease its key has (every
        /// write of it was an INCR of the value read: an INCR keeps a key's deadline and owner,
        /// as locally); any other put leaves its key without one, as a PUT does.
        case apply(writes: [(key: [UInt8], value: [UInt8]?, keepsLease: Bool)], outcomes: [Outcome])
        /// A guard did not hold: nothing is written.
        case conditionFailed
        /// A step refused (not an integer, overflow): nothing is written.
        case refused(StoreError)

        public static func == (a: Resolution, b: Resolution) -> Bool {
            switch (a, b) {
            case (.conditionFailed, .conditionFailed): return true
            case (.refused(let x), .refused(let y)): return x == y
            case (.apply(let w1, let o1), .apply(let w2, let o2)):
                return o1 == o2 && w1.count == w2.count
                    && zip(w1, w2).allSatisfy { $0.key == $1.key && $0.value == $1.value && $0.keepsLease == $1.keepsLease }
            default: return false
            }
        }
    }

    /// The keys whose state the steps read (each once, in first-use order).
    public static func keys(of steps: [BatchStep]) -> [[UInt8]] {
        var seen = Set<[UInt8]>()
        var out: [[UInt8]] = []
        for step in steps {
            if case .unchangedSince = step { continue }
            if seen.insert(step.key).inserted { out.append(step.key) }
        }
        return out
    }

    /// Whether a step reads the whole namespace (``BatchStep/read(_:)``): then ``resolve(_:current:namespace:limits:)``
    /// needs all its entries, read at the same revision as the keys.
    public static func readsNamespace(_ steps: [BatchStep]) -> Bool {
        steps.contains { if case .read = $0 { return true } else { return false } }
    }

    /// Resolves `steps` against `current` (every key of ``keys(of:)``) and, for steps that read
    /// the whole namespace, `namespace` (all its entries, read with them), checking computed
    /// values against `limits`.
    public static func resolve(_ steps: [BatchStep], current: [[UInt8]: State], namespace: [[UInt8]: VersionedValue] = [:],
                               limits: StoreLimits) -> Resolution {
        var state = current
        for (key, value) in namespace where state.index(forKey: key) == nil { state[key] = .some(value) }
        // A key written by an earlier step has a version no client can know yet.
        var written = Set<[UInt8]>()
        // Keys whose lease a write replaced: all but those only INCRs of the value read wrote.
        var replaced = Set<[UInt8]>()
        var order: [[UInt8]] = []
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(steps.count)
        func write(_ key: [UInt8], _ value: [UInt8]?, keepingLease: Bool = false) {
            if !written.contains(key) { order.append(key) }
            written.insert(key)
            if !keepingLease { replaced.insert(key) }
            state[key] = value.map { VersionedValue(value: $0, version: UInt64.max) }
        }
        for step in steps {
            let key = step.key
            let now = state[key] ?? nil
            switch step {
            case .put(_, let value):
                write(key, value)
                outcomes.append(.stored)
            case .delete:
                if now != nil { write(key, nil) }
                outcomes.append(.integer(now == nil ? 0 : 1))
            case .set(_, let value):
                write(key, value)
                outcomes.append(.integer(now == nil ? 1 : 0))
            case .setIfAbsent(_, let value):
                if now == nil { write(key, value) }
                outcomes.append(.integer(now == nil ? 1 : 0))
            case .ifVersion(_, let expected):
                guard (now?.version ?? 0) == expected else { return .conditionFailed }
                outcomes.append(.stored)
            case .increment(_, let delta):
                switch Operation.incrementedValue(now?.value, by: delta) {
                case .failure(let error): return .refused(error)
                case .success(let sum):
                    write(key, Array(String(sum).utf8), keepingLease: now != nil)
                    outcomes.append(.integer(Int(sum)))
                }
            case .update(_, let update):
                switch update.compute(now?.value) {
                case .set(let value):
                    if let problem = limits.problem(with: .put(key: key, value: value)) { return .refused(problem) }
                    write(key, value, keepingLease: update.keepsLifetime && now != nil)
                    outcomes.append(.value(value))
                case .delete:
                    if now != nil { write(key, nil) }
                    outcomes.append(.value(nil))
                case .keep:
                    outcomes.append(.value(now?.value))
                case .refuse(let error):
                    return .refused(error)
                }
            case .unchangedSince:
                // WATCH's guard: compared by the transaction itself (EtcdStore), not from the keys read.
                outcomes.append(.stored)
            case .read(.count):
                outcomes.append(.integer(state.values.reduce(0) { $0 + ($1 == nil ? 0 : 1) }))
            case .read(.entries):
                let entries = state.compactMap { key, value in value.map { KeyValue(key: key, value: $0.value) } }
                    .sorted { $0.key.lexicographicallyPrecedes($1.key) }
                outcomes.append(.page(ScanPage(entries: entries, next: .start)))
            }
        }
        return .apply(writes: order.map { ($0, state[$0]??.value, !replaced.contains($0)) }, outcomes: outcomes)
    }
}
