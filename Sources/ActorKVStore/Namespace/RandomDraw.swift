/// How many of a namespace's keys to draw at random, and whether one may come more than once
/// (Redis's `HRANDFIELD` count): the rules of ``Operation/sample(_:)``, apart from where the
/// entries come from.
public enum RandomDraw: Sendable, Equatable {
    /// One key (none from an empty namespace).
    case one
    /// Up to this many different keys: all of them when the namespace holds no more.
    case distinct(Int)
    /// Exactly this many, each drawn anew, so a key may come more than once (none from an empty
    /// namespace).
    case repeating(Int)

    /// Whether drawing entries one at a time (``draw(sampling:)``) is the way for `live`
    /// entries, rather than reading them all (``draw(from:using:)``): not for distinct keys that
    /// are a third of them or more, since each draw could then repeat one already taken (Redis
    /// switches at the same point).
    public func samples(live: Int) -> Bool {
        guard case .distinct(let count) = self else { return true }
        return count <= live / 3
    }

    /// The draw from `entries`, every live entry of the namespace.
    public func draw<G: RandomNumberGenerator>(from entries: [KeyValue], using generator: inout G) -> [KeyValue] {
        guard !entries.isEmpty else { return [] }
        switch self {
        case .one: return [entries.randomElement(using: &generator)!]
        case .distinct(let count) where count >= entries.count: return entries
        case .distinct(let count):
            // The first `count` places of a shuffle: a random number per key drawn, not per entry.
            var pool = entries
            for place in 0..<count { pool.swapAt(place, Int.random(in: place..<pool.count, using: &generator)) }
            return Array(pool[..<count])
        case .repeating(let count): return (0..<count).map { _ in entries.randomElement(using: &generator)! }
        }
    }

    /// The draw, made with `next`, which gives one live entry of the namespace uniformly at
    /// random each call (the namespace holding at least one; for ``distinct(_:)``, at least
    /// three times as many as asked for, see ``samples(live:)``).
    public func draw(sampling next: () -> KeyValue) -> [KeyValue] {
        switch self {
        case .one: return [next()]
        case .repeating(let count): return (0..<count).map { _ in next() }
        case .distinct(let count):
            var drawn: [KeyValue] = []
            drawn.reserveCapacity(count)
            var seen = Set<[UInt8]>(minimumCapacity: count)
            while drawn.count < count {
                let entry = next()
                if seen.insert(entry.key).inserted { drawn.append(entry) }
            }
            return drawn
        }
    }
}
