import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Synchronization
import Testing

/// Commands run through the processor against a real store in a temp directory; no sockets.
@Suite struct CommandProcessorTests {
    let directory = TemporaryDirectory()

    func withProcessor(_ body: (CommandProcessor) async throws -> Void) async throws {
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store) { _ in Array("# Server\r\n".utf8) }
        try await body(processor)
        await store.close()
    }

    func run(_ p: CommandProcessor, _ lines: [String]) async -> [Reply] {
        await p.process(lines.map { line in line.split(separator: " ").map { Array($0.utf8) } }).replies
    }

    @Test func putGetDeleteRoundTrip() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["PUT config theme dark", "GET config theme", "GET config missing",
                                        "DEL config theme missing", "GET config theme", "EXISTS config theme", "COUNT config"])
            #expect(replies == [.simple("OK"), .bulk("dark"), .null, .integer(1), .null, .integer(0), .integer(0)])
        }
    }

    @Test func commandNamesAreCaseInsensitive() async throws {
        try await withProcessor { p in
            #expect(await run(p, ["put a k v", "gEt a k", "ping"]) == [.simple("OK"), .bulk("v"), .simple("PONG")])
        }
    }

    @Test func errorsNameTheProblemAndLeaveLaterCommandsWorking() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["FROB x", "PUT a k", "GET a/b k", "SCAN a 0 COUNT zero", "SCAN a nonsense",
                                        "BATCH a PUT k", "BATCH a JUMP k", "PING"])
            #expect(replies.map(\.errorCode) == ["ERR", "ERR", "BADNS", "ERR", "BADCURSOR", "ERR", "ERR", nil])
            #expect(replies[0] == .error("ERR unknown command 'FROB'; ActorKV keeps keys in namespaces: see protocol.md \"Differences from Redis\""))
            #expect(replies.last == .simple("PONG"))
        }
    }

    @Test func emptyKeyIsRefusedWithBadKey() async throws {
        try await withProcessor { p in
            let replies = await p.process([[Array("PUT".utf8), Array("a".utf8), [], Array("v".utf8)]]).replies
            #expect(replies.first?.errorCode == "BADKEY")
        }
    }

    @Test func batchIsAllOrNothing() async throws {
        try await withProcessor { p in
            _ = await run(p, ["PUT b keep 1"])
            let bad = await p.process([["BATCH", "b", "PUT", "x", "1", "DEL", "keep", "PUT", "", "2"].map { Array($0.utf8) }]).replies
            #expect(bad.first?.errorCode == "BADKEY")
            #expect(await run(p, ["GET b x", "GET b keep"]) == [.null, .bulk("1")])
            let good = await run(p, ["BATCH b PUT x 1 DEL keep DEL nothing"])
            #expect(good == [.array([.simple("OK"), .integer(1), .integer(0)])])
        }
    }

    @Test func scanPagesInKeyOrderAndEnds() async throws {
        try await withProcessor { p in
            _ = await run(p, (0..<25).map { "PUT s key\(String(format: "%02d", $0)) v\($0)" } + ["PUT s other 1"])
            var cursor = "0"
            var keys: [String] = []
            repeat {
                let reply = await run(p, ["SCAN s \(cursor) PREFIX key COUNT 10"])[0]
                guard case .array(let parts) = reply, case .bulk(let next) = parts[0], case .array(let flat) = parts[1].unpacked else {
                    Issue.record("unexpected reply \(reply)"); return
                }
                for i in stride(from: 0, to: flat.count, by: 2) {
                    if case .bulk(let k) = flat[i] { keys.append(String(decoding: k, as: UTF8.self)) }
                }
                cursor = String(decoding: next, as: UTF8.self)
            } while cursor != "0"
            #expect(keys == (0..<25).map { "key" + String(format: "%02d", $0) })
        }
    }

    @Test func unknownNamespaceReadsAsEmptyAndIsNotCreated() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["GET ghost k", "COUNT ghost", "SCAN ghost 0", "DEL ghost k", "NAMESPACES"])
            #expect(replies == [.null, .integer(0), .array([.bulk("0"), .array([])]), .integer(0), .array([])])
        }
    }

    @Test func quitStopsProcessingAndAsksToClose() async throws {
        try await withProcessor { p in
            let (replies, quit) = await p.process([["QUIT"], ["PUT", "q", "k", "v"]].map { $0.map { Array($0.utf8) } })
            #expect(quit)
            #expect(replies == [.simple("OK")])
            #expect(await run(p, ["GET q k"]) == [.null])
            // Arguments are ignored, as Redis 7 ignores them.
            let (withArguments, quitAgain) = await p.process([["QUIT", "now", "please"], ["PUT", "q", "k", "v"]].map { $0.map { Array($0.utf8) } })
            #expect(quitAgain && withArguments == [.simple("OK")])
        }
    }

    @Test func compactAndInfoAndPingWithMessage() async throws {
        try await withProcessor { p in
            #expect(await run(p, ["PUT c k v", "COMPACT c", "PING hello", "NAMESPACES"])
                    == [.simple("OK"), .simple("OK"), .bulk("hello"), .array([.bulk("c")])])
            guard case .bulk(let info) = await run(p, ["INFO"])[0] else { Issue.record("INFO not bulk"); return }
            #expect(String(decoding: info, as: UTF8.self).hasPrefix("# Server"))
        }
    }

    @Test func parseRejectsArityAndNamesTheUsage() throws {
        #expect(throws: CommandError.self) { try Command.parse([Array("GET".utf8)]) }
        do {
            _ = try Command.parse(["SCAN", "ns", "0", "COUNT"].map { Array($0.utf8) })
            Issue.record("odd SCAN options accepted")
        } catch {
            #expect(error.message.contains("SCAN ns cursor"))
        }
    }

    /// SCAN options and BATCH op names match in ASCII letter case only (no Unicode folding: `ﬁ`
    /// upper-cases to `FI`, `ı` to `I`), and COUNT is read as Redis reads an integer.
    @Test func scanOptionsAndBatchOpsAreASCIIOnly() async throws {
        try await withProcessor { p in
            let bytes = { (words: [String]) in words.map { Array($0.utf8) } }
            _ = await run(p, ["PUT o m1 a", "PUT o m2 b", "PUT o n c"])
            let page = Reply.array([.bulk("k6d31"), .array([.bulk("m1"), .bulk("a")])])
            #expect(await run(p, ["SCAN o 0 prefix m count 1", "SCAN o 0 PrEfIx m CoUnT 1"]) == [page, page])
            let options = await p.process([bytes(["SCAN", "o", "0", "PRE\u{FB01}X", "m"]),
                                           bytes(["SCAN", "o", "0", "PREF\u{131}X", "m"]),
                                           bytes(["SCAN", "o", "0", "\u{FF30}REFIX", "m"])]).replies
            #expect(options == [.error("ERR unknown SCAN option 'PRE\\xef\\xac\\x81X' (expected PREFIX or COUNT)"),
                                .error("ERR unknown SCAN option 'PREF\\xc4\\xb1X' (expected PREFIX or COUNT)"),
                                .error("ERR unknown SCAN option '\\xef\\xbc\\xb0REFIX' (expected PREFIX or COUNT)")])
            let badCount = Reply.error("ERR COUNT must be an integer from 1 to 100000")
            for count in ["+1", "01", " 1", "1 ", "0", "-1", "100001", "1e3", "\u{0661}", "99999999999999999999"] {
                let replies = await p.process([bytes(["SCAN", "o", "0", "COUNT", count])]).replies
                #expect(replies == [badCount], "COUNT '\(count)'")
            }
            #expect(await run(p, ["SCAN o 0 COUNT 100000"]).first?.errorCode == nil)
            #expect(await run(p, ["BATCH o pUt k v dEl k"]) == [.array([.simple("OK"), .integer(1)])])
            let batch = await p.process([bytes(["BATCH", "o", "\u{FF30}UT", "k", "v"])]).replies
            #expect(batch == [.error("ERR BATCH op 1: unknown op '\\xef\\xbc\\xb0UT' (expected PUT, DEL, IFVERSION or INCR); nothing was applied")])
        }
    }

    /// The SCAN and BATCH examples of protocol.md, reply for reply.
    @Test func protocolDocumentExamples() async throws {
        try await withProcessor { p in
            _ = await run(p, ["PUT config motd hello", "PUT config theme dark"])
            #expect(await run(p, ["SCAN config 0 COUNT 1"])
                    == [.array([.bulk("k6d6f7464"), .array([.bulk("motd"), .bulk("hello")])])])
            #expect(await run(p, ["SCAN config k6d6f7464 COUNT 1"])
                    == [.array([.bulk("0"), .array([.bulk("theme"), .bulk("dark")])])])
            #expect(await run(p, ["BATCH config PUT k1 v1 DEL k1 PUT k2 v2"])
                    == [.array([.simple("OK"), .integer(1), .simple("OK")])])
            #expect(await run(p, ["BATCH config PUT k1 v1 JUMP k2"])
                    == [.error("ERR BATCH op 2: unknown op 'JUMP' (expected PUT, DEL, IFVERSION or INCR); nothing was applied")])
            #expect(await run(p, ["DEL config theme missing"]) == [.integer(1)])
        }
    }

    /// Connections' pipelines on one namespace are merged into one run: a write that reads state,
    /// in one connection's work, sees the writes before it from another connection's, although
    /// none is applied until the run's records are written.
    @Test func aMergedPipelineSeesTheEarlierWritesOfItsRun() async throws {
        try await withProcessor { p in
            _ = await run(p, ["PUT m counter 1"])
            let append = { (suffix: String) in
                Operation.update(key: Array("counter".utf8), Update { .set(($0 ?? []) + Array(suffix.utf8)) })
            }
            let first = CommandProcessor.Work(session: ClientSession(id: 1, peer: nil), commands: [
                .data(namespace: "m", .put(key: Array("counter".utf8), value: Array("a".utf8))),
                .data(namespace: "m", append("b")),
            ])
            let second = CommandProcessor.Work(session: ClientSession(id: 2, peer: nil), commands: [
                .data(namespace: "m", append("c")),
                .data(namespace: "m", .batch([.update(key: Array("counter".utf8), Update { .set(($0 ?? []) + Array("d".utf8)) }),
                                               .put(key: Array("other".utf8), value: Array("x".utf8))])),
            ])
            #expect(first.merge != nil && second.merge != nil, "both are merged with each other")
            let done = Mutex<[CommandProcessor.Done]>([])
            await p.process(batch: [first, second]) { delivered in done.withLock { $0 += delivered } }
            let replies = done.withLock { $0 }.sorted { $0.connection < $1.connection }.map(\.replies)
            #expect(replies == [[.simple("OK"), .bulk("ab")], [.bulk("abc"), .array([.bulk("abcd"), .simple("OK")])]])
            #expect(await run(p, ["GET m counter"]) == [.bulk("abcd")])
        }
    }

    /// A turn's work is grouped by namespace, in the order each first came, past the few looked
    /// for along the list: each namespace's parts stay in their connections' order, and each
    /// connection gets its own replies.
    @Test func aTurnOfManyNamespacesIsGroupedByNamespaceInOrder() async throws {
        let names = (0..<20).map { "ns\($0)" }
        var merged = CommandProcessor.MergedWork()
        var expected: [String: [UInt64]] = [:]
        for (index, name) in (names + names.reversed() + names).enumerated() {
            let work = CommandProcessor.Work(session: ClientSession(id: UInt64(index), peer: nil),
                                             commands: [.data(namespace: name, .put(key: Array("k".utf8), value: Array("\(index)".utf8)))])
            merged.add(work, work.merge!.operations, on: name)
            expected[name, default: []].append(UInt64(index))
        }
        #expect(merged.groups.map(\.namespace) == names)
        for group in merged.groups {
            #expect(group.parts.map(\.connection) == expected[group.namespace], "\(group.namespace)'s parts, in order")
        }
        try await withProcessor { p in
            let works = (0..<12).map { CommandProcessor.Work(session: ClientSession(id: UInt64($0), peer: nil),
                                                             commands: [.data(namespace: "g\($0 % 10)", .increment(key: Array("n".utf8), by: 1))]) }
            let done = Mutex<[CommandProcessor.Done]>([])
            await p.process(batch: works) { delivered in done.withLock { $0 += delivered } }
            let replies = done.withLock { $0 }.sorted { $0.connection < $1.connection }.map(\.replies)
            #expect(replies == (0..<12).map { [.integer($0 < 10 ? 1 : 2)] }, "g0 and g1 were each incremented twice, in order")
        }
    }

    /// `PUT … EPHEMERAL` is a data command bound to its connection's session when queued, so
    /// connections' lock acquires merge into one run like any write: the second acquire of a key
    /// in the run is refused by the first, and each key belongs to the session that wrote it
    /// (the end of one session deletes its keys, not the other's).
    @Test func ephemeralPutsOfTwoConnectionsMergeAndKeepTheirOwners() async throws {
        try await withProcessor { p in
            let parse = { (line: String) in Command(parsing: Request(line.split(separator: " ").map { Array($0.utf8) })) }
            let (one, two) = (ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil))
            guard case .owned = parse("PUT l job x EPHEMERAL") else { Issue.record("not an owned put"); return }
            let first = CommandProcessor.Work(session: one, commands: [parse("PUT l mine-1 a EPHEMERAL").bound(to: one),
                                                                     parse("PUT l job 1 IFVERSION 0 EPHEMERAL").bound(to: one)])
            let second = CommandProcessor.Work(session: two, commands: [parse("PUT l job 2 IFVERSION 0 EPHEMERAL").bound(to: two),
                                                                      parse("PUT l mine-2 b ephemeral PX 60000").bound(to: two)])
            #expect(first.merge != nil && second.merge != nil, "both are merged with each other")
            let done = Mutex<[CommandProcessor.Done]>([])
            await p.process(batch: [first, second]) { delivered in done.withLock { $0 += delivered } }
            let replies = done.withLock { $0 }.sorted { $0.connection < $1.connection }.map(\.replies)
            guard replies.count == 2, replies[0].count == 2, case .integer(let token) = replies[0][1] else {
                Issue.record("replies: \(replies)"); return
            }
            #expect(token > 0 && replies[0][0] == .simple("OK"))
            #expect(replies[1] == [.null, .simple("OK")], "the lock was taken earlier in the run")
            p.endSession(one, reason: .quit)
            var left: [Reply] = []
            for _ in 0..<500 {
                left = await run(p, ["EXISTS l mine-1", "EXISTS l job", "EXISTS l mine-2"])
                if left == [.integer(0), .integer(0), .integer(1)] { break }
                try await Task.sleep(for: .milliseconds(10))
            }
            #expect(left == [.integer(0), .integer(0), .integer(1)], "only the ended session's keys are gone")
        }
    }

    @Test func rejectedWritesAndDeletesNeverCreateANamespace() async throws {
        try await withProcessor { p in
            let bytes = { (words: [String]) in words.map { Array($0.utf8) } }
            let replies = await p.process([bytes(["PUT", "ghost1", "", "v"]), bytes(["BATCH", "ghost2", "PUT", "", "v"]),
                                           bytes(["BATCH", "ghost3", "DEL", "x"]), bytes(["DEL", "ghost4", "x"]),
                                           bytes(["GET", "ghost5", ""]), bytes(["NAMESPACES"])]).replies
            #expect(replies.map(\.errorCode) == ["BADKEY", "BADKEY", nil, nil, "BADKEY", nil])
            #expect(replies.last == .array([]))
        }
    }

    /// Commands that need no waiting (``LocalCommand/runsNow``), which the event loop runs at
    /// once with no task (``CommandProcessor/processNow(_:session:loop:)``): random runs of them,
    /// refusals, MULTI queueing and QUIT among them, answer and leave the session as the same
    /// commands run through ``CommandProcessor/process(_:session:)`` on a twin session.
    @Test func commandsThatNeedNoWaitingAnswerAtOnceAsInATask() async throws {
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store, settings: [("save", ""), ("appendonly", "yes")]) { _ in [] }
        let words = ["PING", "PING hi", "ECHO x", "MULTI", "DISCARD", "UNWATCH", "CLIENT SETNAME a", "CLIENT SETNAME b",
                     "CLIENT GETNAME", "CLIENT ID", "CLIENT SETINFO LIB-NAME py", "SELECT 0", "SELECT 1", "FROB", "HELLO 3",
                     "HELLO 2", "RESET", "CONFIG GET a*", "CONFIG GET *", "COMMAND", "QUIT"]
        var random = SeededGenerator(seed: 48)
        for round in 0..<300 {
            let lines = (0..<Int.random(in: 1...12, using: &random)).map { _ in words.randomElement(using: &random)! }
            let requests = lines.map { Request($0.split(separator: " ").map { Array($0.utf8) }) }
            let (now, task) = (ClientSession(id: 9, peer: nil), ClientSession(id: 9, peer: nil))
            let atOnce = try #require(processor.processNow(requests.map(Command.init(parsing:)), session: now, loop: nil), "round \(round)")
            let inTask = await processor.process(requests.map(Command.init(parsing:)), session: task)
            #expect(atOnce == inTask, "round \(round): \(lines)")
            #expect(now.name == task.name && now.version == task.version && now.inTransaction == task.inTransaction
                    && now.closeRequested == task.closeRequested, "round \(round): \(lines)")
        }
        // One command that waits among them: nothing runs at once, the session is left as it was.
        for waiting in ["EXEC", "DBSIZE", "GET ns k", "WATCH ns"] {
            let session = ClientSession(id: 9, peer: nil)
            let commands = ["CLIENT SETNAME early", "MULTI", waiting, "PING"].map { Command(parsing: Request($0.split(separator: " ").map { Array($0.utf8) })) }
            #expect(processor.processNow(commands, session: session, loop: nil) == nil, "\(waiting)")
            #expect(session.name == nil && !session.inTransaction, "\(waiting)")
        }
        await store.close()
    }
}
