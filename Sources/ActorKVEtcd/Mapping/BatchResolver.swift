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

    /// The lease a key is written with.
    public enum Lease: Equatable, Sendable {
        /// The one it was read with (none if it had none): every write of it kept its lifetime
        /// (an INCR of the value read keeps a key's deadline and owner, as locally).
        case asRead
        /// None: the key lives until deleted, as after a PUT.
        case none
        /// One that ends at this deadline, in milliseconds since the epoch (HEXPIRE, HSETEX EX).
        case deadline(UInt64)
        /// One of the connection that owns the key (it was read with one), with this deadline
        /// (0: none): an HEXPIRE or HPERSIST of an ephemeral key keeps its owner, as locally.
        case owned(deadline: UInt64)
    }

    /// What the batch comes to.
    public enum Resolution: Equatable, Sendable {
        /// Write these (a nil value deletes the key), in this order, each with its lease, and
        /// reply with `outcomes` (one per step).
        case apply(writes: [(key: [UInt8], value: [UInt8]?, lease: Lease)], outcomes: [Outcome])
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
                    && zip(w1, w2).allSatisfy { $0.key == $1.key && $0.value == $1.value && $0.lease == $1.lease }
            default: return false
            }
        }
    }

    /// The keys whose state the steps read (each once, in first-use order).
    public static func keys(of steps: [BatchStep]) -> [[UInt8]] {
        var seen = Set<[UInt8]>()
        var out: [[UInt8]] = []
        for step in steps {
            for key in step.keys where seen.insert(key).inserted { out.append(key) }
        }
        return out
    }

    /// Whether a step reads the whole namespace (``BatchStep/read(_:)``): then ``resolve(_:current:namespace:lifetimes:now:limits:)``
    /// needs all its entries, read at the same revision as the keys.
    public static func readsNamespace(_ steps: [BatchStep]) -> Bool {
        steps.contains { if case .read = $0 { return true } else { return false } }
    }

    /// Whether a step reads or sets keys' deadlines (HEXPIRE, HTTL, HSETEX, HGETEX with an
    /// option): then ``resolve(_:current:namespace:lifetimes:now:limits:)`` needs the lifetimes
    /// of the keys read.
    public static func readsLifetimes(_ steps: [BatchStep]) -> Bool {
        steps.contains(where: \.readsLifetimes)
    }

    /// Resolves `steps` against `current` (every key of ``keys(of:)``) and, for steps that read
    /// the whole namespace, `namespace` (all its entries, read with them), checking computed
    /// values against `limits`. For steps of deadlines, `lifetimes` are the keys' as read (a
    /// deadline at the end of the second its lease ends; an owner other than 0 for a key of a
    /// connection, whatever its number; absent: none) and `now` the time of the request, in milliseconds since the epoch.
    public static func resolve(_ steps: [BatchStep], current: [[UInt8]: State], namespace: [[UInt8]: VersionedValue] = [:],
                               lifetimes: [[UInt8]: Lifetime] = [:], now clock: UInt64 = 0, limits: StoreLimits) -> Resolution {
        var resolving = Resolving(current: current, namespace: namespace, lifetimes: lifetimes, clock: clock, limits: limits)
        resolving.outcomes.reserveCapacity(steps.count)
        for step in steps {
            if let ending = resolving.resolve(step) { return ending }
        }
        return resolving.resolution
    }

    /// The state of a batch being resolved: each key as the steps so far leave it, the keys
    /// written (in first-write order) with their leases, and the steps' outcomes.
    private struct Resolving {
        var state: [[UInt8]: State]
        /// The leases of the keys written.
        var leases: [[UInt8]: Lease] = [:]
        /// The keys written, in the order first written.
        var order: [[UInt8]] = []
        var outcomes: [Outcome] = []
        let lifetimes: [[UInt8]: Lifetime]
        let clock: UInt64
        let limits: StoreLimits

        init(current: [[UInt8]: State], namespace: [[UInt8]: VersionedValue], lifetimes: [[UInt8]: Lifetime], clock: UInt64,
             limits: StoreLimits) {
            state = current
            for (key, value) in namespace where state.index(forKey: key) == nil { state[key] = .some(value) }
            self.lifetimes = lifetimes
            self.clock = clock
            self.limits = limits
        }

        /// What the batch comes to once every step is resolved.
        var resolution: Resolution {
            .apply(writes: order.map { ($0, state[$0]??.value, leases[$0]!) }, outcomes: outcomes)
        }

        /// Resolves one step, appending its outcome; returns what ends the batch early (a guard
        /// that failed, a refusal), nil to go on.
        mutating func resolve(_ step: BatchStep) -> Resolution? {
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
                return increment(key, now, by: delta)
            case .update(_, let update):
                return apply(update, to: key, now)
            case .setNamespaceDeadline, .read(.deadline):
                return .refused(EtcdStore.noNamespaceDeadline)
            case .unchangedSince:
                // WATCH's guard: compared by the transaction itself (EtcdStore), not from the keys read.
                outcomes.append(.stored)
            case .read(let read):
                outcomes.append(self.read(read))
            case .deadlines(let keys):
                outcomes.append(.batch(keys.map(deadline(of:))))
            case .expire(let expiry):
                outcomes.append(expire(expiry))
            case .setAll(let setting):
                outcomes.append(setAll(setting))
            }
            return nil
        }

        /// Writes `value` (nil: deletes) under `key` with `lease` (nil: the one it has by now).
        mutating func write(_ key: [UInt8], _ value: [UInt8]?, lease: Lease? = Lease.none) {
            setLease(key, lease)
            // A key written by an earlier step has a version no client can know yet.
            state[key] = value.map { VersionedValue(value: $0, version: UInt64.max) }
        }

        /// Gives `key` `lease` (nil: the one it has by now) and has it written again with it.
        /// Alone (a new deadline), this keeps the key's version for the steps after it, as a
        /// deadline keeps it locally (etcd's mod_revision changes once the batch is applied).
        mutating func setLease(_ key: [UInt8], _ lease: Lease?) {
            if leases[key] == nil { order.append(key) }
            leases[key] = lease ?? leases[key] ?? .asRead
        }

        /// The lifetime of `key` by now: as read, none, or the deadline a step gave it (kept to
        /// the end of its second, as etcd keeps it).
        func lifetime(of key: [UInt8]) -> Lifetime {
            switch leases[key] ?? .asRead {
            case .asRead: return lifetimes[key] ?? .none
            case .none: return .none
            case .deadline(let deadline): return Lifetime(deadline: UInt64(EtcdLeases.endingSecond(of: deadline)) * 1000)
            case .owned(let deadline): return Lifetime(deadline: deadline == 0 ? 0 : UInt64(EtcdLeases.endingSecond(of: deadline)) * 1000, owner: 1)
            }
        }

        /// INCR: the sum written (keeping the key's lease if it had a value), or the refusal.
        mutating func increment(_ key: [UInt8], _ now: VersionedValue?, by delta: Int64) -> Resolution? {
            switch Operation.incrementedValue(now?.value, by: delta) {
            case .failure(let error): return .refused(error)
            case .success(let sum):
                write(key, Array(String(sum).utf8), lease: now != nil ? nil : Lease.none)
                outcomes.append(.integer(Int(sum)))
                return nil
            }
        }

        /// A computed update (HINCRBYFLOAT, HGETDEL, …): its value written or deleted, or the refusal.
        mutating func apply(_ update: Update, to key: [UInt8], _ now: VersionedValue?) -> Resolution? {
            switch update.compute(now?.value) {
            case .set(let value):
                if let problem = limits.problem(with: .put(key: key, value: value)) { return .refused(problem) }
                write(key, value, lease: update.keepsLifetime && now != nil ? nil : Lease.none)
                outcomes.append(.value(value))
            case .delete:
                if now != nil { write(key, nil) }
                outcomes.append(.value(nil))
            case .keep:
                outcomes.append(.value(now?.value))
            case .refuse(let error):
                return .refused(error)
            }
            return nil
        }

        /// A read of the whole namespace, as the steps before it leave it (a deadline's read is
        /// refused before it gets here).
        func read(_ read: NamespaceRead) -> Outcome {
            switch read {
            case .count: return .integer(state.values.reduce(0) { $0 + ($1 == nil ? 0 : 1) })
            case .entries: return .page(ScanPage(entries: liveEntries(of: state), next: .start))
            case .sample(let draw):
                var generator = DrawGenerator()
                return .page(ScanPage(entries: draw.draw(from: liveEntries(of: state), using: &generator), next: .start))
            case .deadline: preconditionFailure("a namespace's deadline is refused in cluster mode")
            }
        }

        /// HTTL's family: `key`'s deadline by now, -1 for none, -2 for an absent key.
        func deadline(of key: [UInt8]) -> Outcome {
            guard (state[key] ?? nil) != nil else { return .integer(-2) }
            let deadline = lifetime(of: key).deadline
            return .integer(deadline == 0 ? -1 : Int(clamping: deadline))
        }

        /// HEXPIRE's family, HGETEX: each key's new deadline (or its deletion), and the results.
        mutating func expire(_ expiry: KeyExpiry) -> Outcome {
            var results: [Outcome] = []
            for key in expiry.keys {
                let value = (state[key] ?? nil)?.value
                let before = value == nil ? nil : lifetime(of: key)
                let (result, after) = expiry.apply(to: before, now: clock, granularity: EtcdLeases.deadlineGranularity)
                results.append(expiry.yields == .values ? .value(value) : .integer(result.rawValue))
                switch result {
                case .deleted: write(key, nil)
                case .changed:
                    let deadline = after!.deadline
                    setLease(key, before!.owner != 0 ? .owned(deadline: deadline) : deadline == 0 ? Lease.none : .deadline(deadline))
                case .absent, .noDeadline, .conditionNotMet: break
                }
            }
            return .batch(results)
        }

        /// HSETEX: the keys written with the deadline (deleted by one already past), if the
        /// condition holds; `:1`, or `:0` with nothing written.
        mutating func setAll(_ setting: KeySetting) -> Outcome {
            guard setting.holds(where: { (state[$0] ?? nil) != nil }) else { return .integer(0) }
            let deadline = setting.absoluteDeadline(now: clock)
            for (key, value) in zip(setting.keys, setting.values) {
                if let deadline, deadline <= clock {
                    if (state[key] ?? nil) != nil { write(key, nil) }
                } else if let deadline {
                    write(key, value, lease: .deadline(deadline))
                } else {
                    write(key, value, lease: setting.deadline == .keep && (state[key] ?? nil) != nil ? nil : Lease.none)
                }
            }
            return .integer(1)
        }
    }

    /// The entries of `state` that hold a value, in key order (a whole namespace's, as the steps
    /// before the read left it).
    private static func liveEntries(of state: [[UInt8]: State]) -> [KeyValue] {
        state.compactMap { key, value in value.map { KeyValue(key: key, value: $0.value) } }
            .sorted { $0.key.lexicographicallyPrecedes($1.key) }
    }
}
