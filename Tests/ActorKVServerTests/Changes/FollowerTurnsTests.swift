@testable import ActorKVServer
import Foundation
import Testing

/// The event loop's policy for serving following connections: a turn serves at most so many
/// connections and bytes; those put off are served first in later turns, in the order they
/// were put off, none twice and none forgotten.
@Suite("Follower turns")
struct FollowerTurnsTests {
    /// One simulated turn as the loop runs it: the connections put off come first, then
    /// `fresh` (the followers of a feed that advanced), each served with `bytes` if the budget
    /// allows and put off otherwise (once, as the loop's flag per connection ensures).
    /// Returns the connections served, in order.
    static func turn(_ turns: inout FollowerTurns, waiting: inout Set<UInt64>, fresh: [UInt64], bytes: Int = 100) -> [UInt64] {
        var served: [UInt64] = []
        turns.startTurn()
        while let id = turns.nextPutOff() {
            waiting.remove(id)
            served.append(id)
            turns.charge(bytes: bytes)
        }
        for id in fresh where !waiting.contains(id) {
            if turns.isSpent {
                waiting.insert(id)
                turns.putOff(id)
            } else {
                served.append(id)
                turns.charge(bytes: bytes)
            }
        }
        return served
    }

    @Test("a turn serves as many connections as its budget; the rest are served first in the next turns, in order")
    func connectionBudget() {
        var turns = FollowerTurns(bytesPerTurn: 1 << 20, connectionsPerTurn: 4)
        var waiting = Set<UInt64>()
        let all = Array(UInt64(16)..<UInt64(26))  // ten watchers of one feed
        #expect(Self.turn(&turns, waiting: &waiting, fresh: all) == [16, 17, 18, 19])
        #expect(turns.hasPutOff)
        // The next turn: the six put off come first (four of them), and the feed advances
        // again: the eight not waiting are put off behind the two still waiting.
        #expect(Self.turn(&turns, waiting: &waiting, fresh: all) == [20, 21, 22, 23])
        #expect(Self.turn(&turns, waiting: &waiting, fresh: []) == [24, 25, 16, 17])
        #expect(Self.turn(&turns, waiting: &waiting, fresh: []) == [18, 19, 20, 21])
        #expect(Self.turn(&turns, waiting: &waiting, fresh: []) == [22, 23])
        #expect(!turns.hasPutOff)
        #expect(Self.turn(&turns, waiting: &waiting, fresh: []) == [])
    }

    @Test("every watcher is served once per round, however many turns a round takes, and the queue empties when the changes stop")
    func roundsAreFair() {
        var turns = FollowerTurns(bytesPerTurn: 1 << 20, connectionsPerTurn: 16)
        var waiting = Set<UInt64>()
        let all = Array(UInt64(16)..<UInt64(1_016))
        var servedCount = [UInt64: Int]()
        // 200 turns, each with a change to all 1,000: 3,200 connections served, each 3 or 4 times.
        for _ in 0..<200 {
            for id in Self.turn(&turns, waiting: &waiting, fresh: all) { servedCount[id, default: 0] += 1 }
        }
        #expect(servedCount.values.reduce(0, +) == 200 * 16)
        #expect(Set(servedCount.values).isSubset(of: [3, 4]))
        // Those served in a turn are put off again by its change: all wait, each once in the queue.
        #expect(waiting.count == 1_000)
        // The changes stop: the queue drains in 63 turns of 16, each connection served once.
        var drained: [UInt64] = []
        var rounds = 0
        while turns.hasPutOff {
            drained += Self.turn(&turns, waiting: &waiting, fresh: [])
            rounds += 1
        }
        #expect(rounds == 63 && drained.count == 1_000 && Set(drained).count == 1_000)
        #expect(waiting.isEmpty)
    }

    @Test("a connection given nothing costs no connection; the byte budget ends a turn too")
    func byteBudget() {
        var turns = FollowerTurns(bytesPerTurn: 1_000, connectionsPerTurn: 8)
        turns.startTurn()
        for _ in 0..<20 { turns.charge(bytes: 0) }  // prefixes that matched nothing
        #expect(!turns.isSpent && turns.connectionsLeft == 8)
        turns.charge(bytes: 600)
        #expect(!turns.isSpent)
        turns.charge(bytes: 600)  // over: the connection that overran it is served whole
        #expect(turns.isSpent && turns.bytesLeft == -200)
        turns.putOff(42)
        #expect(turns.nextPutOff() == nil)  // spent: kept for the next turn
        turns.startTurn()
        #expect(turns.bytesLeft == 1_000 && turns.connectionsLeft == 8)
        #expect(turns.nextPutOff() == 42)
        #expect(turns.nextPutOff() == nil && !turns.hasPutOff)
    }

    @Test("a long queue taken from its front keeps its order while taken entries are let go")
    func longQueue() {
        var turns = FollowerTurns(bytesPerTurn: 1 << 30, connectionsPerTurn: 1 << 20)
        for id in UInt64(0)..<5_000 { turns.putOff(id) }
        turns.startTurn()
        var out: [UInt64] = []
        for _ in 0..<3_000 { out.append(turns.nextPutOff()!) }
        for id in UInt64(5_000)..<6_000 { turns.putOff(id) }
        while let id = turns.nextPutOff() { out.append(id) }
        #expect(out == Array(0..<6_000))
    }

    @Test("the budgets protocol.md and README.md state are the ones the loop uses")
    func documentedBudgets() throws {
        #expect(FollowerTurns.bytesPerTurn == 128 * 1024 && FollowerTurns.connectionsPerTurn == 16)
        let flat = { (text: String) in text.split(whereSeparator: \.isWhitespace).joined(separator: " ") }
        #expect(flat(try ConfigurationDocsTests.document("protocol.md"))
            .contains("sends at most about 128 KiB of changes, to at most 16 following connections"))
        #expect(flat(try ConfigurationDocsTests.document("README.md")).contains("(at most 16 of them sent to per turn;"))
    }
}
