import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// A transaction answers as its commands do one by one: random queues of hash writes, reads and
/// the field expiry commands (deadlines given and read back, conditions, deletes by a time
/// passed, HSETEX's FNX/FXX/KEEPTTL, HGETEX), run on one namespace inside MULTI and on a twin
/// namespace, in the same state, outside it. EXEC's replies must be the commands' replies, and
/// the two namespaces must end equal, values and deadlines; when a command fails as EXEC runs it
/// (HINCRBY of a value that is not an integer), EXEC replies that error and nothing of the queue
/// is applied. Locally, and with $ACTORKV_ETCD through an etcd-backed processor, as
/// ``ArgumentFuzzTests``; $ACTORKV_EQUIVALENCE_ROUNDS queues (default 1,000, 100 through etcd),
/// seed $ACTORKV_FUZZ_SEED. Deadlines are absolute (EXAT, PXAT, HEXPIREAT): a relative one would
/// differ between the two runs by the time between them. Each queue makes two namespaces, each
/// keeping its log open, in a store with no namespace limit: keep the rounds well below half of
/// `ulimit -n` (20,000 rounds under a limit of 20,000 ran out of descriptors at round 9,977).
@Suite("MULTI/EXEC answers and applies as its commands one by one, field expiry included")
struct TransactionEquivalenceTests {
    static let fields = ["a", "b", "c", "n"]

    /// One random command on namespace `ns` (words), drawn from `random`; `second` is a whole
    /// second an hour or two away.
    static func command(_ ns: String, second: Int, _ random: inout SeededGenerator) -> [String] {
        func someFields() -> [String] { (0..<Int.random(in: 1...3, using: &random)).map { _ in fields.randomElement(using: &random)! } }
        let field = fields.randomElement(using: &random)!
        let seconds = [1, second, second + 3600].randomElement(using: &random)!  // 1: long past, so the fields go
        let milliseconds = seconds == 1 ? 1000 : seconds * 1000 + Int.random(in: 0..<1000, using: &random)
        let time = Bool.random(using: &random) ? ["EXAT", String(seconds)] : ["PXAT", String(milliseconds)]
        switch Int.random(in: 0..<16, using: &random) {
        case 0: return ["HSET", ns, field, ["1", "x", "7"].randomElement(using: &random)!] + (Bool.random(using: &random) ? ["n", "2"] : [])
        case 1: return ["HDEL", ns, field]
        // Mostly the counter: an HINCRBY after a deadline keeps it.
        case 2, 14, 15: return ["HINCRBY", ns, Int.random(in: 0..<4, using: &random) > 0 ? "n" : field, "1"]
        case 3:
            let condition = [[], ["NX"], ["XX"], ["GT"], ["LT"]].randomElement(using: &random)!
            let named = someFields()
            return Bool.random(using: &random)
                ? ["HEXPIREAT", ns, String(seconds)] + condition + ["FIELDS", String(named.count)] + named
                : ["HPEXPIREAT", ns, String(milliseconds)] + condition + ["FIELDS", String(named.count)] + named
        case 4:
            let named = someFields()
            return ["HPERSIST", ns, "FIELDS", String(named.count)] + named
        case 5, 6:
            let named = someFields()
            return [Bool.random(using: &random) ? "HEXPIRETIME" : "HPEXPIRETIME", ns, "FIELDS", String(named.count)] + named
        case 7:
            let named = someFields()
            let option = [[], time, ["PERSIST"]].randomElement(using: &random)!
            return ["HGETEX", ns] + option + ["FIELDS", String(named.count)] + named
        case 8, 9:
            let named = someFields()
            let presence = [[], ["FNX"], ["FXX"]].randomElement(using: &random)!
            let lifetime = [[], time, ["KEEPTTL"]].randomElement(using: &random)!
            return ["HSETEX", ns] + presence + lifetime + ["FIELDS", String(named.count)] + named.flatMap { [$0, "s"] }
        // HRANDFIELD of more fields than there are: every field, in key order, the same each time.
        case 10: return [["HGETALL", ns], ["HLEN", ns], ["HGET", ns, field], ["HMGET", ns, field, "b"], ["HRANDFIELD", ns, "100", "WITHVALUES"]]
            .randomElement(using: &random)!
        case 11: return ["HEXPIRE", ns, "0", "FIELDS", "1", field]
        case 12: return ["HGETDEL", ns, "FIELDS", "1", field]
        default: return ["HSETNX", ns, field, "9"]
        }
    }

    /// `ns`'s fields with their values and deadlines (HGETALL, then HPEXPIRETIME of every field).
    static func state(of ns: String, _ p: CommandProcessor) async -> [Reply] {
        await p.process([["HGETALL", ns], ["HPEXPIRETIME", ns, "FIELDS", String(fields.count)] + fields].map(Self.parse),
                        session: ClientSession(id: 9, peer: nil))
    }

