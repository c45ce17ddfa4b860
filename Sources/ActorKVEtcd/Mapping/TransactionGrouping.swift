import ActorKVStore

/// Which consecutive operations of a run can go to etcd as one transaction. Pure.
///
/// Plain reads and writes (GET, GETV, EXISTS, PUT, DEL) can, applied in order, if no key is
/// written twice (etcd refuses a transaction that puts or deletes a key twice) nor read after
/// it was written (a read sees the revision before the transaction). Anything that reads
/// before it writes (INCR, guarded PUTs, BATCH) runs on its own.
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
            case .exists(let keys): (reads, writes) = (keys.map { $0[...] }, [])
            case .put(let key, _): (reads, writes) = ([], [key])
            case .delete(let keys): (reads, writes) = ([], unique(keys).map { $0[...] })
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

    /// `keys` without repeats, in first-seen order (DEL counts a repeated key once).
    public static func unique(_ keys: [[UInt8]]) -> [[UInt8]] {
        var seen = Set<[UInt8]>()
        return keys.filter { seen.insert($0).inserted }
    }
}
