@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// A namespace's own deadline (``Operation/setNamespaceDeadline(_:)``, Redis's EXPIRE of a
/// hash): set and read under Redis's conditions, kept by writes, cleared when the last key goes,
/// logged and snapshotted, and, once passed, every key deleted as logged deletes.
@Suite("A namespace's own deadline")
struct NamespaceDeadlineTests {
    static let hour: UInt64 = 3_600_000

    private static func set(_ deadline: KeyExpiry.Deadline, _ condition: KeyExpiry.Condition = .always) -> ActorKVStore.Operation {
        .setNamespaceDeadline(NamespaceDeadline(deadline, condition: condition))
    }

    @Test("the rule: absent gets nothing, conditions as HEXPIRE's, a time already passed deletes, PERSIST removes")
    func rule() {
        let now: UInt64 = 1_000_000
        let change = { (d: KeyExpiry.Deadline, c: KeyExpiry.Condition, current: UInt64?) in NamespaceDeadline(d, condition: c).apply(to: current, now: now) }
        #expect(change(.after(milliseconds: 10), .always, nil) == (.absent, 0))
        #expect(change(.after(milliseconds: 10), .always, 0) == (.changed, now + 10))
        #expect(change(.after(milliseconds: 10), .noDeadline, now + 5) == (.conditionNotMet, now + 5))
        #expect(change(.after(milliseconds: 10), .hasDeadline, 0) == (.conditionNotMet, 0))
        #expect(change(.after(milliseconds: 10), .later, now + 5) == (.changed, now + 10))
        #expect(change(.after(milliseconds: 10), .earlier, now + 5) == (.conditionNotMet, now + 5))
        #expect(change(.at(milliseconds: 3), .always, now + 5) == (.deleted, nil))
        #expect(change(.none, .always, now + 5) == (.changed, 0))
        #expect(change(.none, .always, 0) == (.noDeadline, 0))
        #expect([KeyExpiry.Result.changed, .deleted, .absent, .noDeadline, .conditionNotMet].map(NamespaceDeadline.reply) == [1, 1, 0, 0, 0])
    }