    static func parse(_ words: [String]) -> Command { Command(parsing: Request(words.map { Array($0.utf8) })) }

    @Test("random queues of hash and field expiry commands: EXEC's replies and final state equal the commands' run one by one")
    func transactionsEqualCommandsOneByOne() async throws {
        try await ArgumentFuzzTests().withProcessor { p in
            var random = SeededGenerator(seed: UInt64(ArgumentFuzzTests.environment["ACTORKV_FUZZ_SEED"] ?? "") ?? 0x7e_9a11)
            let second = Int(WallClock.milliseconds() / 1000) + 3600
            var counts = (applied: 0, failed: 0)
            let rounds = Int(ArgumentFuzzTests.environment["ACTORKV_EQUIVALENCE_ROUNDS"] ?? "") ?? (ArgumentFuzzTests.etcd == nil ? 1000 : 100)
            for round in 0..<rounds {
                let (direct, queued) = ("eq-\(round)-direct", "eq-\(round)-multi")
                let setup = [["HSET", "NS", "a", "1", "b", "x", "n", "5"], ["HEXPIREAT", "NS", String(second + 60), "FIELDS", "1", "b"]]
                for ns in [direct, queued] {
                    _ = await p.process(setup.map { Self.parse($0.map { $0 == "NS" ? ns : $0 }) }, session: ClientSession(id: 9, peer: nil))
                }
                let before = await Self.state(of: queued, p)
                let commands = (0..<Int.random(in: 1...8, using: &random)).map { _ in Self.command("NS", second: second, &random) }
                let one = ClientSession(id: 10, peer: nil)
                var replies: [Reply] = []
                for command in commands { replies += await p.process([Self.parse(command.map { $0 == "NS" ? direct : $0 })], session: one) }
                let transaction = [["MULTI"]] + commands.map { $0.map { $0 == "NS" ? queued : $0 } } + [["EXEC"]]
                let exec = await p.process(transaction.map(Self.parse), session: ClientSession(id: 11, peer: nil))
                let described = "round \(round): \(commands.map { $0.joined(separator: " ") })"
                #expect(exec.dropFirst().dropLast() == ArraySlice(repeating: .simple("QUEUED"), count: commands.count), "\(described): \(exec)")
                if let failure = replies.first(where: { $0.errorCode != nil }) {
                    // The error EXEC runs into is the first the commands one by one met; nothing applied.
                    counts.failed += 1
                    #expect(exec.last == failure, "\(described): EXEC \(exec.last!) against \(failure)")
                    #expect(await Self.state(of: queued, p) == before, "\(described): a failed EXEC changed the namespace")
                    continue
                }
                counts.applied += 1
                #expect(exec.last == .array(replies), "\(described): EXEC \(exec.last!) against one by one \(replies)")
                let (left, right) = (await Self.state(of: direct, p), await Self.state(of: queued, p))
                #expect(left == right, "\(described): one by one left \(left), the transaction \(right)")
            }
            #expect(counts.applied > counts.failed && counts.failed > 0, "both kinds of queue: \(counts)")
            print("transaction equivalence: \(rounds) queues, \(counts.applied) applied, \(counts.failed) failing as EXEC ran them")
        }
    }

    @Test("a WATCH broken by another connection makes EXEC answer *-1 and apply nothing, even where a queued command would fail as EXEC ran it: the guard is judged first, as Redis does")
    func brokenWatchBeforeAFailingCommand() async throws {
        try await ArgumentFuzzTests().withProcessor { p in
            let (me, other) = (ClientSession(id: 20, peer: nil), ClientSession(id: 21, peer: nil))
            func run(_ commands: [[String]], on session: ClientSession) async -> [Reply] {
                await p.process(commands.map(Self.parse), session: session)
            }
            _ = await run([["HSET", "watch-fail", "word", "abc"]], on: other)
            for failing in [["HINCRBY", "watch-fail", "word", "1"], ["HINCRBYFLOAT", "watch-fail", "word", "1"]] {
                _ = await run([["WATCH", "watch-fail"]], on: me)
                _ = await run([["HSET", "watch-fail", "other", "1"]], on: other)
                let broken = await run([["MULTI"], ["HSET", "watch-fail", "a", "1"], failing, ["EXEC"], ["HGET", "watch-fail", "a"]], on: me)
                #expect(broken.suffix(2) == [.nullArray, .null], "\(failing[0]) under a broken WATCH: \(broken)")
                // Unwatched, the same queue fails as EXEC runs it, and applies nothing either.
                let failed = await run([["MULTI"], ["HSET", "watch-fail", "a", "1"], failing, ["EXEC"], ["HGET", "watch-fail", "a"]], on: me)
                #expect(failed[3].errorCode == "ERR" && failed[4] == .null, "\(failing[0]) unwatched: \(failed)")
            }
        }
    }
}
