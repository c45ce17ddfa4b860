import ActorKVStore
import ActorKVTestSupport
import Testing

/// The write planner: a write that reads state (an update) sees what the writes before it in the
/// same run, and the steps before it in the same batch, left, although none of them is applied
/// until the run's records are written. Checked one case at a time, against a model over random
/// runs, and after reopening (the log must replay to the same state).
@Suite("Write planner: writes that read see the run's earlier writes")
struct WritePlannerTests {
    /// Appends `suffix` to the value (absent: starts empty).
    static func append(_ suffix: String) -> Update {
        let bytes = Array(suffix.utf8)
        return Update { current in .set((current ?? []) + bytes) }
    }

    @Test("in one run: an update after a PUT, a DEL and another update of the same key sees each of them")
    func updateSeesEarlierWritesOfTheRun() async throws {
        let dir = TemporaryDirectory("plan-run")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("p")
            try await ns.put(b("k"), b("old"))
            let run = await ns.execute([
                .put(key: b("k"), value: b("a")),
                .update(key: b("k"), Self.append("b")),
                .update(key: b("k"), Self.append("c")),
                .get(b("k")),
                .delete([b("k")]),
                .update(key: b("k"), Self.append("z")),
                .batch([.put(key: b("j"), value: b("1")), .delete(key: b("k"))]),
                .update(key: b("j"), Self.append("2")),
            ])
            try await run.durability.wait()
            #expect(run.outcomes == [.stored, .value(b("ab")), .value(b("abc")), .value(b("abc")), .integer(1),
                                     .value(b("z")), .batch([.stored, .integer(1)]), .value(b("12"))])
            #expect(await ns.get(b("k")) == nil)
            #expect(await ns.get(b("j")) == b("12"))
        }
        // The log replays to the same state.
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("p")
            #expect(await ns.get(b("k")) == nil)
            #expect(await ns.get(b("j")) == b("12"))
        }
    }

    @Test("in one batch: each step sees the steps before it; a refusal applies and logs nothing")
    func stepsSeeEarlierSteps() async throws {
        let dir = TemporaryDirectory("plan-batch")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("b")
            try await ns.put(b("k"), b("1"))
            let outcomes = try await ns.apply(steps: [
                .update(key: b("k"), Self.append("2")),
                .put(key: b("n"), value: b("x")),
                .update(key: b("n"), Self.append("y")),
                .delete(key: b("k")),
                .update(key: b("k"), Update { .set($0 == nil ? b("was absent") : b("was there")) }),
                .update(key: b("gone"), Update { _ in .delete }),
                .update(key: b("n"), Update { _ in .keep }),
            ])
            #expect(outcomes == [.value(b("12")), .stored, .value(b("xy")), .integer(1), .value(b("was absent")),
                                 .value(nil), .value(b("xy"))])
            #expect(await contents(ns) == [b("k"): b("was absent"), b("n"): b("xy")])

            let log = dir.data + "/b/" + segmentFiles(dir.data + "/b").last!
            let length = logLength(log)
            let refusal = StoreError(.invalidArgument, "no")
            let error = await storeError {
                _ = try await ns.apply(steps: [.put(key: b("k"), value: b("new")), .update(key: b("n"), Update { _ in .refuse(refusal) })])
            }
            #expect(error == refusal)
            #expect(logLength(log) == length, "a refused batch writes no record")
            #expect(await contents(ns) == [b("k"): b("was absent"), b("n"): b("xy")])

            // Nothing to write (only keeps): no record either, and the outcome is the value.
            #expect(try await ns.apply(steps: [.update(key: b("n"), Update { _ in .keep })]) == [.value(b("xy"))])
            #expect(logLength(log) == length)
        }
    }

    @Test("an update's computed value is held to the limits; a refused update leaves the rest of the run alone")
    func limitsAndRefusals() async throws {
        let dir = TemporaryDirectory("plan-limits")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(limits: StoreLimits(maxValueBytes: 4))) { store in
            let ns = try await store.namespace("l")
            let run = await ns.execute([
                .put(key: b("k"), value: b("abc")),
                .update(key: b("k"), Self.append("de")),            // 5 bytes: too large
                .update(key: b("k"), Self.append("d")),             // 4 bytes: fine, sees "abc"
                .update(key: b("x"), Update { _ in .refuse(StoreError(.invalidArgument, "nope")) }),
                .put(key: b("y"), value: b("1")),
            ])
            try await run.durability.wait()
            guard case .failure(let tooBig) = run.outcomes[1] else { Issue.record("an oversized computed value was stored"); return }
            #expect(tooBig.code == .valueTooLarge)
            #expect(run.outcomes[2] == .value(b("abcd")))
            #expect(run.outcomes[3] == .failure(StoreError(.invalidArgument, "nope")))
            #expect(run.outcomes[4] == .stored)
            #expect(await contents(ns) == [b("k"): b("abcd"), b("y"): b("1")])
            #expect(try await ns.update(b("k")) { _ in nil } == nil)
            #expect(await ns.get(b("k")) == nil)
        }
    }

    @Test("concurrent read-modify-writes with Namespace.update lose nothing (the README's counter)")
    func concurrentUpdatesAddUp() async throws {
        let dir = TemporaryDirectory("plan-counter")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let counters = try await store.namespace("counters")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        try await counters.update(Array("visits".utf8)) { old in
                            Array(String((old.flatMap { Int(String(decoding: $0, as: UTF8.self)) } ?? 0) + 1).utf8)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(await counters.get(b("visits")) == b("200"))
        }
        try await withStore(dir.data) { store in
            let counters = try await store.namespace("counters")
            #expect(await counters.get(b("visits")) == b("200"))
        }
    }

    @Test("random runs of every write (guarded, counting, updating, HSET's set as an operation and as steps, setIfAbsent, WATCH's namespace guard) and read (the memory estimate too) equal a model applied one at a time, versions included, and reopen the same")
    func modelRuns() async throws {
        let dir = TemporaryDirectory("plan-model")
        defer { dir.remove() }
        var random = SeededGenerator(seed: 0x5eed_18)
        var model = Model()
        // Few keys, so that runs often empty the namespace (which clears its deadline).
        let keys = (0..<3).map { b("k\($0)") }
        func value() -> [UInt8] {
            Bool.random(using: &random) ? b("\(Int.random(in: -3...3, using: &random))") : b("p\(Int.random(in: 0..<100, using: &random))")
        }
        /// A version that holds about half the time.
        func guardVersion(_ key: [UInt8]) -> UInt64 {
            Bool.random(using: &random) ? model.entries[key]?.version ?? 0 : UInt64.random(in: 0...3, using: &random)
        }
        func randomStep() -> BatchStep {
            let key = keys.randomElement(using: &random)!
            switch Int.random(in: 0..<10, using: &random) {
            case 0: return .put(key: key, value: value())
            case 8: return .read(.count)
            // A draw of at least as many distinct keys as there can be is every entry, in key order.
            case 9: return Bool.random(using: &random) ? .read(.entries) : .read(.sample(.distinct(keys.count + Int.random(in: 0...2, using: &random))))
            case 1: return .delete(key: key)
            case 2: return .increment(key: key, by: Int64.random(in: -5...5, using: &random))
            case 3: return .ifVersion(key: key, guardVersion(key))
            case 4: return .set(key: key, value: value())
            case 5: return .setIfAbsent(key: key, value: value())
            // The namespace unchanged since before the run: holds when nothing before it in the run wrote.
            case 6: return .unchangedSince(Bool.random(using: &random) ? model.sequence : UInt64.random(in: 0...3, using: &random))
            case 7 where Int.random(in: 0..<2, using: &random) == 0:
                return Bool.random(using: &random) ? .setNamespaceDeadline(namespaceDeadline()) : .read(.deadline)
            default: return .update(key: key, Self.append("+"))
            }
        }
        // The namespace's own deadline: two far off (never passing in the test), one passed
        // (every key deleted), none; under any condition.
        let far = WallClock.milliseconds() + 3_600_000
        func namespaceDeadline() -> NamespaceDeadline {
            let deadline: KeyExpiry.Deadline = [.at(milliseconds: far), .at(milliseconds: far + 1_000), .at(milliseconds: 1), .none].randomElement(using: &random)!
            let condition: KeyExpiry.Condition = [.always, .always, .noDeadline, .hasDeadline, .later, .earlier].randomElement(using: &random)!
            return NamespaceDeadline(deadline, condition: condition)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            for _ in 0..<800 {
                var operations: [Operation] = []
                for _ in 0..<Int.random(in: 1...12, using: &random) {
                    let key = keys.randomElement(using: &random)!
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0: operations.append(.put(key: key, value: value()))
                    case 9: operations.append(.getMany([key, keys.randomElement(using: &random)!]))
                    case 8: operations.append(.set(key: key[...], value: value()[...]))
                    case 1: operations.append(.delete([key, keys.randomElement(using: &random)!]))
                    case 2: operations.append(.update(key: key, Self.append("u")))
                    case 3: operations.append(.batch((0..<Int.random(in: 1...4, using: &random)).map { _ in randomStep() }))
                    case 4: operations.append(.increment(key: key, by: Int64.random(in: -5...5, using: &random)))
                    case 5: operations.append(.conditionalPut(key: key, value: value()[...], ifVersion: guardVersion(key)))
                    case 6 where Bool.random(using: &random):
                        operations.append(Bool.random(using: &random) ? .setNamespaceDeadline(namespaceDeadline()) : .namespaceDeadline)
                    case 6: operations.append(.getVersioned(key[...]))
                    case 7 where Int.random(in: 0..<3, using: &random) == 0:
                        // HGETALL's packed read, sometimes over its limit (the page instead).
                        let parts = [EntryParts.keys, .values, .both].randomElement(using: &random)!
                        let bound = Bool.random(using: &random) ? PackingBound.none
                            : PackingBound(totalBytes: Int.random(in: 0...20, using: &random), bytesPerKey: Int.random(in: 2...6, using: &random))
                        operations.append(.packedEntries(parts, within: bound))
                    // The memory estimate, from figures kept as the run's writes apply.
                    case 7 where Bool.random(using: &random): operations.append(.memoryUsage)
                    default: operations.append(.get(key[...]))
                    }
                }
                let run = await ns.execute(operations)
                try await run.durability.wait()
                // Guards were drawn from the model before the run: apply it in order now.
                let expected = operations.map { model.apply($0) }
                #expect(run.outcomes == expected, "run \(operations.count) operations")
            }
            #expect(await versionedContents(ns) == model.entries)
            #expect(await ns.execute([.namespaceDeadline]).outcomes == [model.deadlineOutcome])
        }
        try await withStore(dir.data) { store in
            let reopened = try await store.namespace("m")
            #expect(await versionedContents(reopened) == model.entries)
            #expect(await reopened.execute([.namespaceDeadline]).outcomes == [model.deadlineOutcome])
        }
    }

    /// Every key's value and version.
    func versionedContents(_ ns: Namespace) async -> [[UInt8]: VersionedValue] {
        var all: [[UInt8]: VersionedValue] = [:]
        for (key, _) in await contents(ns) { all[key] = await ns.versioned(key) }
        return all
    }

    /// The engine's semantics one operation at a time: values, versions (the number of the
    /// record that last wrote a key), which operations write a record at all, and the keys'
    /// lifetimes (whether a deadline is set, far enough off never to pass in a test; the owner).
    struct Model {
        var entries: [[UInt8]: VersionedValue] = [:]
        var sequence: UInt64 = 0
        /// The keys that have a lifetime.
        var lifetimes: [[UInt8]: ModelLifetime] = [:]

        /// A key's lifetime as the model sees it.
        struct ModelLifetime: Equatable {
            var hasDeadline: Bool
            var owner: UInt64
        }

        /// The namespace's own deadline (0: none), as ``NamespaceDeadline`` sets it; cleared
        /// whenever no key is left.
        var namespaceDeadline: UInt64 = 0

        /// What reading the namespace's deadline yields.
        var deadlineOutcome: Outcome {
            .integer(entries.isEmpty ? -2 : namespaceDeadline == 0 ? -1 : Int(namespaceDeadline))
        }

        /// What `operation` yields applied alone; a namespace left without keys has no deadline.
        mutating func apply(_ operation: Operation) -> Outcome {
            let outcome = applyOne(operation)
            if entries.isEmpty { namespaceDeadline = 0 }
            return outcome
        }

        /// A change of the namespace's deadline, in a record of its own when it changes anything.
        private mutating func change(_ change: NamespaceDeadline) -> Outcome {
            let (result, target) = change.apply(to: entries.isEmpty ? nil : namespaceDeadline, now: WallClock.milliseconds())
            switch result {
            case .changed: namespaceDeadline = target ?? 0
            case .deleted: (entries, lifetimes, namespaceDeadline) = ([:], [:], 0)
            case .absent, .noDeadline, .conditionNotMet: return .integer(0)
            }
            sequence += 1
            return .integer(1)
        }

        private mutating func applyOne(_ operation: Operation) -> Outcome {
            switch operation {
            case .setNamespaceDeadline(let deadline): return change(deadline)
            case .namespaceDeadline: return deadlineOutcome
            case .get(let key): return .value(entries[Array(key)]?.value)
            case .getVersioned(let key): return .versioned(entries[Array(key)])
            case .getMany(let keys): return .batch(keys.map { .value(entries[Array($0)]?.value) })
            case .put(let key, let value): return apply(steps: [.put(key: Array(key), value: Array(value))], single: true)
            case .set(let key, let value): return apply(steps: [.set(key: Array(key), value: Array(value))], single: true)
            case .delete(let keys):
                guard case .batch(let results) = apply(steps: keys.map { .delete(key: $0) }, single: false) else { return .conditionFailed }
                return .integer(results.reduce(0) { if case .integer(let n) = $1 { return $0 + n }; return $0 })
            case .update(let key, let update): return apply(steps: [.update(key: key, update)], single: true)
            case .increment(let key, let delta): return apply(steps: [.increment(key: key, by: delta)], single: true)
            case .conditionalPut(let key, let value, let version):
                let outcome = apply(steps: [.ifVersion(key: key, version), .put(key: key, value: Array(value))], single: false)
                guard case .batch = outcome else { return outcome }
                return .version(sequence)
            case .batch(let steps): return apply(steps: steps, single: false)
            case .lifetimePut(let put):
                if let expected = put.ifVersion, (entries[put.key]?.version ?? 0) != expected { return .conditionFailed }
                sequence += 1
                entries[put.key] = VersionedValue(value: Array(put.value), version: sequence)
                lifetimes[put.key] = ModelLifetime(hasDeadline: put.milliseconds > 0, owner: put.owner)
                return put.ifVersion == nil ? .stored : .version(sequence)
            case .setTimeToLive(let key, let milliseconds):
                guard entries[key] != nil else { return .integer(0) }
                var lifetime = lifetimes[key] ?? ModelLifetime(hasDeadline: false, owner: 0)
                if let milliseconds {
                    guard milliseconds > 0 else {
                        sequence += 1
                        (entries[key], lifetimes[key]) = (nil, nil)
                        return .integer(1)
                    }
                    lifetime.hasDeadline = true
                } else {
                    guard lifetime.hasDeadline else { return .integer(0) }
                    lifetime.hasDeadline = false
                }
                // A record of its own, but the key keeps its value and version.
                sequence += 1
                lifetimes[key] = lifetime.hasDeadline || lifetime.owner != 0 ? lifetime : nil
                return .integer(1)
            case .expire(let expiry):
                // Generated with deadlines an hour away, 0 (delete) or none, and conditions
                // that look only at whether a key has a deadline: the model keeps no times.
                var results: [Outcome] = []
                var changed = false
                for key in expiry.keys {
                    // HGETEX's outcome: each key's value before the change.
                    let before = entries[key]?.value
                    func yield(_ result: Int) { results.append(expiry.yields == .values ? .value(before) : .integer(result)) }
                    guard entries[key] != nil else { yield(-2); continue }
                    var lifetime = lifetimes[key] ?? ModelLifetime(hasDeadline: false, owner: 0)
                    if expiry.deadline == .none {
                        guard lifetime.hasDeadline else { yield(-1); continue }
                        lifetime.hasDeadline = false
                    } else {
                        let holds = switch expiry.condition {
                        case .always: true
                        case .noDeadline: !lifetime.hasDeadline
                        case .hasDeadline: lifetime.hasDeadline
                        case .later, .earlier: preconditionFailure("not generated")
                        }
                        guard holds else { yield(0); continue }
                        if expiry.deadline == .after(milliseconds: 0) {
                            (entries[key], lifetimes[key], changed) = (nil, nil, true)
                            yield(2)
                            continue
                        }
                        lifetime.hasDeadline = true
                    }
                    lifetimes[key] = lifetime.hasDeadline || lifetime.owner != 0 ? lifetime : nil
                    changed = true
                    yield(1)
                }
                // One record for all the keys, none when nothing changed; values and versions stay.
                if changed { sequence += 1 }
                return .batch(results)
            case .setAll(let setting):
                // HSETEX, generated with deadlines an hour away, 0 (delete), none or keep.
                guard setting.holds(where: { entries[$0] != nil }) else { return .integer(0) }
                let version = sequence + 1
                let before = lifetimes
                var changed = false
                for (key, value) in zip(setting.keys, setting.values) {
                    if setting.deadline == .after(milliseconds: 0) {
                        if entries[key] != nil { (entries[key], lifetimes[key], changed) = (nil, nil, true) }
                        continue
                    }
                    changed = true
                    let existed = entries[key] != nil
                    entries[key] = VersionedValue(value: value, version: version)
                    switch setting.deadline {
                    case .keep: lifetimes[key] = existed ? before[key] : nil
                    case .after: lifetimes[key] = ModelLifetime(hasDeadline: true, owner: 0)
                    case .none, .at: lifetimes[key] = nil
                    }
                }
                if changed { sequence = version }
                return .integer(1)
            case .packedEntries(let parts, let bound):
                let sorted = entries.keys.sorted { $0.lexicographicallyPrecedes($1) }.map { KeyValue(key: $0, value: entries[$0]!.value) }
                let bytes = sorted.reduce(0) { $0 + $1.key.count + $1.value.count }
                guard bound.allows(bytes: bytes, keys: sorted.count) else { return .page(ScanPage(entries: sorted, next: .start)) }
                return .strings(parts.packed(sorted))
            case .memoryUsage:
                guard !entries.isEmpty else { return .integer(0) }
                let bytes = entries.reduce(0) { $0 + $1.key.count + $1.value.value.count }
                return .integer(MemoryEstimate(keys: entries.count, keyAndValueBytes: bytes, keysWithLifetimes: lifetimes.count).bytes)
            case .exists, .count, .scan, .sample, .timeToLive, .deadlines: preconditionFailure("not generated")
            }
        }

        /// The state after a restart: the keys owned by a connection are deleted as the
        /// namespace opens (their connections are gone).
        func reopened() -> Model {
            var model = self
            for (key, lifetime) in lifetimes where lifetime.owner != 0 { (model.entries[key], model.lifetimes[key]) = (nil, nil) }
            return model
        }

        /// Applies steps all or nothing, as one record if anything is written.
        private mutating func apply(steps: [BatchStep], single: Bool) -> Outcome {
            var next = entries
            var nextLifetimes = lifetimes
            var nextDeadline = namespaceDeadline
            var wrote = false
            var results: [Outcome] = []
            let version = sequence + 1
            for step in steps {
                if next.isEmpty { nextDeadline = 0 }  // emptied by the steps before
                switch step {
                case .put(let key, let value):
                    next[key] = VersionedValue(value: value, version: version)
                    nextLifetimes[key] = nil
                    wrote = true
                    results.append(.stored)
                case .delete(let key):
                    // A key that is not there is not deleted: no record for it.
                    let removed = next.removeValue(forKey: key) != nil
                    results.append(.integer(removed ? 1 : 0))
                    nextLifetimes[key] = nil
                    if removed { wrote = true }
                case .ifVersion(let key, let expected):
                    guard (next[key]?.version ?? 0) == expected else { return .conditionFailed }
                    results.append(.stored)
                case .unchangedSince(let expected):
                    guard sequence == expected else { return .conditionFailed }
                    results.append(.stored)
                case .read(.count):
                    results.append(.integer(next.count))
                case .read(.entries), .read(.sample(.distinct)):
                    let sorted = next.keys.sorted { $0.lexicographicallyPrecedes($1) }
                    results.append(.page(ScanPage(entries: sorted.map { KeyValue(key: $0, value: next[$0]!.value) }, next: .start)))
                case .set(let key, let value):
                    results.append(.integer(next[key] == nil ? 1 : 0))
                    next[key] = VersionedValue(value: value, version: version)
                    nextLifetimes[key] = nil
                    wrote = true
                case .setIfAbsent(let key, let value):
                    guard next[key] == nil else { results.append(.integer(0)); continue }
                    next[key] = VersionedValue(value: value, version: version)
                    nextLifetimes[key] = nil
                    wrote = true
                    results.append(.integer(1))
                case .increment(let key, let delta):
                    var base: Int64 = 0
                    if let old = next[key] {
                        guard let parsed = Int64(String(decoding: old.value, as: UTF8.self)), String(parsed) == String(decoding: old.value, as: UTF8.self) else {
                            return .failure(StoreError(.notAnInteger, "value is not an integer"))
                        }
                        base = parsed
                    } else {
                        nextLifetimes[key] = nil  // a new counter; one that exists keeps its lifetime
                    }
                    next[key] = VersionedValue(value: Array(String(base + delta).utf8), version: version)
                    wrote = true
                    results.append(.integer(Int(base + delta)))
                case .update(let key, let update):
                    switch update.compute(next[key]?.value) {
                    case .set(let value):
                        next[key] = VersionedValue(value: value, version: version)
                        nextLifetimes[key] = nil
                        wrote = true
                        results.append(.value(value))
                    case .delete:
                        if next.removeValue(forKey: key) != nil { wrote = true }
                        nextLifetimes[key] = nil
                        results.append(.value(nil))
                    case .keep: results.append(.value(next[key]?.value))
                    case .refuse(let error): return .failure(error)
                    }
                case .expire, .setAll:
                    // As the operation would, over the state the steps before it leave, in the batch's record.
                    var inner = self
                    (inner.entries, inner.lifetimes) = (next, nextLifetimes)
                    let operation: Operation
                    switch step {
                    case .expire(let expiry): operation = .expire(expiry)
                    case .setAll(let setting): operation = .setAll(setting)
                    default: preconditionFailure("unreachable")
                    }
                    results.append(inner.apply(operation))
                    if inner.sequence != sequence { wrote = true }
                    (next, nextLifetimes) = (inner.entries, inner.lifetimes)
                case .setNamespaceDeadline(let deadline):
                    var inner = self
                    (inner.entries, inner.lifetimes, inner.namespaceDeadline) = (next, nextLifetimes, nextDeadline)
                    results.append(inner.change(deadline))
                    if inner.sequence != sequence { wrote = true }
                    (next, nextLifetimes, nextDeadline) = (inner.entries, inner.lifetimes, inner.namespaceDeadline)
                case .read(.deadline):
                    results.append(.integer(next.isEmpty ? -2 : nextDeadline == 0 ? -1 : Int(nextDeadline)))
                case .deadlines: preconditionFailure("not generated: the model keeps no times")
                case .read(.sample): preconditionFailure("not generated: only draws of every entry")
                }
            }
            entries = next
            lifetimes = nextLifetimes
            namespaceDeadline = nextDeadline
            if wrote { sequence = version }
            return single ? results[0] : .batch(results)
        }
    }
}
