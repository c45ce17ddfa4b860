import ActorKVEtcd
import ActorKVStore
import ActorKVTestSupport
import Testing

/// Batches resolved against keys read from etcd give what the local engine's planner gives.
@Suite struct BatchResolverTests {
    private func k(_ s: String) -> [UInt8] { Array(s.utf8) }
    private func state(_ pairs: [(String, String, UInt64)]) -> [[UInt8]: BatchResolver.State] {
        var out: [[UInt8]: BatchResolver.State] = [:]
        for (key, value, version) in pairs { out[k(key)] = VersionedValue(value: k(value), version: version) }
        return out
    }

    @Test func stepsSeeTheStepsBeforeThem() {
        let steps: [BatchStep] = [.increment(key: k("n"), by: 2), .increment(key: k("n"), by: 3), .delete(key: k("gone")),
                                  .setIfAbsent(key: k("n"), value: k("x")), .put(key: k("p"), value: k("v")), .delete(key: k("p"))]
        let result = BatchResolver.resolve(steps, current: state([("n", "10", 4)]), limits: StoreLimits())
        #expect(result == .apply(writes: [(k("n"), k("15"), true), (k("p"), nil, false)],
                                 outcomes: [.integer(12), .integer(15), .integer(0), .integer(0), .stored, .integer(1)]))
        #expect(BatchResolver.keys(of: steps) == [k("n"), k("gone"), k("p")])
    }

    /// An INCR keeps its key's deadline and owner (its etcd lease), as locally; a PUT, or an
    /// INCR of an absent key, writes the key without one.
    @Test func incrementsOfExistingValuesKeepTheLease() {
        let current = state([("n", "1", 3), ("m", "1", 4), ("d", "1", 5)])
        let steps: [BatchStep] = [.increment(key: k("n"), by: 1), .put(key: k("m"), value: k("5")), .increment(key: k("m"), by: 1),
                                  .delete(key: k("d")), .increment(key: k("d"), by: 1), .increment(key: k("new"), by: 1),
                                  .increment(key: k("n"), by: 1)]
        #expect(BatchResolver.resolve(steps, current: current, limits: StoreLimits())
            == .apply(writes: [(k("n"), k("3"), true), (k("m"), k("6"), false), (k("d"), k("1"), false), (k("new"), k("1"), false)],
                      outcomes: [.integer(2), .stored, .integer(6), .integer(1), .integer(1), .integer(1), .integer(3)]))
        // Equality compares the flag too.
        #expect(BatchResolver.Resolution.apply(writes: [(k("n"), k("3"), true)], outcomes: [])
            != .apply(writes: [(k("n"), k("3"), false)], outcomes: []))
    }

    /// The agent's resolver against the local engine, on random batches over random states
    /// (absent keys, integers, other values, keys with a deadline): the same outcome, the same
    /// values written, and a deadline kept exactly where the local engine keeps one. "The steps
    /// resolved as the local engine resolves them" (protocol.md, Cluster mode), checked.
    @Test func agreesWithTheLocalEngine() async throws {
        let dir = TemporaryDirectory("resolver-vs-engine")
        defer { dir.remove() }
        let store = try Store(directory: dir.data)
        let ns = try await store.namespace("r")
        var random = SeededGenerator(seed: 0xe7cd_23)
        let keys = ["a", "b", "c"].map(k)
        let hour: UInt64 = 3_600_000
        for round in 0..<300 {
            // A random state: each key absent, an integer, or another value; some with a deadline.
            // "z" is never a step's key: only reads of the whole namespace see it.
            var setup: [Operation] = [.delete(keys), .put(key: k("z"), value: k("\(round)"))]
            for key in keys {
                let value: [UInt8]
                switch Int.random(in: 0..<4, using: &random) {
                case 0: continue
                case 1: value = k("x\(round)")
                default: value = k("\(Int.random(in: -3...3, using: &random))")
                }
                setup.append(Bool.random(using: &random) ? .lifetimePut(LifetimePut(key: key, value: value, milliseconds: hour)) : .put(key: key, value: value))
            }
            _ = await ns.execute(setup)
            var current: [[UInt8]: BatchResolver.State] = [:]
            var hadDeadline: [[UInt8]: Bool] = [:]
            for key in keys {
                current[key] = await ns.versioned(key)
                hadDeadline[key] = await ns.timeToLive(key) > 0
            }
            let steps: [BatchStep] = (0..<Int.random(in: 1...5, using: &random)).map { _ in
                let key = keys.randomElement(using: &random)!
                switch Int.random(in: 0..<11, using: &random) {
                case 0: return .put(key: key, value: k("p"))
                // Updates (HINCRBYFLOAT's keeps the lease; others do not) that set, delete or keep.
                case 9, 10: return .update(key: key, Update(keepsLifetime: Bool.random(using: &random)) { old in
                    guard let old else { return .keep }
                    return old == k("p") ? .delete : .set(old + k("u"))
                })
                case 7: return .read(.count)
                case 8: return .read(.entries)
                case 1: return .delete(key: key)
                case 2: return .set(key: key, value: k("\(Int.random(in: 0...9, using: &random))"))
                case 3: return .setIfAbsent(key: key, value: k("n"))
                case 4: return .ifVersion(key: key, Bool.random(using: &random) ? (current[key]??.version ?? 0) : 0)
                default: return .increment(key: key, by: Int64.random(in: -2...2, using: &random))
                }
            }
            // The namespace's entries as the agent reads them with the keys, "z" among them.
            var entries: [[UInt8]: VersionedValue] = [:]
            for key in keys + [k("z")] { entries[key] = await ns.versioned(key) }
            let resolution = BatchResolver.resolve(steps, current: current, namespace: entries, limits: StoreLimits())
            let outcome = await ns.execute([.batch(steps)]).outcomes[0]
            switch resolution {
            case .conditionFailed: #expect(outcome == .conditionFailed, "round \(round)")
            case .refused(let error): #expect(outcome == .failure(error), "round \(round)")
            case .apply(let writes, let outcomes):
                #expect(outcome == .batch(outcomes), "round \(round)")
                for key in keys {
                    let after = await ns.versioned(key)
                    let deadline = await ns.timeToLive(key) > 0
                    guard let write = writes.first(where: { $0.key == key }) else {
                        #expect(after == current[key] ?? nil && deadline == hadDeadline[key], "round \(round): an unwritten key changed")
                        continue
                    }
                    #expect(after?.value == write.value, "round \(round)")
                    #expect(deadline == (write.value != nil && write.keepsLease && hadDeadline[key]!), "round \(round): the deadline of \(key)")
                }
            }
        }
        _ = await store.close()
    }

    @Test func guardsCompareVersionsAndAbsence() {
        let current = state([("a", "1", 7)])
        #expect(BatchResolver.resolve([.ifVersion(key: k("a"), 7), .put(key: k("b"), value: k("2"))], current: current, limits: StoreLimits())
            == .apply(writes: [(k("b"), k("2"), false)], outcomes: [.stored, .stored]))
        #expect(BatchResolver.resolve([.ifVersion(key: k("a"), 6), .put(key: k("b"), value: k("2"))], current: current, limits: StoreLimits())
            == .conditionFailed)
        #expect(BatchResolver.resolve([.ifVersion(key: k("b"), 0)], current: current, limits: StoreLimits()) == .apply(writes: [], outcomes: [.stored]))
        // A guard after a write to its key in the same batch sees that write.
        #expect(BatchResolver.resolve([.put(key: k("b"), value: k("x")), .ifVersion(key: k("b"), 0)], current: current, limits: StoreLimits())
            == .conditionFailed)
    }

    @Test func refusalsWriteNothing() {
        let current = state([("s", "abc", 1), ("max", String(Int64.max), 2)])
        #expect(BatchResolver.resolve([.put(key: k("x"), value: k("1")), .increment(key: k("s"), by: 1)], current: current, limits: StoreLimits())
            == .refused(StoreError(.notAnInteger, "value is not an integer")))
        #expect(BatchResolver.resolve([.increment(key: k("max"), by: 1)], current: current, limits: StoreLimits())
            == .refused(StoreError(.overflow, "increment or decrement would overflow")))
        let big = Update { _ in .set([UInt8](repeating: 1, count: 11)) }
        guard case .refused(let error) = BatchResolver.resolve([.update(key: k("u"), big)], current: [:], limits: StoreLimits(maxValueBytes: 10)) else {
            Issue.record("an update computing a value over the limit must be refused")
            return
        }
        #expect(error.code == .valueTooLarge)
    }

    @Test func watchGuardIsLeftToTheTransaction() {
        // The guard writes nothing and reads no key: EtcdStore compares the namespace's range.
        let resolution = BatchResolver.resolve([.unchangedSince(3), .put(key: k("a"), value: k("1"))], current: [:], limits: StoreLimits())
        #expect(resolution == .apply(writes: [(k("a"), k("1"), false)], outcomes: [.stored, .stored]))
        #expect(BatchResolver.keys(of: [.unchangedSince(3), .put(key: k("a"), value: k("1"))]) == [k("a")])
    }
}

