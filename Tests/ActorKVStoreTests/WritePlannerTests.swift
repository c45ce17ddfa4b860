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

    @Test("random runs of puts, deletes, batches and updates equal a model applied one at a time, and reopen the same")
    func modelRuns() async throws {
        let dir = TemporaryDirectory("plan-model")
        defer { dir.remove() }
        var random = SeededGenerator(seed: 0x5eed_17)
        var model: [[UInt8]: [UInt8]] = [:]
        let keys = (0..<6).map { b("k\($0)") }
        func randomStep() -> BatchStep {
            let key = keys.randomElement(using: &random)!
            switch Int.random(in: 0..<3, using: &random) {
            case 0: return .put(key: key, value: b("v\(Int.random(in: 0..<100, using: &random))"))
            case 1: return .delete(key: key)
            default: return .update(key: key, Self.append("+"))
            }
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            for _ in 0..<300 {
                var operations: [Operation] = []
                for _ in 0..<Int.random(in: 1...12, using: &random) {
                    let key = keys.randomElement(using: &random)!
                    switch Int.random(in: 0..<5, using: &random) {
                    case 0: operations.append(.put(key: key, value: b("p\(Int.random(in: 0..<100, using: &random))")))
                    case 1: operations.append(.delete([key, keys.randomElement(using: &random)!]))
                    case 2: operations.append(.update(key: key, Self.append("u")))
                    case 3: operations.append(.batch((0..<Int.random(in: 1...4, using: &random)).map { _ in randomStep() }))
                    default: operations.append(.get(key[...]))
                    }
                }
                let run = await ns.execute(operations)
                try await run.durability.wait()
                let expected = operations.map { Self.apply($0, to: &model) }
                #expect(run.outcomes == expected, "run \(operations.count) operations")
            }
            #expect(await contents(ns) == model)
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("m")
            #expect(await contents(ns) == model)
        }
    }

    /// What `operation` yields applied alone to `model`, as the engine defines it.
    static func apply(_ operation: Operation, to model: inout [[UInt8]: [UInt8]]) -> Outcome {
        switch operation {
        case .get(let key): return .value(model[Array(key)])
        case .put(let key, let value):
            model[Array(key)] = Array(value)
            return .stored
        case .delete(let keys):
            return .integer(keys.reduce(0) { count, key in count + (model.removeValue(forKey: key) == nil ? 0 : 1) })
        case .update(let key, let update): return applyUpdate(key, update, to: &model)
        case .batch(let steps):
            return .batch(steps.map { step -> Outcome in
                switch step {
                case .put(let key, let value):
                    model[key] = value
                    return .stored
                case .delete(let key): return .integer(model.removeValue(forKey: key) == nil ? 0 : 1)
                case .update(let key, let update): return applyUpdate(key, update, to: &model)
                }
            })
        case .exists, .count, .scan: preconditionFailure("not generated")
        }
    }

    private static func applyUpdate(_ key: [UInt8], _ update: Update, to model: inout [[UInt8]: [UInt8]]) -> Outcome {
        switch update.compute(model[key]) {
        case .set(let value):
            model[key] = value
            return .value(value)
        case .delete:
            model[key] = nil
            return .value(nil)
        case .keep: return .value(model[key])
        case .refuse(let error): return .failure(error)
        }
    }
}
