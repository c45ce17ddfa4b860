import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// An etcd agent answers as the local engine does: the same random ActorKV commands (PUT, GET,
/// GETV, conditional PUTs with the version each server gave, INCR, DEL, EXISTS, COUNT, SCAN,
/// BATCH with guards, PEXPIRE, PERSIST, PTTL, MULTI/EXEC under WATCH, and pipelines of them) go
/// to a processor on a local store and to one keeping its data in etcd, and their replies must
/// be the same bytes but where protocol.md "Cluster mode" says they differ: versions are etcd
/// revisions (each server's own are used for its conditions, and a version in a reply is
/// compared by its kind only), `PEXPIRE` and `PERSIST` change a key's version there (a version
/// read before is not used after them), and deadlines are kept to the second (`PTTL` compared
/// by its sign). Runs with $ACTORKV_ETCD (Tests/Cluster/run.sh); $ACTORKV_AGENT_ROUNDS turns
/// (default 3,000), seed $ACTORKV_FUZZ_SEED.
@Suite("An etcd agent answers ActorKV's commands as the local engine does")
struct AgentEquivalenceTests {
    static let rounds = Int(ArgumentFuzzTests.environment["ACTORKV_AGENT_ROUNDS"] ?? "") ?? 3_000
    static let namespaces = ["ae-a", "ae-b"]
    static let keys = ["k0", "k1", "k2", "k3", "n", "p:x"]
    static let values = ["v", "", "12", "-3", "9223372036854775807", "x y"]

    /// The versions each server last gave for each key (`ns key`), which its conditions use.
    struct Versions {
        var local: [String: Int64] = [:]
        var agent: [String: Int64] = [:]

        /// Forgets `key`: a write whose new version neither reply gives (PUT, DEL, INCR, BATCH,
        /// PEXPIRE, …) makes the recorded one stale on one server and not the other.
        mutating func forget(_ key: String) {
            local[key] = nil
            agent[key] = nil
        }
    }

    /// One random turn: a command, or a pipeline of a few, each as words, with `VERSION(ns key)`
    /// standing for the version each server last gave that key.
    static func turn(_ random: inout SeededGenerator) -> [[String]] {
        let count = Int.random(in: 0..<10, using: &random) < 7 ? 1 : Int.random(in: 2...8, using: &random)
        return (0..<count).map { _ in command(&random) }
    }

