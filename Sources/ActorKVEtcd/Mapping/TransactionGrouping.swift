import ActorKVStore

/// Which consecutive operations of a run can go to etcd as one transaction. Pure.
///
/// Plain reads and writes (GET, GETV, EXISTS, HMGET, PUT, DEL, HSET of one field, and a BATCH of only puts, sets and
/// deletes: HSET, HDEL) can, applied in order, if no key is written twice (etcd refuses a
/// transaction that puts or deletes a key twice) nor read after it was written (a read sees
/// the revision before the transaction). What their outcomes need to know of the keys before
/// (whether HSET's field was new, whether DEL's key existed) etcd answers from the write itself
/// (`prev_kv`, `deleted`). Anything that must read before it decides what to write (INCR,
/// guarded PUTs, other BATCHes) runs on its own.
public enum TransactionGrouping {
    /// Where the group that starts at `start` ends (exclusive): `start + 1` when the operation
    /// there cannot be grouped or has no partner, so that it runs on its own.
    public static func end(of operations: [Operation], from start: Int, limits: StoreLimits, maxRequests: Int) -> Int {
        var written = Set<ArraySlice<UInt8>>()
        var requests = 0
        var index = start
        while index < operations.count, limits.problem(with: operations[index]) == nil {
            let operation = operations[index]
            let (reads, writes): ([ArraySlice<UInt8>], [ArraySlice<UInt8>])
            switch operation {
            case .get(let key), .getVersioned(let key): (reads, writes) = ([key], [])
            case .exists(let keys), .getMany(let keys): (reads, writes) = (keys, [])
            case .put(let key, _), .set(let key, _): (reads, writes) = ([], [key])
            case .delete(let keys): (reads, writes) = ([], unique(keys).map { $0[...] })
            case .batch(let steps):
                guard let keys = blindKeys(steps) else { return max(index, start + 1) }
                (reads, writes) = ([], keys.map { $0[...] })
            default: return max(index, start + 1)
            }
            let count = reads.count + writes.count
            guard requests + count <= maxRequests, !reads.contains(where: written.contains), !writes.contains(where: written.contains) else { break }
            requests += count
            written.formUnion(writes)
            index += 1
        }
        return max(index, start + 1)
    }

    /// The keys of a batch that only puts, sets and deletes, each key once (its writes need no
    /// read first); nil for any other batch.
    public static func blindKeys(_ steps: [BatchStep]) -> [[UInt8]]? {
        var keys: [[UInt8]] = []
        var seen = Set<[UInt8]>()
        for step in steps {
            switch step {
            case .put(let key, _), .set(let key, _), .delete(let key):
                guard seen.insert(key).inserted else { return nil }
                keys.append(key)
            default: return nil
            }
        }
        return keys
    }

    /// `keys` without repeats, in first-seen order (DEL counts a repeated key once).
    public static func unique(_ keys: [[UInt8]]) -> [[UInt8]] {
        var seen = Set<[UInt8]>()
        return keys.filter { seen.insert($0).inserted }
    }
}
