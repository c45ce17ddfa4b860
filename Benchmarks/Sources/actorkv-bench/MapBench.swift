import ActorKVStore

/// `map-latency`: the in-memory part of a put alone — `OrderedMap.updateValue` p50/p99 at N keys,
/// with the same keys as `embedded-latency` (no actor, no log), to tell the tree's share of a put
/// from the rest.
enum MapBench {
    static func updateLatency(keys n: Int, puts: Int) {
        var map = OrderedMap()
        for i in 0..<n { map.updateValue(benchValue, forKey: benchKey(2 * i)) }
        var rng = SplitMix(seed: 42)
        var all = Samples(capacity: puts), fresh = Samples(capacity: puts), over = Samples(capacity: puts)
        for i in 0..<puts {
            let (key, isNew) = timedKey(i, existing: n, rng: &rng)
            let value = Array(benchValue)
            let t0 = nowNanos()
            map.updateValue(value, forKey: key)
            let dt = nowNanos() - t0
            all.add(dt)
            if isNew { fresh.add(dt) } else { over.add(dt) }
        }
        result("map keys=\(n) \(all.fields()) \(fresh.fields("new_")) \(over.fields("over_"))")
    }
}
