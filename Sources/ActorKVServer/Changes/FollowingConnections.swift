/// The connections that follow one namespace, in the order they connected (ids ascending,
/// each once): the order the loop serves their followers in when the namespace changes, as
/// Redis serves a channel's subscribers in the order they subscribed.
///
/// In hash order (a `Set`), the sends of one change went to the connections in an order
/// unrelated to the one their readers watch them in: a process reading many watchers through a
/// few `poll` loops (`actorkv-bench fanout` with 1,000 watchers on 2 reader threads) found a few
/// of its connections ready at each wakeup, and woke 12 times as often as in connection order.
struct FollowingConnections: Sequence {
    private var ids: [UInt64] = []

    /// None.
    init() {}

    /// Whether none follows.
    var isEmpty: Bool { ids.isEmpty }

    /// Adds `id` in its place; a connection already listed (it follows the namespace twice,
    /// under two prefixes) stays listed once.
    mutating func insert(_ id: UInt64) {
        let index = position(of: id)
        if index == ids.count || ids[index] != id { ids.insert(id, at: index) }
    }

    /// Removes `id`, if listed.
    mutating func remove(_ id: UInt64) {
        let index = position(of: id)
        if index < ids.count && ids[index] == id { ids.remove(at: index) }
    }

    /// The ids, ascending.
    func makeIterator() -> IndexingIterator<[UInt64]> { ids.makeIterator() }

    /// Where `id` is or would go: the first index whose id is not below it.
    private func position(of id: UInt64) -> Int {
        var low = 0, high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low
    }
}
