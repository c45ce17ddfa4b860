import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// An etcd agent answers as the local engine does: the same random ActorKV commands (PUT, GET,
/// GETV, conditional PUTs with the version each server gave, INCR, DEL, EXISTS, COUNT, SCAN
/// paged, BATCH with guards, PEXPIRE, PERSIST, PTTL, EPHEMERAL, the hash commands with field
/// expiry, MULTI/EXEC under a WATCH another connection breaks, and pipelines of them) go to a
/// processor on a local store and to one keeping its data in etcd, and their replies must be
/// the same bytes but where protocol.md "Cluster mode" says they differ: versions are etcd
/// revisions (each server's own are used for its conditions, and a version in a reply is
/// compared by its kind only); a deadline given changes a key's version there (a version read
/// before a write is not used after it); deadlines are kept to the second (`PTTL` and the
/// `HTTL` family compared by their sign, and deadlines given 100 s apart). Runs with
/// $ACTORKV_ETCD (Tests/Cluster/run.sh); $ACTORKV_AGENT_ROUNDS turns (default 3,000), seed
/// $ACTORKV_FUZZ_SEED.
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

    /// The random draws, and the durations of the deadlines given: each 100 s longer than the
    /// one before, so that no two deadlines fall within a second of each other (the run takes
    /// far less than 100 s), and `GT`/`LT`, which the agent judges to the second (protocol.md),
    /// compare as the local engine's do.
    struct Draw: RandomNumberGenerator {
        var random: SeededGenerator
        var deadlines = 0

        mutating func next() -> UInt64 { random.next() }

        /// The next duration, in seconds.
        mutating func seconds() -> String {
            deadlines += 1
            return String(60 + 100 * deadlines)
        }

        /// The next duration, in milliseconds.
        mutating func milliseconds() -> String { seconds() + "000" }
    }

    /// One random turn: a command, or a pipeline of a few, each as words, with `VERSION(ns key)`
    /// standing for the version each server last gave that key.
    static func turn(_ random: inout Draw) -> [[String]] {
        let count = Int.random(in: 0..<10, using: &random) < 7 ? 1 : Int.random(in: 2...8, using: &random)
        return (0..<count).map { _ in command(&random) }
    }

    static func command(_ random: inout Draw) -> [String] {
        let ns = namespaces.randomElement(using: &random)!
        func key() -> String { keys.randomElement(using: &random)! }
        func value() -> String { values.randomElement(using: &random)! }
        func condition(_ k: String) -> String {
            // Its version as each server gave it, absent, or one no key has (versions differ
            // between the two: a small literal one may be a key's on one server only).
            ["VERSION(\(ns) \(k))", "VERSION(\(ns) \(k))", "0", "999999999999"].randomElement(using: &random)!
        }
        if Int.random(in: 0..<3, using: &random) == 0 { return hashCommand(ns, &random) }
        switch Int.random(in: 0..<18, using: &random) {
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
        case 12: return ["PEXPIRE", ns, key(), [random.milliseconds(), "0", "-5"].randomElement(using: &random)!]
        case 13: return ["PERSIST", ns, key()]
        case 14: return ["PTTL", ns, key()]
        case 15: return ["PUT", ns, key(), value()] + [["EPHEMERAL"], ["PX", random.milliseconds(), "EPHEMERAL"], ["EPHEMERAL", "IFVERSION", "0"]].randomElement(using: &random)!
        case 16: return ["SCAN", ns, "CURSOR", "COUNT", "2"]
        default: return ["PUT", ns, key(), value(), "PX", random.milliseconds()]
        }
    }

    /// A hash command, field expiry among them.
    static func hashCommand(_ ns: String, _ random: inout Draw) -> [String] {
        func key() -> String { keys.randomElement(using: &random)! }
        func fields() -> [String] {
            let chosen = (0..<Int.random(in: 1...3, using: &random)).map { _ in key() }
            return ["FIELDS", String(chosen.count)] + chosen
        }
        func condition() -> [String] { Bool.random(using: &random) ? [] : [["NX", "XX", "GT", "LT"].randomElement(using: &random)!] }
        switch Int.random(in: 0..<14, using: &random) {
        case 0: return ["HSET", ns] + (0..<Int.random(in: 1...3, using: &random)).flatMap { _ in [key(), values.randomElement(using: &random)!] }
        case 1: return ["HDEL", ns, key(), key()]
        case 2: return ["HINCRBY", ns, key(), ["1", "-4", "x"].randomElement(using: &random)!]
        case 3: return ["HINCRBYFLOAT", ns, key(), ["0.5", "-1e3", "inf"].randomElement(using: &random)!]
        case 4: return ["HSETNX", ns, key(), "s"]
        case 5: return [["HGETALL", ns], ["HKEYS", ns], ["HVALS", ns], ["HLEN", ns], ["HMGET", ns, key(), key()]].randomElement(using: &random)!
        case 6: return ["HEXPIRE", ns, [random.seconds(), random.seconds(), "0"].randomElement(using: &random)!] + condition() + fields()
        case 7: return ["HPEXPIRE", ns, random.milliseconds()] + condition() + fields()
        case 8: return ["HEXPIREAT", ns, "1"] + fields()
        case 9: return ["HPERSIST", ns] + fields()
        case 10: return [["HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME"].randomElement(using: &random)!, ns] + fields()
        case 11:
            let option = [[], ["EX", random.seconds()], ["PX", random.milliseconds()], ["PERSIST"], ["EXAT", "1"]].randomElement(using: &random)!
            return ["HGETEX", ns] + option + fields()
        case 12:
            let chosen = (0..<Int.random(in: 1...2, using: &random)).map { _ in key() }
            let presence = [[], ["FNX"], ["FXX"]].randomElement(using: &random)!
            let deadline = [[], ["EX", random.seconds()], ["KEEPTTL"], ["PX", random.milliseconds()]].randomElement(using: &random)!
            return ["HSETEX", ns] + presence + deadline + ["FIELDS", String(chosen.count)] + chosen.flatMap { [$0, "h"] }
        default: return ["HGETDEL", ns] + fields()
        }
    }

    /// `words` as one server gets them: each `VERSION(ns key)` its version (0 when it gave none
    /// yet), `CURSOR` the cursor of the namespace's last SCAN page (the same on both: it names a
    /// key; `0` once a scan ended).
    static func resolve(_ words: [String], _ versions: [String: Int64], cursors: [String: [UInt8]]) -> Command {
        let resolved = words.map { word in
            if word == "CURSOR" { return cursors[words[1]] ?? Array("0".utf8) }
            guard word.hasPrefix("VERSION("), word.hasSuffix(")") else { return Array(word.utf8) }
            return Array(String(versions[String(word.dropFirst(8).dropLast())] ?? 0).utf8)
        }
        return Command(parsing: Request(resolved))
    }

    /// `turn` with each `VERSION(…)` of a namespace an earlier command of the turn may write
    /// made one no key has: the versions are those from before the turn, and a write may make
    /// one stale on one server only (a deadline given changes a key's version in etcd).
    static func staleAfterWrites(_ turn: [[String]]) -> [[String]] {
        var written: Set<String> = []
        return turn.map { words in
            let resolved = words.map { word in
                word.hasPrefix("VERSION(") && written.contains(where: { word.hasPrefix("VERSION(\($0) ") }) ? "999999999999" : word
            }
            if !Self.written(by: words).isEmpty { written.formUnion(words[0] == "EXEC" ? namespaces : [words[1]]) }
            return resolved
        }
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
        case ("HTTL", .array(let entries)), ("HPTTL", .array(let entries)), ("HEXPIRETIME", .array(let entries)), ("HPEXPIRETIME", .array(let entries)):
            return .array(entries.map { if case .integer(let n) = $0, n > 0 { .integer(1) } else { $0 } })
        default:
            return reply
        }
    }

    /// Keys whose recorded versions a command may make stale on one server only: those of its
    /// namespace, for any command that may write but a conditional PUT (whose reply gives the
    /// new version); every key, for EXEC.
    static func written(by words: [String]) -> [String] {
        guard !readOnly.contains(words[0]), !(words[0] == "PUT" && words.contains("IFVERSION")) else { return [] }
        let spaces = words[0] == "EXEC" ? namespaces : [words[1]]
        return keys.flatMap { k in spaces.map { "\($0) \(k)" } }
    }

    static let readOnly: Set<String> = ["GET", "GETV", "EXISTS", "COUNT", "SCAN", "PTTL", "HGETALL", "HKEYS", "HVALS", "HLEN", "HMGET",
                                        "HTTL", "HPTTL", "HEXPIRETIME", "HPEXPIRETIME", "WATCH", "MULTI"]

    @Test("random turns of versions, conditions, counters, batches, deadlines and transactions: the agent's replies are the local engine's",
          .enabled(if: ArgumentFuzzTests.etcd != nil, "needs an etcd cluster: ACTORKV_ETCD (Tests/Cluster/run.sh)"))
    func agentAnswersAsLocal() async throws {
        try await RedisCommandsTests().withProcessor { local in
            try await ArgumentFuzzTests().withProcessor { agent in
                var random = Draw(random: SeededGenerator(seed: UInt64(ArgumentFuzzTests.environment["ACTORKV_FUZZ_SEED"] ?? "") ?? 0xA6E7))
                var versions = Versions()
                // Two connections to each: the second writes between a WATCH and its MULTI.
                let sessions = (local: [ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil)],
                                agent: [ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil)])
                var history: [String] = []
                var cursors: [String: [UInt8]] = [:]
                var compared = 0
                var tally: [String: Int] = [:]
                for round in 0..<Self.rounds {
                    let turns = Int.random(in: 0..<12, using: &random) == 0 ? Self.transaction(&random) : [(0, Self.turn(&random))]
                    for (connection, turn) in turns {
                        let turn = Self.staleAfterWrites(turn)
                        let localReplies = await local.process(turn.map { Self.resolve($0, versions.local, cursors: cursors) }, session: sessions.local[connection])
                        let agentReplies = await agent.process(turn.map { Self.resolve($0, versions.agent, cursors: cursors) }, session: sessions.agent[connection])
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
                            if words[0] == "SCAN", case .array(let page) = localReplies[index], case .bulk(let cursor) = page[0] {
                                cursors[words[1]] = cursor
                            }
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
    /// WATCH of the namespace, and a command of it or another by the other connection; then
    /// MULTI, a few of the commands a transaction takes on that namespace, and EXEC in one turn.
    static func transaction(_ random: inout Draw) -> [(Int, [[String]])] {
        let ns = namespaces.randomElement(using: &random)!
        var turns: [(Int, [[String]])] = []
        if Bool.random(using: &random) {
            turns.append((0, [["WATCH", ns]]))
            if Bool.random(using: &random) {
                // Any command, of this namespace or another: each kind of write must break the
                // WATCH through the agent as it does locally, and a write that changes nothing
                // (a delete of absent keys, a failed condition) must not.
                turns.append((1, [command(&random)]))
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
