@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The once-a-second background work (the `everysec` fsync, the periodic compaction) looks only
/// at the namespaces that have something to do, not at every open one: an operator audit found
/// 10,000 idle namespaces costing 15% of a core, every one of them visited every second. These
/// tests count the housekeeper's own bookkeeping, never time: the rounds are run by the test
/// (``Housekeeper/tick(now:)``, with the automatic ticks off), except in the last one.
@Suite("Housekeeper: background work only for namespaces that have some")
struct HousekeeperTests {
    private func manualOptions(_ durability: DurabilityPolicy, interval: Double) -> StoreOptions {
        var options = testOptions(durability)
        options.compaction = CompactionPolicy(interval: interval)
        options.housekeepingTicks = false
        return options
    }

    private static func eventually(_ condition: () async -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        return await condition()
    }

    @Test("everysec: written namespaces are fsync'd, then left alone; a later write brings back only its own")
    func idleNamespacesAreNotLookedAt() async throws {
        let dir = TemporaryDirectory("keeper-idle")
        defer { dir.remove() }
        try await withStore(dir.data, manualOptions(.everysec, interval: 0)) { store in
            var all: [Namespace] = []
            for i in 0..<40 {
                let ns = try await store.namespace("n\(i)")
                try await ns.put(b("k"), b("v"))
                all.append(ns)
            }
            let keeper = store.keeper
            #expect(keeper.activity.listed == 40)
            await keeper.tick(now: UInt64(time(nil)))  // starts the background fsyncs
            let durable = try await Self.eventually { all.allSatisfy { !$0.syncer.isDirty } }
            #expect(durable, "the round fsync'd every written log")
            await keeper.tick(now: UInt64(time(nil)))  // finds them clean: they leave the list
            #expect(keeper.activity.listed == 0)
            let before = keeper.activity.counts
            for _ in 0..<5 { await keeper.tick(now: UInt64(time(nil))) }
            let idle = keeper.activity.counts
            #expect(idle.ticks == before.ticks + 5)
            #expect(idle.looked == before.looked, "five rounds with 40 idle namespaces looked at none of them")
            #expect(idle.visits == 0)

            for i in [3, 17, 29] { try await all[i].put(b("k2"), b("v2")) }
            #expect(keeper.activity.listed == 3)
            await keeper.tick(now: UInt64(time(nil)))
            #expect(keeper.activity.counts.looked == idle.looked + 3, "only the three written namespaces were looked at")
            #expect(try await Self.eventually { all.allSatisfy { !$0.syncer.isDirty } })
        }
    }

    @Test("the periodic compaction comes due at the same second as before, with one visit; then the namespace is left alone")
    func periodicCompactionWhenDue() async throws {
        let dir = TemporaryDirectory("keeper-due")
        defer { dir.remove() }
        try await withStore(dir.data, manualOptions(.always, interval: 60)) { store in
            let before = UInt64(time(nil))
            let ns = try await store.namespace("p")
            for i in 0..<5 { try await ns.put(b("k\(i)"), b("v")) }
            let after = UInt64(time(nil))
            let keeper = store.keeper
            await keeper.tick(now: before + 59)  // 59 s after opening at the latest: not due
            #expect(keeper.activity.counts.visits == 0)
            #expect(keeper.activity.listed == 1, "changes not in a snapshot keep it listed")
            #expect(await ns.currentStatistics().compactions == 0)
            await keeper.tick(now: after + 60)
            #expect(keeper.activity.counts.visits == 1)
            #expect(try await Self.eventually { await ns.currentStatistics().compactions == 1 })
            await keeper.tick(now: after + 61)
            #expect(keeper.activity.counts.visits == 2, "one more visit learns that the snapshot covers everything")
            #expect(keeper.activity.listed == 0)
            let snapshotTime = await ns.currentStatistics().snapshotTime
            try await ns.put(b("later"), b("v"))
            #expect(keeper.activity.listed == 1, "a write lists it again")
            await keeper.tick(now: snapshotTime + 59)
            #expect(keeper.activity.counts.visits == 2, "not due, counted from the new snapshot: no visit")
            #expect(await ns.currentStatistics().compactions == 1)
            await keeper.tick(now: snapshotTime + 60)
            #expect(try await Self.eventually { await ns.currentStatistics().compactions == 2 })
        }
    }

    @Test("reopened: only namespaces with records after their snapshot stay looked after, and are compacted when due")
    func recoveredNamespaces() async throws {
        let dir = TemporaryDirectory("keeper-reopen")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            for name in ["a0", "a1", "a2", "b0", "b1", "b2"] {
                let ns = try await store.namespace(name)
                try await ns.put(b("k"), b("v"))
                if name.hasPrefix("b") { try await ns.compact() }
            }
        }
        try await withStore(dir.data, manualOptions(.always, interval: 60)) { store in
            #expect(await store.openAll().isEmpty)
            let keeper = store.keeper
            await keeper.tick(now: UInt64(time(nil)))
            #expect(keeper.activity.listed == 3, "the three with a record after their snapshot")
            #expect(keeper.activity.counts.visits == 0)
            await keeper.tick(now: UInt64(time(nil)) + 61)
            #expect(keeper.activity.counts.visits == 3)
            for name in ["a0", "a1", "a2"] {
                let ns = try await store.namespace(name)
                #expect(try await Self.eventually { await ns.currentStatistics().compactions == 1 }, "\(name) compacted")
            }
            for name in ["b0", "b1", "b2"] {
                #expect(try await store.namespace(name).currentStatistics().compactions == 0)
            }
        }
    }

    @Test("automatic ticks stop when nothing is listed and start again at the next write, which is fsync'd")
    func ticksStopAndRestart() async throws {
        let dir = TemporaryDirectory("keeper-ticks")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.compaction = CompactionPolicy(interval: 0)
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("t")
            try await ns.put(b("a"), b("1"))
            let keeper = store.keeper
            #expect(keeper.activity.ticking)
            #expect(try await Self.eventually { !ns.syncer.isDirty }, "the first write was fsync'd by a tick")
            #expect(try await Self.eventually { !keeper.activity.ticking && keeper.activity.listed == 0 }, "the ticks stopped")
            try await ns.put(b("b"), b("2"))
            #expect(keeper.activity.ticking, "the write started them again")
            #expect(try await Self.eventually { !ns.syncer.isDirty }, "and they fsync'd it")
        }
    }
}
