/// Log lines that repeat, by subject: the same line again within ``quietSeconds`` is held back
/// and counted, and said with the count once it is logged again (a namespace that cannot be
/// created on a full disk fails on every request that would create it). Pure but for the clock.
struct RepeatedLines {
    /// How long the same line for the same subject is held back.
    static let quietSeconds = 10.0

    private var last: [String: (line: String, at: ContinuousClock.Instant, held: Int)] = [:]

    /// At most this many subjects are remembered; past it the memory starts over (a line may
    /// then be logged again early).
    static let subjectLimit = 1024

    /// The line to log now for `subject`, or nil to hold `line` back: the same line was logged
    /// for it less than ``quietSeconds`` ago. `now` is the clock's (a parameter for tests).
    mutating func line(for subject: String, _ line: String, now: ContinuousClock.Instant = .now) -> String? {
        if let previous = last[subject], previous.line == line, now - previous.at < .seconds(Self.quietSeconds) {
            last[subject]?.held += 1
            return nil
        }
        let held = last[subject].map { $0.line == line ? $0.held : 0 } ?? 0
        if last.count >= Self.subjectLimit { last.removeAll(keepingCapacity: true) }
        last[subject] = (line, now, 0)
        return held == 0 ? line : line + " (and \(held) times more since it was last logged)"
    }

    /// Forgets `subject`'s last line (it recovered): its next one is logged at once.
    mutating func forget(_ subject: String) { last[subject] = nil }
}
