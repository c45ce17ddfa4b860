@testable import ActorKVStore
import ActorKVTestSupport
import Foundation

/// The crash states of one operation of a store, walked point by point: what the power-loss tests
/// of a single operation (a backup, a removal) share. The operation's file operations are
/// `trace[start..<end]`; at each point from `start` through `end` (before each of them, and
/// after the last), some crash states of the model (every one when there are few, otherwise
/// "only what was fsync'd", "everything" and seeded random ones, about `states` in all) are
/// written as a directory tree and handed to `body`, then removed.
enum CrashSweep {
    /// Calls `body` with each crash state's root (a copy of `root`'s tree as that power loss
    /// would leave it), the trace point, and a description of the state for messages; returns
    /// how many states it made.
    @discardableResult
    static func forEachState(root: String, trace: [FileOperationRecorder.Operation], from start: Int, through end: Int,
                             states: Int, seed: UInt64,
                             _ body: (_ state: String, _ point: Int, _ context: String) async throws -> Void) async throws -> Int {
        var model = CrashModel(root: root)
        for operation in trace.prefix(start) { try model.apply(operation) }
        var random = SeededGenerator(seed: seed)
        var made = 0
        for point in start...end {
            if point > start { try model.apply(trace[point - 1]) }
            let quota = max(2, states / (end - start + 1))
            let dimensions = model.dimensions
            var picks = [Array(repeating: 0, count: dimensions.count), CrashPicks.everything(dimensions)]
            if CrashPicks.count(dimensions, limit: quota) <= quota {
                picks = CrashPicks.all(dimensions)
            } else {
                while picks.count < quota { picks.append(CrashPicks.random(dimensions, using: &random)) }
            }
            for pick in picks {
                var garbage = SeededGenerator(seed: random.next())
                let state = root + "/state-\(made)"
                try model.image(pick, garbage: &garbage).write(to: state)
                made += 1
                defer { try? FileManager.default.removeItem(atPath: state) }
                try await body(state, point, "power loss at trace point \(point) (the operation from \(start) to \(end)): \(model.describe(pick))")
            }
        }
        return made
    }
}
