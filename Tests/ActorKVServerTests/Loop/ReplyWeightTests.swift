import ActorKVProtocol
@testable import ActorKVServer
import ActorKVTestSupport
import Testing

/// What a pipelined request weighs against a connection's budget of reply entries in flight
/// (``EventLoop/replyWeight(of:keyCount:)``); that the budget bounds the server's memory is
/// `HostileClientTests`' part.
@Suite("Reply weights")
struct ReplyWeightTests {
    static func command(_ words: String...) -> Command { Command(parsing: Request(words.map { Array($0.utf8) })) }

    @Test("a read of a whole namespace weighs the keys it holds, plus one, when that is known at once; as a whole namespace otherwise")
    func wholeNamespaceReadsWeighTheirKeys() {
        var asked: [String] = []
        let counts = ["small": 10, "large": 20_000]
        let keyCount = { (name: String) -> Int? in
            asked.append(name)
            return counts[name]
        }
        for name in ["HGETALL", "HKEYS", "HVALS"] {
            #expect(EventLoop.replyWeight(of: Self.command(name, "small"), keyCount: keyCount) == 11, "\(name)")
            #expect(EventLoop.replyWeight(of: Self.command(name, "large"), keyCount: keyCount) == 20_001, "\(name)")
            // Unknown (cluster mode, or the namespace not open): a whole namespace, run alone.
            #expect(EventLoop.replyWeight(of: Self.command(name, "closed"), keyCount: keyCount) == Command.wholeNamespaceWeight, "\(name)")
        }
        #expect(asked == Array(repeating: ["small", "large", "closed"], count: 3).flatMap { $0 })
        // Other commands weigh as they always did, and no count is asked for.
        asked = []
        #expect(EventLoop.replyWeight(of: Self.command("HGET", "small", "a"), keyCount: keyCount) == 1)
        #expect(EventLoop.replyWeight(of: Self.command("SCAN", "small", "0", "COUNT", "500"), keyCount: keyCount) == 500)
        #expect(EventLoop.replyWeight(of: Self.command("HRANDFIELD", "small", "-300"), keyCount: keyCount) == 300)
        #expect(asked.isEmpty)
    }

    @Test("pipelined reads of a small namespace, run together now, each see the writes sent before them and no later one")
    func pipelinedSmallReadsSeeTheWritesBeforeThem() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            var request = ""
            for i in 0..<200 { request += "HSET grow k\(i) \(i)\r\nHKEYS grow\r\nHLEN grow\r\n" }
            try c.send(request)
            for i in 0..<200 {
                #expect(try c.reply() == .integer(1))
                guard case .array(let keys) = try c.reply() else { Issue.record("HKEYS \(i)"); return }
                #expect(keys.count == i + 1, "HKEYS after the HSET of k\(i)")
                #expect(try c.reply() == .integer(Int64(i + 1)))
            }
        }
    }
}
