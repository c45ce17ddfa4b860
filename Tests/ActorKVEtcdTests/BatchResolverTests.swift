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
        #expect(result == .apply(writes: [(k("n"), k("15"), .asRead), (k("p"), nil, .none)],
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
            == .apply(writes: [(k("n"), k("3"), .asRead), (k("m"), k("6"), .none), (k("d"), k("1"), .none), (k("new"), k("1"), .none)],
                      outcomes: [.integer(2), .stored, .integer(6), .integer(1), .integer(1), .integer(1), .integer(3)]))
        // Equality compares the lease too.
        #expect(BatchResolver.Resolution.apply(writes: [(k("n"), k("3"), .asRead)], outcomes: [])
            != .apply(writes: [(k("n"), k("3"), .none)], outcomes: []))
        #expect(BatchResolver.Resolution.apply(writes: [(k("n"), k("3"), .deadline(1))], outcomes: [])
            != .apply(writes: [(k("n"), k("3"), .deadline(2))], outcomes: []))
    }

    /// The agent's resolver against the local engine, on random batches over random states
    /// (absent keys, integers, other values, keys with a deadline), with steps that change and
    /// read deadlines among them (HEXPIRE, HTTL, HSETEX, HGETEX in MULTI): the same outcome, the
    /// same values written, and the same deadline on each key afterwards. "The steps resolved as
    /// the local engine resolves them" (protocol.md, Cluster mode), checked. (Deadlines the
    /// steps give are whole seconds, as an agent keeps them, and absolute, so that the two
    /// readings of the clock do not matter.)
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
            var lifetimes: [[UInt8]: Lifetime] = [:]
            let before = try await deadlines(of: keys, in: ns)
            for key in keys {
                current[key] = await ns.versioned(key)
                if before[key]! > 0 { lifetimes[key] = Lifetime(deadline: UInt64(before[key]!)) }
            }
            let now = WallClock.milliseconds()
            let seconds: [UInt64] = [1000, (now / 1000 + 1800) * 1000, (now / 1000 + 7200) * 1000]  // past, before and after `hour`
            let steps: [BatchStep] = (0..<Int.random(in: 1...5, using: &random)).map { _ in
                let key = keys.randomElement(using: &random)!
                let some = Array(keys.shuffled(using: &random).prefix(Int.random(in: 1...3, using: &random)))
                let at = seconds.randomElement(using: &random)!
                switch Int.random(in: 0..<15, using: &random) {
                case 11:
                    let deadline: KeyExpiry.Deadline = [.at(milliseconds: at), .none, .after(milliseconds: 0)].randomElement(using: &random)!
                    let condition: KeyExpiry.Condition = [.always, .noDeadline, .hasDeadline, .later, .earlier].randomElement(using: &random)!
                    return .expire(KeyExpiry(keys: some + some.prefix(1), deadline: deadline, condition: condition,
                                             yields: Bool.random(using: &random) ? .results : .values))
                case 12: return .deadlines(some)
                case 13, 14:
                    let presence: KeySetting.Presence = [.any, .allAbsent, .allPresent].randomElement(using: &random)!
                    let deadline: KeySetting.Deadline = [.none, .keep, .at(milliseconds: at)].randomElement(using: &random)!
                    return .setAll(KeySetting(keys: some, values: some.map { _ in k("s\(round)") }, presence: presence, deadline: deadline))
                case 0: return .put(key: key, value: k("p"))
                // Updates (HINCRBYFLOAT's keeps the lease; others do not) that set, delete or keep.
                case 9, 10: return .update(key: key, Update(keepsLifetime: Bool.random(using: &random)) { old in
                    guard let old else { return .keep }
                    return old == k("p") ? .delete : .set(old + k("u"))
                })
                case 7: return .read(.count)
                // A draw of more distinct keys than the namespace holds ("z" too) is every entry, in key order.
                case 8: return Bool.random(using: &random) ? .read(.entries) : .read(.sample(.distinct(keys.count + 2)))
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
            let resolution = BatchResolver.resolve(steps, current: current, namespace: entries, lifetimes: lifetimes, now: now, limits: StoreLimits())
            let outcome = await ns.execute([.batch(steps)]).outcomes[0]
            let after = try await deadlines(of: keys, in: ns)
            switch resolution {
            case .conditionFailed: #expect(outcome == .conditionFailed, "round \(round)")
            case .refused(let error): #expect(outcome == .failure(error), "round \(round)")
            case .apply(let writes, let outcomes):
                #expect(outcome == .batch(outcomes), "round \(round)")
                for key in keys {
                    let entry = await ns.versioned(key)
                    guard let write = writes.first(where: { $0.key == key }) else {
                        #expect(entry == current[key] ?? nil && after[key] == before[key], "round \(round): an unwritten key changed")
                        continue
                    }
                    #expect(entry?.value == write.value, "round \(round)")
                    let expected: Int
                    switch write.lease {
                    case _ where write.value == nil: expected = -2
                    case .asRead: expected = before[key]! == -2 ? -1 : before[key]!
                    case .none: expected = -1
                    case .deadline(let deadline): expected = Int(deadline)
                    case .owned: expected = .min; Issue.record("round \(round): no key of a connection here, yet \(write)")
                    }
                    #expect(after[key] == expected, "round \(round): the deadline of \(key): \(steps)")
                }
            }
        }
        _ = await store.close()
    }

    /// Each key's deadline in `ns`, in milliseconds since the epoch: -1 none, -2 absent.
    private func deadlines(of keys: [[UInt8]], in ns: Namespace) async throws -> [[UInt8]: Int] {
        guard case .batch(let outcomes) = await ns.execute([.deadlines(keys)]).outcomes[0] else { throw StoreError(.invalidArgument, "no deadlines") }
        var out: [[UInt8]: Int] = [:]
        for (key, outcome) in zip(keys, outcomes) { if case .integer(let n) = outcome { out[key] = n } }
        return out
    }

    /// A key of a connection given another deadline, or none, keeps its owner: it is written
    /// with a lease of its connection's (``BatchResolver/Lease/owned(deadline:)``), which the
    /// agent asks of that connection; a step that judges it and changes nothing writes nothing.
    /// A deadline given by a step reads back as the end of its second.
    @Test func deadlinesOfOwnedKeysKeepTheirOwner() {
        let current = state([("e", "1", 3), ("d", "2", 4), ("o", "3", 5)])
        let lifetimes: [[UInt8]: Lifetime] = [k("e"): Lifetime(deadline: 0, owner: 1), k("d"): Lifetime(deadline: 5_000_000, owner: 0),
                                              k("o"): Lifetime(deadline: 6_000_000, owner: 1)]
        let expire = BatchStep.expire(KeyExpiry(keys: [k("e")], deadline: .at(milliseconds: 9_000_500)))
        #expect(BatchResolver.resolve([expire, .deadlines([k("e")])], current: current, lifetimes: lifetimes, now: 1000, limits: StoreLimits())
            == .apply(writes: [(k("e"), k("1"), .owned(deadline: 9_000_500))], outcomes: [.batch([.integer(1)]), .batch([.integer(9_001_000)])]))
        let persist = BatchStep.expire(KeyExpiry(keys: [k("e"), k("d"), k("o")], deadline: .none))
        #expect(BatchResolver.resolve([persist, .deadlines([k("e"), k("d"), k("o"), k("x")])], current: current, lifetimes: lifetimes, now: 1000, limits: StoreLimits())
            == .apply(writes: [(k("d"), k("2"), .none), (k("o"), k("3"), .owned(deadline: 0))],
                      outcomes: [.batch([.integer(-1), .integer(1), .integer(1)]), .batch([.integer(-1), .integer(-1), .integer(-1), .integer(-2)])]))
        let later = BatchStep.expire(KeyExpiry(keys: [k("d")], deadline: .at(milliseconds: 7_000_001)))
        #expect(BatchResolver.resolve([later, .deadlines([k("d")]), .increment(key: k("d"), by: 1)], current: current, lifetimes: lifetimes, now: 1000, limits: StoreLimits())
            == .apply(writes: [(k("d"), k("3"), .deadline(7_000_001))], outcomes: [.batch([.integer(1)]), .batch([.integer(7_001_000)]), .integer(3)]))
        #expect(BatchResolver.keys(of: [later, persist, .setAll(KeySetting(keys: [k("f")], values: [k("1")]))]) == [k("d"), k("e"), k("o"), k("f")])
    }

    @Test func guardsCompareVersionsAndAbsence() {
        let current = state([("a", "1", 7)])
        #expect(BatchResolver.resolve([.ifVersion(key: k("a"), 7), .put(key: k("b"), value: k("2"))], current: current, limits: StoreLimits())
            == .apply(writes: [(k("b"), k("2"), .none)], outcomes: [.stored, .stored]))
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
        #expect(resolution == .apply(writes: [(k("a"), k("1"), .none)], outcomes: [.stored, .stored]))
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
