@testable import ActorKVServer
import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Testing

/// A transaction read whole in one turn (MULTI, queueable data commands on one namespace, EXEC)
/// runs as one data command of the turn's run, with no task; its replies are those of the same
/// commands sent one at a time, which run through the transaction commands themselves.
@Suite("A transaction read in one turn runs as a data command, with the replies of one sent command by command")
struct MergedTransactionTests {
    /// Transactions whose replies are compared both ways, each on fresh keys.
    static let transactions: [[[String]]] = [
        [["HSET", "h", "f1", "v1"], ["HSET", "h", "f2", "v2", "f3", "v3"], ["HGET", "h", "f1"], ["INCR", "h", "n"], ["INCR", "h", "n", "5"]],
        [["PUT", "h", "k", "v"], ["GET", "h", "k"], ["DEL", "h", "k", "missing"], ["EXISTS", "h", "k"], ["HSETNX", "h", "k", "w"]],
        [["PUT", "h", "word", "abc"], ["INCR", "h", "word"]],  // a refused step: nothing applied
        // Draws from one field, the same each time: HRANDFIELD sees the write before it.
        [["HRANDFIELD", "h"], ["HSET", "h", "only", "1"], ["HRANDFIELD", "h", "-3", "WITHVALUES"], ["HRANDFIELD", "h", "2"]],
    ]

    /// Sends `transaction` (MULTI ... EXEC) in one write, or one command at a time, and returns
    /// every reply, MULTI's and EXEC's included.
    static func run(_ transaction: [[String]], on connection: RawConnection, whole: Bool) throws -> [Reply] {
        let commands = [["MULTI"]] + transaction + [["EXEC"]]
        guard whole else { return try commands.map { try connection.command($0) } }
        var bytes: [UInt8] = []
        for command in commands { RequestEncoder.encode(command, into: &bytes) }
        try connection.send(bytes)
        return try commands.map { _ in try connection.reply() }
    }

    /// `transaction` with every key and namespace argument renamed for run `tag`.
    static func tagged(_ transaction: [[String]], _ tag: String) -> [[String]] {
        transaction.map { command in command.enumerated().map { $0 == 1 ? "\($1)-\(tag)" : $1 } }
    }

    @Test("merged and command by command give the same replies and leave the same data")
    func sameReplies() async throws {
        let store = try await onOwnThread {
            let fixture = try ClientSessionTests.LoopFixture()
            let connection = try RawConnection(path: fixture.socketPath)
            for (index, transaction) in Self.transactions.enumerated() {
                let whole = try Self.run(Self.tagged(transaction, "w\(index)"), on: connection, whole: true)
                let split = try Self.run(Self.tagged(transaction, "s\(index)"), on: connection, whole: false)
                #expect(whole == split, "transaction \(index): \(whole) against \(split)")
                #expect(whole.count == transaction.count + 2 && whole.first == .simple("OK"))
                let scanWhole = try connection.command(["SCAN", "h-w\(index)", "0", "COUNT", "100"])
                let scanSplit = try connection.command(["SCAN", "h-s\(index)", "0", "COUNT", "100"])
                #expect(scanWhole == scanSplit, "transaction \(index) left \(scanWhole) against \(scanSplit)")
            }
            fixture.stop()
            return fixture.store
        }
        await store.close()
    }

    @Test("a transaction read whole runs no task; one after WATCH, or with a command that cannot be queued, runs as before")
    func noTaskWhenWhole() async throws {
        let store = try await onOwnThread {
            let fixture = try ClientSessionTests.LoopFixture()
            let executor = try #require(fixture.executor)
            let connection = try RawConnection(path: fixture.socketPath)
            #expect(try connection.command(["PUT", "ns", "warm", "up"]) == .simple("OK"))
            let before = executor.jobsRun.load(ordering: .relaxed)
            for round in 0..<20 {
                let replies = try Self.run([["HSET", "ns", "f\(round)", "v"], ["INCR", "ns", "count"]], on: connection, whole: true)
                #expect(replies.last == .array([.integer(1), .integer(Int64(round + 1))]))
            }
            let jobs = executor.jobsRun.load(ordering: .relaxed) - before
            // Run as commands, each of the 20 transactions would take a task: a job or more each.
            #expect(jobs < 10, "\(jobs) jobs for 20 transactions read whole")

            // After WATCH the transaction runs as commands, guarded: a write by another connection aborts it.
            #expect(try connection.command(["WATCH", "ns"]) == .simple("OK"))
            let other = try RawConnection(path: fixture.socketPath)
            #expect(try other.command(["PUT", "ns", "x", "y"]) == .simple("OK"))
            let guarded = try Self.run([["PUT", "ns", "guarded", "v"]], on: connection, whole: true)
            #expect(guarded.last == .null, "\(guarded)")  // *-1, which the decoder gives as null
            #expect(try connection.command(["GET", "ns", "guarded"]) == .null)

            // A command that cannot be queued: refused when queued, EXEC aborts, nothing applied.
            let refused = try Self.run([["PUT", "ns", "a", "1"], ["SCAN", "ns", "0"]], on: connection, whole: true)
            guard case .error = refused[2], case .error(let abort) = refused.last!, abort.hasPrefix("EXECABORT") else {
                Issue.record("expected SCAN refused and EXECABORT: \(refused)")
                return fixture.store
            }
            #expect(try connection.command(["GET", "ns", "a"]) == .null)
            withExtendedLifetime(other) {}
            fixture.stop()
            return fixture.store
        }
        await store.close()
    }
}