/// Which operations of a run share one etcd transaction.
@Suite struct TransactionGroupingTests {
    private func k(_ s: String) -> [UInt8] { Array(s.utf8) }

    @Test func plainOperationsGroupUntilAKeyRepeatsOrAReadFollowsItsWrite() {
        let ops: [Operation] = [.get(k("a")), .put(key: k("b"), value: k("1")), .exists([k("a"), k("a")]), .delete([k("c"), k("c")]),
                                .get(k("b")), .put(key: k("d"), value: k("2"))]
        // The GET of b after the PUT of b starts a new group.
        #expect(TransactionGrouping.end(of: ops, from: 0, limits: StoreLimits(), maxRequests: 128) == 4)
        #expect(TransactionGrouping.end(of: ops, from: 4, limits: StoreLimits(), maxRequests: 128) == 6)
        let twice: [Operation] = [.put(key: k("a"), value: k("1")), .put(key: k("a"), value: k("2"))]
        #expect(TransactionGrouping.end(of: twice, from: 0, limits: StoreLimits(), maxRequests: 128) == 1)
    }

    @Test func readModifyWritesAndOversizedGroupsRunAlone() {
        let ops: [Operation] = [.put(key: k("a"), value: k("1")), .increment(key: k("n"), by: 1), .get(k("x"))]
        #expect(TransactionGrouping.end(of: ops, from: 0, limits: StoreLimits(), maxRequests: 128) == 1)
        #expect(TransactionGrouping.end(of: ops, from: 1, limits: StoreLimits(), maxRequests: 128) == 2)
        let many = (0..<10).map { Operation.get(k("k\($0)")) }
        #expect(TransactionGrouping.end(of: many, from: 0, limits: StoreLimits(), maxRequests: 4) == 4)
        let bad: [Operation] = [.get(k("a")), .get([]), .get(k("b"))]
        #expect(TransactionGrouping.end(of: bad, from: 0, limits: StoreLimits(), maxRequests: 128) == 1)
        #expect(TransactionGrouping.unique([k("a"), k("b"), k("a")]) == [k("a"), k("b")])
    }