    @Test("set, read and changed under each condition; none for a namespace without keys; writes keep it; nothing changed writes no record")
    func setAndRead() async throws {
        let dir = TemporaryDirectory("ns-deadline")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            #expect(await ns.execute([Self.set(.after(milliseconds: Self.hour)), .namespaceDeadline]).outcomes == [.integer(0), .integer(-2)])
            try await ns.put(b("a"), b("1"))
            #expect(await ns.execute([.namespaceDeadline]).outcomes == [.integer(-1)])
            let at = WallClock.milliseconds() + Self.hour
            let first = await ns.execute([Self.set(.at(milliseconds: at)), .namespaceDeadline, .put(key: b("b"), value: b("2")), .namespaceDeadline])
            #expect(first.outcomes == [.integer(1), .integer(Int(at)), .stored, .integer(Int(at))], "a write keeps it")
            let sequence = await ns.sequence
            let refused = await ns.execute([Self.set(.at(milliseconds: at + 1), .noDeadline), Self.set(.at(milliseconds: at - 1), .later),
                                            Self.set(.at(milliseconds: at + 1), .earlier)])
            #expect(refused.outcomes == [.integer(0), .integer(0), .integer(0)])
            #expect(await ns.sequence == sequence, "a change that does not hold writes nothing")
            let changed = await ns.execute([Self.set(.at(milliseconds: at + 1), .later), Self.set(.at(milliseconds: at - 1), .earlier),
                                            Self.set(.at(milliseconds: at), .hasDeadline), .namespaceDeadline])
            #expect(changed.outcomes == [.integer(1), .integer(1), .integer(1), .integer(Int(at))])
            #expect(await ns.sequence == sequence + 3, "one record each")
            #expect(await ns.execute([Self.set(.none), .namespaceDeadline, Self.set(.none), Self.set(.after(milliseconds: 5), .hasDeadline)]).outcomes
                    == [.integer(1), .integer(-1), .integer(0), .integer(0)])
            #expect(await ns.count() == 2)
        }
    }

    @Test("the last key's delete clears the deadline: a key written afterwards has none")
    func clearedWhenEmptied() async throws {
        let dir = TemporaryDirectory("ns-deadline-empty")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            try await ns.put(b("a"), b("1"))
            try await ns.put(b("b"), b("1"))
            #expect(await ns.execute([Self.set(.after(milliseconds: Self.hour))]).outcomes == [.integer(1)])
            _ = try await ns.delete([b("a")])
            #expect(await ns.execute([.namespaceDeadline]).outcomes != [.integer(-1)], "one key left: still there")
            _ = try await ns.delete([b("b")])
            try await ns.put(b("c"), b("1"))
            #expect(await ns.execute([.namespaceDeadline]).outcomes == [.integer(-1)])
        }
        // Replayed the same way.
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            #expect(await ns.execute([.namespaceDeadline]).outcomes == [.integer(-1)])
        }
    }

    @Test("once it passes, no read finds a key; the keys are deleted as logged deletes that a follower sees; a write after starts without a deadline")
    func expires() async throws {
        let dir = TemporaryDirectory("ns-deadline-expires")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            for i in 0..<2_500 { try await ns.put(b("k\(i)"), b("v")) }  // three records of deletes
            let start = try await ns.follow(from: .now)
            #expect(await ns.execute([Self.set(.after(milliseconds: 150))]).outcomes == [.integer(1)])
            let set = await ns.sequence
            try await Task.sleep(for: .milliseconds(200))
            #expect(await ns.get(b("k1")) == nil)
            #expect(await ns.count() == 0)
            #expect(await ns.scan().entries.isEmpty)
            #expect(await ns.execute([.namespaceDeadline, .getMany([b("k0"), b("k2499")]), .exists([b("k7")])]).outcomes
                    == [.integer(-2), .batch([.value(nil), .value(nil)]), .integer(0)])
            #expect(await ns.sequence == set + 3, "a thousand deletes a record")
            // Deliverable once durable (under `always`, after the fsync a background task waits for).
            var deleted = Set<[UInt8]>()
            var cursor = start.sequence
            let patience = ContinuousClock.now + .seconds(10)
            while deleted.count < 2_500 && ContinuousClock.now < patience {
                guard case .changes(let changes) = start.feed.read(after: cursor, limit: 10), let last = changes.last else {
                    try await Task.sleep(for: .milliseconds(10))
                    continue
                }
                for change in changes { change.forEachWrite { key, value in if value == nil { deleted.insert(Array(key)) } } }
                cursor = last.sequence
            }
            #expect(deleted.count == 2_500, "every key, as a delete")
            try await ns.put(b("new"), b("v"))
            #expect(await ns.execute([.namespaceDeadline]).outcomes == [.integer(-1)])
        }
    }

    @Test("a time already passed deletes every key at once, in the same run: reads after it in the run find none")
    func passedTimeDeletes() async throws {
        let dir = TemporaryDirectory("ns-deadline-passed")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            try await ns.put(b("a"), b("1"))
            let run = await ns.execute([.put(key: b("b"), value: b("2")), Self.set(.at(milliseconds: 1)), .count, .get(b("a")),
                                        .put(key: b("c"), value: b("3")), .namespaceDeadline, .count])
            #expect(run.outcomes == [.stored, .integer(1), .integer(0), .value(nil), .stored, .integer(-1), .integer(1)])
        }
    }

    @Test("in a batch (MULTI): a change sees the steps before it, keys they add or delete, and the deadline they give; a read of it sees it")
    func inABatch() async throws {
        let dir = TemporaryDirectory("ns-deadline-batch")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("h")
            let at = WallClock.milliseconds() + Self.hour
            let created = await ns.execute([.batch([.set(key: b("a"), value: b("1")), .setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: at))),
                                                    .read(.deadline), .setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: at + 5), condition: .noDeadline)),
                                                    .setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: at - 5), condition: .earlier)), .read(.deadline)])])
            #expect(created.outcomes == [.batch([.integer(1), .integer(1), .integer(Int(at)), .integer(0), .integer(1), .integer(Int(at - 5))])])
            // Emptied by the batch: nothing to give a deadline; refilled: one again.
            let emptied = await ns.execute([.batch([.delete(key: b("a")), .setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: at))),
                                                    .set(key: b("b"), value: b("2")), .setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: at))), .read(.deadline)])])
            #expect(emptied.outcomes == [.batch([.integer(1), .integer(0), .integer(1), .integer(1), .integer(Int(at))])])
            // A time already passed deletes every key there is at that step, the batch's own too.
            let gone = await ns.execute([.batch([.set(key: b("c"), value: b("3")), .setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: 1))),
                                                 .read(.count), .set(key: b("d"), value: b("4"))])])
            #expect(gone.outcomes == [.batch([.integer(1), .integer(1), .integer(0), .integer(1)])])
            #expect(await ns.scan().entries.map(\.key) == [b("d")])
            #expect(await ns.execute([.namespaceDeadline]).outcomes == [.integer(-1)])
        }
    }

    @Test("kept across a restart, from the log and from a snapshot; passed while closed: the keys are deleted when it opens")
    func durable() async throws {
        let dir = TemporaryDirectory("ns-deadline-durable")
        defer { dir.remove() }
        let at = WallClock.milliseconds() + Self.hour
        try await withStore(dir.data) { store in
            for name in ["logged", "snapshotted", "short"] {
                let ns = try await store.namespace(name)
                try await ns.put(b("a"), b("1"))
            }
            _ = await store.execute([Self.set(.at(milliseconds: at))], inNamespace: "logged")
            _ = await store.execute([Self.set(.at(milliseconds: at))], inNamespace: "snapshotted")
            try await store.namespace("snapshotted").compact()
            _ = await store.execute([Self.set(.after(milliseconds: 100))], inNamespace: "short")
        }
        let snapshot = try String(contentsOfFile: dir.data + "/snapshotted/snapshot.json", encoding: .utf8)
        #expect(snapshot.contains("\"deadline\":\(at),"))
        try await Task.sleep(for: .milliseconds(150))
        for compact in [false, true] {
            try await withStore(dir.data) { store in
                for name in ["logged", "snapshotted"] {
                    #expect(await store.execute([.namespaceDeadline, .count], inNamespace: name).outcomes == [.integer(Int(at)), .integer(1)], "\(name), compacted: \(compact)")
                    if !compact { try await store.namespace(name).compact() }
                }
                let short = try await store.namespace("short")
                #expect(await short.count() == 0)
                #expect(await short.execute([.namespaceDeadline]).outcomes == [.integer(-2)])
            }
        }
    }
}
