@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// Power loss, simulated (RELIABILITY.md, "Power loss"): a workload runs while its file operations
/// are recorded; at every point of the trace, the directories a power loss may leave there
/// (``CrashModel``) are opened with the real recovery code and checked (``CrashCheck``).
///
/// `ACTORKV_POWERLOSS_STATES` sets how many crash states each policy's check opens (default 800:
/// 2,400 over the three policies in CI; `Tests/soak.sh` asks for far more), `ACTORKV_POWERLOSS_SEED`
/// the workload's seed (default: a new one, printed). Each check has its own directory, recorder
/// and seed, so the policies run in parallel (serialized, the suite was the last to end in CI).
@Suite("Power loss, simulated", .tags(.slow))
struct PowerLossTests {
    static let environment = ProcessInfo.processInfo.environment
    static let statesPerPolicy = Int(environment["ACTORKV_POWERLOSS_STATES"] ?? "") ?? 800
    static let seed = UInt64(environment["ACTORKV_POWERLOSS_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)

    /// What a run of checks found.
    struct Tally: CustomStringConvertible {
        var points = 0
        var states = 0
        var exhaustivePoints = 0
        var secondCrashes = 0
        var refusals = 0
        var flippedBits = 0
        /// Records the flipped-bit check considered, and those it left out as shaped like a torn
        /// append (``CrashCheck/flippingABit(in:point:root:using:leftOut:)``).
        var flipCandidates = (considered: 0, leftOut: 0)
        var violations: [String] = []

        var description: String {
            "\(points) crash points (\(exhaustivePoints) enumerated exhaustively), \(states) crash states, "
                + "\(secondCrashes) second crashes during or after recovery, \(refusals) refusals naming file and offset, "
                + "\(flippedBits) flipped bits in fsync'd records refused "
                + "(of the records they were chosen from, \(flipCandidates.leftOut) of \(flipCandidates.considered) left out as shaped like a torn append), "
                + "\(violations.count) violations"
        }

        /// Adds what another run found.
        mutating func add(_ other: Tally) {
            points += other.points
            states += other.states
            exhaustivePoints += other.exhaustivePoints
            secondCrashes += other.secondCrashes
            refusals += other.refusals
            flippedBits += other.flippedBits
            flipCandidates.considered += other.flipCandidates.considered
            flipCandidates.leftOut += other.flipCandidates.leftOut
            violations += other.violations
        }
    }

    @Test("every crash state a power loss may leave recovers to a prefix of the log holding every durable write",
          arguments: DurabilityPolicy.allCases)
    func crashStatesRecover(policy: DurabilityPolicy) async throws {
        // A trace admits only so many states (few under `always`, where little is ever unsynced):
        // once one is exhausted, a new workload (the next seed) is explored until the budget is met.
        var tally = Tally()
        for round in 0..<Self.maximumRounds where tally.states < Self.statesPerPolicy * 9 / 10 && tally.violations.isEmpty {
            let part = try await explore(policy: policy, writes: 120, states: Self.statesPerPolicy - tally.states,
                                         round: round, strict: false)
            tally.add(part)
        }
        #expect(tally.violations.isEmpty, "\(tally.violations.joined(separator: "\n\n"))")
        // Points that allow fewer states than their share are enumerated whole: the total may fall a little short.
        if tally.violations.isEmpty { #expect(tally.states >= Self.statesPerPolicy * 9 / 10, "\(tally)") }
    }

    /// How many workloads one policy's check may explore to reach its budget.
    static let maximumRounds = 8

    @Test("a sector torn into garbage is recovered or refused naming file and offset, never accepted or lost")
    func garbageSectors() async throws {
        let tally = try await explore(policy: .everysec, writes: 60, states: max(100, Self.statesPerPolicy / 4), round: 0, strict: true)
        #expect(tally.violations.isEmpty, "\(tally.violations.joined(separator: "\n\n"))")
    }

    /// Runs the workload under `policy`, then checks about `states` crash states spread over every
    /// point of its trace: all of them where a point allows few, a seeded sample where it allows
    /// many, always including "only what was fsync'd" and "everything" (a process crash). `round`
    /// picks the workload: its seed is the test's seed, plus one per policy, plus a step per round.
    func explore(policy: DurabilityPolicy, writes: Int, states: Int, round: Int, strict: Bool) async throws -> Tally {
        let directory = TemporaryDirectory("pl")
        let seed = Self.seed &+ UInt64(DurabilityPolicy.allCases.firstIndex(of: policy)!) &+ UInt64(round) &* 1_000_003
        let workload = PowerLossWorkload(policy: policy, writes: writes, seed: seed)
        let run = try await workload.run(in: directory.data)
        let history = try LogHistory(trace: run.trace, dataDirectory: run.dataDirectory, policy: policy, acknowledged: run.acknowledged)
        try Self.checkShown(run, against: history)
        let check = CrashCheck(scratch: directory.path, history: history, namespaces: PowerLossWorkload.namespaces)
        var model = CrashModel(root: directory.path)
        var tally = Tally()
        var random = SeededGenerator(seed: seed &* 31)
        for point in 0...run.trace.count {
            if point > 0 { try model.apply(run.trace[point - 1]) }
            // What is left of the budget, spread over the points left.
            let quota = max(1, (states - tally.states + run.trace.count - point) / (run.trace.count + 1 - point))
            let dimensions = model.dimensions
            var picks: [[Int]]
            if !strict, CrashPicks.count(dimensions, limit: quota) <= quota {
                picks = CrashPicks.all(dimensions)
                tally.exhaustivePoints += 1
            } else {
                picks = strict ? [] : [Array(repeating: 0, count: dimensions.count), CrashPicks.everything(dimensions)]
                while picks.count < max(quota, strict ? 1 : 2) {
                    picks.append(CrashPicks.random(dimensions, garbageSectors: strict ? 2 : 0, using: &random))
                }
            }
            tally.points += 1
            for pick in picks {
                try await checkState(model, pick, point: point, check: check, strict: strict, workload: workload,
                                     tally: &tally, random: &random)
                if tally.violations.count >= 3 { return tally }
            }
        }
        print("power loss, \(policy.rawValue)\(strict ? ", garbage sectors" : ""), seed \(seed), \(writes) writes, trace of \(run.trace.count) operations: \(tally)")
        return tally
    }

    private func checkState(_ model: CrashModel, _ pick: [Int], point: Int, check: CrashCheck, strict: Bool,
                            workload: PowerLossWorkload, tally: inout Tally, random: inout SeededGenerator) async throws {
        var garbage = SeededGenerator(seed: random.next())
        let image = model.image(pick, garbage: &garbage)
        let root = check.scratch + "/state-\(tally.states)"
        tally.states += 1
        let recovery = try await CrashCheck.recover(image, at: root)
        do {
            try check.check(recovery, point: point, strict: strict)
            tally.refusals += recovery.refused.count
            if !recovery.trace.isEmpty, tally.states % 4 == 0 {
                tally.secondCrashes += 1
                try await secondCrash(image, recovery, root: root, random: &random)
            }
            if !strict, tally.states % 4 == 2, let (flipped, path) = check.flippingABit(in: image, point: point, root: model.root, using: &random, leftOut: &tally.flipCandidates) {
                tally.flippedBits += 1
                try await expectRefusal(of: flipped, naming: path, at: root + "-flipped")
            }
            try? FileManager.default.removeItem(atPath: root)
        } catch {
            // Kept outside the test's directory, which is removed when the test ends.
            let kept = "/tmp/akv-powerloss-\(workload.policy.rawValue)-\(workload.seed)-\(tally.states)"
            tally.violations.append("""
                \(workload.policy.rawValue) seed \(workload.seed), crash at trace point \(point) of \(model.point), state kept in \(kept):
                \(error)
                kept: \(model.describe(pick))
                reproduce: ACTORKV_POWERLOSS_SEED=\(Self.seed) swift test --filter PowerLossTests; inspect: actorkvd --check --data-dir \(kept)/data
                """)
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: kept)
            try? image.write(to: kept)
        }
    }

    /// Recovery must refuse a state with a flipped bit in a record that was fsync'd, naming its file.
    private func expectRefusal(of image: DiskImage, naming path: String, at root: String) async throws {
        let recovery = try await CrashCheck.recover(image, at: root)
        try? FileManager.default.removeItem(atPath: root)
        let name = String(path.split(separator: "/")[1])
        guard let refusal = recovery.refused[name], refusal.code == .corrupt, refusal.message.contains(root + "/" + path) else {
            throw CrashCheck.Violation(description: "a flipped bit in an fsync'd record of \(path) was not refused naming that file: "
                                       + (recovery.refused[name].map { "\($0)" } ?? "namespace \(name) opened"))
        }
    }

    /// A second power loss at a random point of what recovery and the write after it did.
    private func secondCrash(_ image: DiskImage, _ first: CrashCheck.Recovery, root: String,
                             random: inout SeededGenerator) async throws(CrashCheck.Violation) {
        do {
            var model = CrashModel(root: root, initial: image)
            let point = Int.random(in: 0...first.trace.count, using: &random)
            for operation in first.trace.prefix(point) { try model.apply(operation) }
            var garbage = SeededGenerator(seed: random.next())
            let second = try await CrashCheck.recover(model.image(CrashPicks.random(model.dimensions, using: &random), garbage: &garbage),
                                                      at: root + "-second")
            try? FileManager.default.removeItem(atPath: root + "-second")
            try CrashCheck.checkSecondCrash(second, after: first, point: point)
        } catch let violation as CrashCheck.Violation {
            throw violation
        } catch {
            throw CrashCheck.Violation(description: "second crash: \(error)")
        }
    }

    /// The state the store showed after each write must be the one its log records give: else the
    /// history this test judges recovery by would be wrong.
    static func checkShown(_ run: PowerLossWorkload.Run, against history: LogHistory) throws {
        for shown in run.shown {
            guard let states = history.states[shown.namespace], Int(shown.sequence) < states.count else {
                throw TestFailure("the store showed sequence \(shown.sequence) of \(shown.namespace), which its log does not hold")
            }
            let logged = states[Int(shown.sequence)]
            guard logged == shown.state else {
                throw TestFailure("\(shown.namespace) after \(shown.sequence): the store showed something else than its log says: "
                                  + CrashCheck.difference(expected: logged, found: shown.state))
            }
        }
    }
}