    static func command(_ random: inout SeededGenerator) -> [String] {
        let ns = namespaces.randomElement(using: &random)!
        func key() -> String { keys.randomElement(using: &random)! }
        func value() -> String { values.randomElement(using: &random)! }
        func condition(_ k: String) -> String {
            ["VERSION(\(ns) \(k))", "VERSION(\(ns) \(k))", "0", "1"].randomElement(using: &random)!
        }
        switch Int.random(in: 0..<16, using: &random) {
        case 0, 1: return ["PUT", ns, key(), value()]
        case 2: return ["GET", ns, key()]
        case 3, 4: return ["GETV", ns, key()]
        case 5:
            let k = key()
            return ["PUT", ns, k, value(), "IFVERSION", condition(k)]
        case 6: return ["INCR", ns, key()] + (Bool.random(using: &random) ? [] : [["5", "-2", "0", "9223372036854775807", "x"].randomElement(using: &random)!])
        case 7: return ["DEL", ns] + (0..<Int.random(in: 1...3, using: &random)).map { _ in key() }
        case 8: return ["EXISTS", ns] + (0..<Int.random(in: 1...3, using: &random)).map { _ in key() }
        case 9: return ["COUNT", ns]
        case 10: return ["SCAN", ns, "0"] + (Bool.random(using: &random) ? ["PREFIX", "k"] : []) + ["COUNT", String(Int.random(in: 1...4, using: &random))]
        case 11:
            var words = ["BATCH", ns]
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let k = key()
                switch Int.random(in: 0..<4, using: &random) {
                case 0: words += ["PUT", k, value()]
                case 1: words += ["DEL", k]
                case 2: words += ["INCR", k, String(Int.random(in: -3...3, using: &random))]
                default: words += ["IFVERSION", k, condition(k)]
                }
            }
            return words
        case 12: return ["PEXPIRE", ns, key(), ["600000", "0", "-5"].randomElement(using: &random)!]
        case 13: return ["PERSIST", ns, key()]
        case 14: return ["PTTL", ns, key()]
        default: return ["PUT", ns, key(), value(), "PX", "600000"]
        }
    }

    /// `words` as one server gets them: each `VERSION(ns key)` its version (0 when it gave none yet).
    static func resolve(_ words: [String], _ versions: [String: Int64]) -> Command {
        let resolved = words.map { word in
            guard word.hasPrefix("VERSION("), word.hasSuffix(")") else { return Array(word.utf8) }
            return Array(String(versions[String(word.dropFirst(8).dropLast())] ?? 0).utf8)
        }
        return Command(parsing: Request(resolved))
    }

    /// The reply as compared: a version given (GETV's second entry, a conditional PUT's
    /// integer) is noted in `versions` and replaced by -1; PTTL's milliseconds by their sign.
    static func normalize(_ reply: Reply, to words: [String], noting versions: inout [String: Int64]) -> Reply {
        let command = words[0], name = words.count > 2 ? "\(words[1]) \(words[2])" : ""
        switch (command, reply) {
        case ("GETV", .array(let pair)) where pair.count == 2:
            if case .integer(let version) = pair[1] { versions[name] = version }
            return .array([pair[0], .integer(-1)])
        case ("PUT", .integer(let version)) where words.contains("IFVERSION"):
            versions[name] = version
            return .integer(-1)
        case ("PTTL", .integer(let left)) where left > 0:
            return .integer(1)
        default:
            return reply
        }
    }

    /// Keys whose recorded versions a command makes stale on one server only: any write but a
    /// conditional PUT (whose reply gives the new version).
    static func written(by words: [String]) -> [String] {
        let ns = words.count > 1 ? words[1] : ""
        switch words[0] {
        case "PUT" where !words.contains("IFVERSION"), "INCR", "PEXPIRE", "PERSIST": return ["\(ns) \(words[2])"]
        case "DEL": return words.dropFirst(2).map { "\(ns) \($0)" }
        case "BATCH", "EXEC": return keys.flatMap { k in namespaces.map { "\($0) \(k)" } }
        default: return []
        }
    }

    @Test("random turns of versions, conditions, counters, batches, deadlines and transactions: the agent's replies are the local engine's",
          .enabled(if: ArgumentFuzzTests.etcd != nil, "needs an etcd cluster: ACTORKV_ETCD (Tests/Cluster/run.sh)"))
    func agentAnswersAsLocal() async throws {
        try await RedisCommandsTests().withProcessor { local in
            try await ArgumentFuzzTests().withProcessor { agent in
                var random = SeededGenerator(seed: UInt64(ArgumentFuzzTests.environment["ACTORKV_FUZZ_SEED"] ?? "") ?? 0xA6E7)
                var versions = Versions()
                // Two connections to each: the second writes between a WATCH and its MULTI.
                let sessions = (local: [ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil)],
                                agent: [ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil)])
                var history: [String] = []
                var compared = 0
                var tally: [String: Int] = [:]
                for round in 0..<Self.rounds {
                    let turns = Int.random(in: 0..<12, using: &random) == 0 ? Self.transaction(&random) : [(0, Self.turn(&random))]
                    for (connection, turn) in turns {
                        let localReplies = await local.process(turn.map { Self.resolve($0, versions.local) }, session: sessions.local[connection])
                        let agentReplies = await agent.process(turn.map { Self.resolve($0, versions.agent) }, session: sessions.agent[connection])
                        history.append("\(connection): " + turn.map { $0.joined(separator: " ") }.joined(separator: " | "))
                        for (index, words) in turn.enumerated() {
                            let l = Self.normalize(localReplies[index], to: words, noting: &versions.local)
                            let a = Self.normalize(agentReplies[index], to: words, noting: &versions.agent)
                            compared += 1
                            Self.tally(localReplies[index], to: words, in: &tally)
                            guard l.encoded(in: .resp2) == a.encoded(in: .resp2) else {
                                Issue.record("round \(round), \(words.joined(separator: " ")): local \(localReplies[index]), agent \(agentReplies[index]); the turns before:\n\(history.suffix(12).joined(separator: "\n"))")
                                return
                            }
                            for key in Self.written(by: words) { versions.forget(key) }
                        }
                    }
                }
                print("agent equivalence: \(Self.rounds) turns, \(compared) replies the same: \(tally.sorted { $0.key < $1.key })")
                // Both outcomes of the conditions met, so the versions each server gave were used.
                if Self.rounds >= 500 {
                    for kind in ["condition held", "condition failed", "error", "transaction aborted by WATCH"] {
                        #expect(tally[kind, default: 0] > 0, "\(kind): \(tally)")
                    }
                }
            }
        }
    }

    /// Counts the outcomes that show the comparison reached what it is for.
    static func tally(_ reply: Reply, to words: [String], in tally: inout [String: Int]) {
        let conditional = words.contains("IFVERSION")
        switch reply {
        case .error: tally["error", default: 0] += 1
        case .integer where conditional && words[0] == "PUT", .array where conditional: tally["condition held", default: 0] += 1
        case .null where conditional, .nullArray where conditional: tally["condition failed", default: 0] += 1
        case .nullArray where words[0] == "EXEC": tally["transaction aborted by WATCH", default: 0] += 1
        default: break
        }
    }

    /// The turns of a transaction, each with the connection (0 or 1) that sends it: at times a
    /// WATCH of the namespace, and a write of it or another by the other connection; then
    /// MULTI, a few of the commands a transaction takes on that namespace, and EXEC in one turn.
    static func transaction(_ random: inout SeededGenerator) -> [(Int, [[String]])] {
        let ns = namespaces.randomElement(using: &random)!
        var turns: [(Int, [[String]])] = []
        if Bool.random(using: &random) {
            turns.append((0, [["WATCH", ns]]))
            if Bool.random(using: &random) {
                turns.append((1, [["PUT", namespaces.randomElement(using: &random)!, keys.randomElement(using: &random)!, "w"]]))
            }
        }
        var words: [[String]] = [["MULTI"]]
        for _ in 0..<Int.random(in: 1...4, using: &random) {
            let k = keys.randomElement(using: &random)!
            words.append([["PUT", ns, k, values.randomElement(using: &random)!], ["GET", ns, k], ["DEL", ns, k],
                          ["INCR", ns, k], ["EXISTS", ns, k], ["HLEN", ns]].randomElement(using: &random)!)
        }
        return turns + [(0, words + [["EXEC"]])]
    }

}