    @Test func batchesThatOnlyWriteGroupWithPlainOperations() {
        let hset = Operation.batch([.set(key: k("f1"), value: k("1")), .set(key: k("f2"), value: k("2"))])
        let hsetTwice = Operation.batch([.set(key: k("f1"), value: k("1")), .set(key: k("f1"), value: k("2"))])
        let guarded = Operation.batch([.ifVersion(key: k("a"), 3), .put(key: k("b"), value: k("1"))])
        #expect(TransactionGrouping.blindKeys([.set(key: k("a"), value: []), .delete(key: k("b")), .put(key: k("c"), value: [])]) == [k("a"), k("b"), k("c")])
        #expect(TransactionGrouping.blindKeys([.set(key: k("a"), value: []), .delete(key: k("a"))]) == nil, "a key twice needs the read")
        #expect(TransactionGrouping.blindKeys([.increment(key: k("a"), by: 1)]) == nil)
        let ops: [Operation] = [hset, .get(k("x")), .batch([.set(key: k("f3"), value: k("3"))]), .get(k("f1"))]
        // The GET of f1 after HSET wrote it starts a new group.
        #expect(TransactionGrouping.end(of: ops, from: 0, limits: StoreLimits(), maxRequests: 128) == 3)
        #expect(TransactionGrouping.end(of: [hsetTwice, .get(k("x"))], from: 0, limits: StoreLimits(), maxRequests: 128) == 1)
        #expect(TransactionGrouping.end(of: [guarded, .get(k("x"))], from: 0, limits: StoreLimits(), maxRequests: 128) == 1)
        // A one-field HSET (a set operation) groups like a PUT: until its field is read or written again.
        let sets: [Operation] = [.set(key: k("f1")[...], value: k("1")[...]), .get(k("x")), .set(key: k("f2")[...], value: k("2")[...]),
                                 .set(key: k("f1")[...], value: k("3")[...])]
        #expect(TransactionGrouping.end(of: sets, from: 0, limits: StoreLimits(), maxRequests: 128) == 3)
    }
}
