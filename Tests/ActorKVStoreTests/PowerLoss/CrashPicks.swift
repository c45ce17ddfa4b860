/// Ways to choose crash states among a ``CrashModel``'s ``CrashModel/Dimension``s: every one when
/// there are few, a seeded sample when there are many (as ALICE and CrashMonkey do).
enum CrashPicks {
    /// How many crash states the dimensions allow (garbage not counted), or `limit + 1` when more
    /// than `limit`.
    static func count(_ dimensions: [CrashModel.Dimension], limit: Int) -> Int {
        var total = 1
        for dimension in dimensions {
            total *= dimension.choices
            if total > limit { return limit + 1 }
        }
        return total
    }

    /// Every crash state, in mixed-radix order (the first is "only what was fsync'd").
    static func all(_ dimensions: [CrashModel.Dimension]) -> [[Int]] {
        var result: [[Int]] = [Array(repeating: 0, count: dimensions.count)]
        for (i, dimension) in dimensions.enumerated() {
            result = result.flatMap { picks in
                (0..<dimension.choices).map { choice in
                    var next = picks
                    next[i] = choice
                    return next
                }
            }
        }
        return result
    }

    /// Everything unsynced kept, each sector at its latest bytes: what a process crash leaves.
    static func everything(_ dimensions: [CrashModel.Dimension]) -> [Int] {
        dimensions.map { $0.choices - 1 }
    }

    /// A random crash state. How much is kept varies from state to state (a share drawn for each),
    /// so that states near "nothing" and near "everything" are sampled as well as mixed ones.
    /// With `garbageSectors` > 0, that many unsynced sectors (at most) are torn into garbage.
    static func random<G: RandomNumberGenerator>(_ dimensions: [CrashModel.Dimension], garbageSectors: Int = 0,
                                                 using generator: inout G) -> [Int] {
        let keepLatest = Double.random(in: 0...1, using: &generator)
        var picks = dimensions.map { dimension -> Int in
            let last = dimension.choices - 1
            if Double.random(in: 0...1, using: &generator) < keepLatest { return last }
            return Bool.random(using: &generator) ? 0 : Int.random(in: 0...last, using: &generator)
        }
        let sectors = dimensions.indices.filter { if case .sector = dimensions[$0] { return true } else { return false } }
        for _ in 0..<min(garbageSectors, sectors.count) {
            picks[sectors.randomElement(using: &generator)!] = -1
        }
        return picks
    }
}
