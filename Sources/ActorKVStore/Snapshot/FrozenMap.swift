/// A map handed from the actor to the snapshot writer's thread, so that its last reference, and
/// the freeing of the nodes only it still holds, goes with the writer.
final class FrozenMap: @unchecked Sendable {
    private var map: OrderedMap?
    /// How many keys the map holds.
    let count: Int

    init(_ map: OrderedMap) {
        self.map = map
        count = map.count
    }

    /// The map; the box lets go of it (called once, on the writer's thread).
    func take() -> OrderedMap {
        defer { map = nil }
        return map!
    }
}
