/// The outcomes of a run of operations, and what to wait for before acknowledging their writes.
public struct Execution: Sendable {
    /// One outcome per operation, in order.
    public var outcomes: [Outcome]
    /// Wait on this before replying to any write in the run.
    public var durability: Durability

    /// The outcomes of a run, durable once `durability` says so.
    public init(outcomes: [Outcome], durability: Durability) {
        self.outcomes = outcomes
        self.durability = durability
    }

    /// The outcomes of `operations` (the ones this ran) once their writes are as durable as the
    /// policy promises. If that fails (an fsync failed), every write that had succeeded gets the
    /// error instead: it was applied in memory, but whether it survives a restart is unknown.
    public func settled(_ operations: [Operation]) async -> [Outcome] {
        do {
            try await durability.wait()
            return outcomes
        } catch {
            let failure = error as? StoreError ?? StoreError(.io, "\(error)")
            var outcomes = outcomes
            for i in outcomes.indices where operations[i].isWrite {
                if case .failure = outcomes[i] { continue }
                outcomes[i] = .failure(failure)
            }
            return outcomes
        }
    }
}
