import ActorKVStore
import Synchronization

/// Embedded benchmarks: ActorKVStore in this process, no socket.
enum Embedded {
    /// Opens a store in `directory` with `.everysec` and automatic compaction off (the benchmarks
    /// compact explicitly, so that a background snapshot never lands in the middle of a timing).
    static func open(_ directory: String, durability: DurabilityPolicy = .everysec) async throws -> (Store, Namespace) {
        let options = StoreOptions(
            durability: durability,
            compaction: CompactionPolicy(logToLiveRatio: 1e9, minimumLogBytes: Int.max, interval: 0))
        let store = try Store(directory: directory, options: options)
        return (store, try await store.namespace("bench"))
    }

    /// Fills `ns` with keys 0, 2, …, 2(n-1) in batches, then compacts (snapshot, empty log).
    static func fill(_ ns: Namespace, keys n: Int) async throws -> (fillNanos: UInt64, compactNanos: UInt64) {
        let start = nowNanos()
        let batch = 10_000
        var i = 0
        while i < n {
            let end = min(n, i + batch)
            try await ns.apply((i..<end).map { .put(key: benchKey(2 * $0), value: benchValue) })
            i = end
        }
        let filled = nowNanos()
        try await ns.compact()
        let compacted = nowNanos()
        guard await ns.count() == n else { fail("fill: expected \(n) keys, namespace has \(await ns.count())") }
        return (filled - start, compacted - filled)
    }

    /// `embedded-latency`: p50/p99 of single puts (alternating new and overwritten keys) on a
    /// namespace already holding `keys` keys, under the given fsync policy.
    static func putLatency(directory: String, keys n: Int, puts: Int, durability: DurabilityPolicy) async throws {
        let (store, ns) = try await open(directory, durability: durability)
        let (fillNanos, compactNanos) = try await fill(ns, keys: n)
        var rng = SplitMix(seed: 42)
        var all = Samples(capacity: puts), fresh = Samples(capacity: puts), over = Samples(capacity: puts)
        // A few untimed puts first, so that page faults of the first appends are not counted.
        for w in 0..<min(100, puts) { try await ns.put(benchKey(2 * (w % max(n, 1))), benchValue) }
        for i in 0..<puts {
            let (key, isNew) = timedKey(i, existing: n, rng: &rng)
            let t0 = nowNanos()
            try await ns.put(key, benchValue)
            let dt = nowNanos() - t0
            all.add(dt)
            if isNew { fresh.add(dt) } else { over.add(dt) }
        }
        await store.close()
        result("embedded fsync=\(durability.rawValue) keys=\(n) \(all.fields()) \(fresh.fields("new_")) \(over.fields("over_")) fill_s=\(secs(fillNanos)) compact_s=\(secs(compactNanos))")
    }

    /// `compaction-latency`: puts while `compact()` runs concurrently, against the same number of
    /// puts without one.
    static func compactionLatency(directory: String, keys n: Int, minimumPuts: Int) async throws {
        let (store, ns) = try await open(directory)
        _ = try await fill(ns, keys: n)
        var rng = SplitMix(seed: 7)
        for w in 0..<min(100, minimumPuts) { try await ns.put(benchKey(2 * (w % max(n, 1))), benchValue) }

        // During: start a compaction, put back to back until it has finished (and at least
        // `minimumPuts` times, so that small stores still give a sample).
        let done = Flag()
        let t0 = nowNanos()
        let compaction = Task {
            try await ns.compact()
            done.set()
            return nowNanos()
        }
        var during = Samples(capacity: 1 << 16)
        var duringPuts = 0
        while !done.isSet || duringPuts < minimumPuts {
            let (key, _) = timedKey(duringPuts, existing: n, rng: &rng)
            let s = nowNanos()
            try await ns.put(key, benchValue)
            let dt = nowNanos() - s
            // Only puts issued while the compaction was still running count as "during".
            if !done.isSet { during.add(dt) }
            duringPuts += 1
        }
        let compactionEnd = try await compaction.value

        // Without: the same number of puts, nothing else running.
        var without = Samples(capacity: max(during.count, minimumPuts))
        for i in 0..<max(during.count, minimumPuts) {
            let (key, _) = timedKey(i, existing: n, rng: &rng)
            let s = nowNanos()
            try await ns.put(key, benchValue)
            without.add(nowNanos() - s)
        }
        await store.close()
        result("compaction keys=\(n) compaction_s=\(secs(compactionEnd - t0)) \(during.fields("during_")) \(without.fields("without_"))")
    }
}

/// A set-once flag readable from any thread.
final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .releasing) }
    var isSet: Bool { value.load(ordering: .acquiring) }
}
