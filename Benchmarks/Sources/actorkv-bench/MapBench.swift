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

/// `map-lookups`: the cost per key of looking keys up one at a time (`map[key]`) against
/// looking them up in groups (`OrderedMap.values(forKeys:_:)`, as a turn of pipelined `GET`s
/// does), at N keys. The two kinds of rounds alternate; each round looks up `group` random
/// existing keys; the figures are nanoseconds per key over all rounds of each kind.
extension MapBench {
    static func lookupCost(keys n: Int, lookups: Int, group: Int) {
        var map = OrderedMap()
        for i in 0..<n { map.updateValue(benchValue, forKey: benchKey(2 * i)) }
        var rng = SplitMix(seed: 7)
        var single: UInt64 = 0, grouped: UInt64 = 0, checksum = 0
        let rounds = Swift.max(1, lookups / group)
        for round in 0..<rounds {
            let keys = (0..<group).map { _ in benchKey(2 * Int(rng.next() % UInt64(n))) }
            let t0 = nowNanos()
            if round % 2 == 0 {
                for key in keys { checksum &+= map[key]?.count ?? 0 }
                single += nowNanos() - t0
            } else {
                map.values(forKeys: keys) { _, value in checksum &+= value?.count ?? 0 }
                grouped += nowNanos() - t0
            }
        }
        let perKey = Double(rounds / 2 * group)
        result(String(format: "map-lookups keys=%d group=%d single_ns=%.0f grouped_ns=%.0f checksum=%d",
                      n, group, Double(single) / perKey, Double(grouped) / perKey, checksum))
    }
}
