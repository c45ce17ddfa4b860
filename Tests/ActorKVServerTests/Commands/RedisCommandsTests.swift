import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Testing

/// Redis's hash, transaction and connection commands through the processor, against a real
/// store in a temp directory (protocol.md, "Namespaces as Redis hashes", "Transactions",
/// "HELLO and RESP3"). The real clients' side is in Tests/interop.
@Suite("Redis commands: hashes over namespaces, MULTI/EXEC/WATCH, HELLO, CONFIG")
struct RedisCommandsTests {
    let directory = TemporaryDirectory("redis-commands")

    func withProcessor(_ body: (CommandProcessor) async throws -> Void) async throws {
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store, settings: [("save", ""), ("appendonly", "yes"), ("appendfsync", "everysec")]) { _ in [] }
        try await body(processor)
        await store.close()
    }

    /// Runs `lines` (words split on spaces) on `session`, in order, as one connection would.
    func run(_ p: CommandProcessor, _ lines: [String], on session: ClientSession = ClientSession(id: 1, peer: nil)) async -> [Reply] {
        await p.process(lines.map { Command(parsing: Request($0.split(separator: " ").map { Array($0.utf8) })) }, session: session)
    }

    func bulk(_ s: String) -> Reply { .bulk(Array(s.utf8)) }

    @Test("hash commands reply as Redis's do, over the same data as PUT and GET")
    func hashCommands() async throws {
        try await withProcessor { p in
            let replies = await run(p, [
                "HSET users alice 1 bob 2", "HSET users alice 3 carol 4", "HGET users alice", "GET users bob",
                "HMGET users alice nobody carol", "HEXISTS users bob", "HEXISTS users nobody", "HLEN users",
                "HSTRLEN users carol", "HSTRLEN users nobody", "HSETNX users alice 9", "HSETNX users dave 5",
                "HINCRBY users dave -7", "HKEYS users", "HVALS users", "HGETALL users", "HDEL users bob nobody carol", "HGETALL users",
                "HGETALL nowhere", "HMGET nowhere a",
            ])
            #expect(replies == [
                .integer(2), .integer(1), bulk("3"), bulk("2"),
                .array([bulk("3"), .null, bulk("4")]), .integer(1), .integer(0), .integer(3),
                .integer(1), .integer(0), .integer(0), .integer(1),
                .integer(-2), .array(["alice", "bob", "carol", "dave"].map(bulk)), .array(["3", "2", "4", "-2"].map(bulk)),
                .map(["alice", "3", "bob", "2", "carol", "4", "dave", "-2"].map(bulk)), .integer(2), .map(["alice", "3", "dave", "-2"].map(bulk)),
                .map([]), .array([.null]),
            ])
            let errors = await run(p, ["HINCRBY users alice x", "HSET users a", "HSET users a b c", "HINCRBY users alice 9223372036854775807",
                                       "HSET users/x a b", "HLEN users"])
            #expect(errors.map(\.errorCode) == ["ERR", "ERR", "ERR", "ERR", "BADNS", nil])
            #expect(errors.last == .integer(2), "the refused commands changed nothing")
        }
    }

    @Test("a one-field HSET says whether it added the field: absent, deleted or expired earlier → 1, a replaced value → 0; in a pipeline and inside MULTI")
    func oneFieldHashSet() async throws {
        try await withProcessor { p in
            // One pipeline: each HSET sees the writes before it in the same run.
            let replies = await run(p, ["HSET one a 1", "HSET one a 2", "HDEL one a", "HSET one a 3", "HSET one b 4", "HGETALL one",
                                        "MULTI", "HSET one c 5", "HSET one c 6", "HSET one a 7", "EXEC", "HGETALL one"])
            #expect(replies == [
                .integer(1), .integer(0), .integer(1), .integer(1), .integer(1), .map(["a", "3", "b", "4"].map(bulk)),
                .simple("OK"), .simple("QUEUED"), .simple("QUEUED"), .simple("QUEUED"), .array([.integer(1), .integer(0), .integer(0)]),
                .map(["a", "7", "b", "4", "c", "6"].map(bulk)),
            ])
            // A field whose deadline has passed is absent: setting it adds it.
            _ = await run(p, ["PUT one gone x PX 1"])
            try await Task.sleep(for: .milliseconds(20))
            #expect(await run(p, ["HSET one gone y", "HSET one gone z", "PTTL one gone"]) == [.integer(1), .integer(0), .integer(-1)])
            // Each one-field HSET is a record of its own that versions its key, like a PUT.
            let before = try #require(try await p.store.existingNamespace("one")?.sequence)
            #expect(await run(p, ["HSET one b 8", "GETV one b"]) == [.integer(0), .array([bulk("8"), .integer(Int64(before + 1))])])
            let errors = await run(p, ["HSET one \(String(repeating: "k", count: 70_000)) v", "HGET one b"])
            #expect(errors.first?.errorCode != nil, "an over-long key is refused")
            #expect(errors.last == bulk("8"))
        }
    }

    @Test("a multi-field HSET or HDEL is one log record: every field gets the same version, the namespace's sequence moves by one")
    func multiFieldWritesAreOneRecord() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET h a 1"])
            let before = try #require(try await p.store.existingNamespace("h")?.sequence)
            let replies = await run(p, ["HSET h a 2 b 3 c 4", "GETV h a", "GETV h c"])
            #expect(replies[0] == .integer(2))
            #expect(replies[1] == .array([bulk("2"), .integer(Int64(before + 1))]))
            #expect(replies[2] == .array([bulk("4"), .integer(Int64(before + 1))]))
            _ = await run(p, ["HDEL h a b zz"])
            #expect(try await p.store.existingNamespace("h")?.sequence == before + 2)
        }
    }

    @Test("MULTI queues, EXEC applies every queued write as one log record and replies in order; DISCARD drops the queue")
    func multiExec() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["HSET stock pears 1", "MULTI", "HINCRBY stock apples 5", "HSET stock pears 2 plums 3", "HGET stock pears",
                                        "EXISTS stock apples nothing", "DEL stock plums", "PUT stock figs 7", "GET stock figs", "EXEC"])
            #expect(Array(replies[1...8]) == [.simple("OK")] + Array(repeating: .simple("QUEUED"), count: 7))
            #expect(replies[9] == .array([.integer(5), .integer(1), bulk("2"), .integer(1), .integer(1), .simple("OK"), bulk("7")]))
            let versions = await run(p, ["GETV stock apples", "GETV stock pears", "GETV stock figs"])
            let numbers = versions.compactMap { reply -> Int64? in
                if case .array(let pair) = reply, case .integer(let n) = pair[1] { return n }
                return nil
            }
            #expect(numbers.count == 3 && Set(numbers).count == 1, "one record: \(versions)")
            let discarded = await run(p, ["MULTI", "HSET stock apples 0", "DISCARD", "HGET stock apples", "EXEC", "DISCARD"])
            #expect(discarded == [.simple("OK"), .simple("QUEUED"), .simple("OK"), bulk("5"),
                                  .error("ERR EXEC without MULTI"), .error("ERR DISCARD without MULTI")])
            let empty = await run(p, ["MULTI", "EXEC"])
            #expect(empty == [.simple("OK"), .array([])])
        }
    }

    @Test("a whole hash's deadline: EXPIRE's family sets it under NX/XX/GT/LT, TTL's reads it as Redis rounds it, PERSIST removes it; ActorKV's PEXPIRE, PTTL and PERSIST of a key are unchanged")
    func wholeHashDeadline() async throws {
        try await withProcessor { p in
            let at = (Int64(WallClock.milliseconds()) / 1000 + 7200) * 1000  // whole seconds, two hours off
            let replies = await run(p, ["EXPIRE h 100", "TTL h", "HSET h a 1", "TTL h", "PTTL h", "EXPIRE h 100", "TTL h",
                                        "EXPIRE h 200 NX", "EXPIRE h 50 GT", "EXPIRE h 300 xx gt", "TTL h", "PEXPIREAT h \(at) GT", "PEXPIRETIME h", "EXPIRETIME h",
                                        "EXPIREAT h \(at / 1000 + 1) LT", "PERSIST h", "PERSIST h", "TTL h", "EXPIRE h 100 XX", "HPTTL h FIELDS 1 a"])
            #expect(replies[0...4] == [.integer(0), .integer(-2), .integer(1), .integer(-1), .integer(-1)], "\(replies)")
            #expect(replies[5...9] == [.integer(1), .integer(100), .integer(0), .integer(0), .integer(1)], "\(replies)")
            #expect(replies[10] == .integer(300))
            #expect(replies[11...14] == [.integer(1), .integer(at), .integer(at / 1000), .integer(0)], "\(replies)")
            #expect(replies[15...] == [.integer(1), .integer(0), .integer(-1), .integer(0), .array([.integer(-1)])], "\(replies)")
            // A pipelined PEXPIRE of a key and of the hash, and the key's own PTTL.
            let keys = await run(p, ["PEXPIRE h a 5000", "PTTL h a", "PEXPIRE h 9000", "PTTL h", "PERSIST h a", "PTTL h a"])
            guard case .integer(let keyLeft) = keys[1], case .integer(let hashLeft) = keys[3] else { Issue.record("\(keys)"); return }
            #expect(keys[0] == .integer(1) && keys[2] == .integer(1) && keys[4] == .integer(1) && keys[5] == .integer(-1), "\(keys)")
            #expect((4000...5000).contains(keyLeft) && (8000...9000).contains(hashLeft), "\(keys)")
        }
    }

    @Test("a whole hash's deadline: bad options, times and arities are refused as Redis refuses them, nothing changed; a time already passed deletes the hash; in MULTI it sees the queue's writes")
    func wholeHashDeadlineRefusalsAndMulti() async throws {
        try await withProcessor { p in
            let refused = await run(p, ["HSET h a 1", "EXPIRE h 10 NX XX", "EXPIRE h 10 GT LT", "EXPIRE h 10 XX LT", "EXPIRE h 10 soon", "EXPIRE h ten",
                                        "EXPIRE h 9223372036854775807", "PEXPIRE h 10 NX LT", "EXPIRE h", "TTL h h", "TTL", "TTL h"])
            #expect(refused[1] == .error("ERR NX and XX, GT or LT options at the same time are not compatible"), "\(refused)")
            #expect(refused[2] == .error("ERR GT and LT options at the same time are not compatible"))
            #expect(refused[3].errorCode == "ERR" && refused[6] == .error("ERR invalid expire time in 'expire' command"), "\(refused)")
            #expect(refused[4] == .error("ERR Unsupported option soon") && refused[5] == .error("ERR value is not an integer or out of range"))
            #expect(refused[7].errorCode == "ERR" && refused[8].errorCode == "ERR" && refused[9].errorCode == "ERR" && refused[10].errorCode == "ERR")
            #expect(refused[11] == .integer(-1), "nothing given")
            let passed = await run(p, ["EXPIRE h -1", "EXISTS h", "HLEN h", "TTL h", "HSET h b 2", "TTL h"])
            #expect(passed == [.integer(1), .integer(0), .integer(0), .integer(-2), .integer(1), .integer(-1)])
            let queued = await run(p, ["MULTI", "HSET t f 1", "EXPIRE t 60", "TTL t", "PERSIST t", "TTL t", "EXPIRE t 0", "HLEN t", "EXEC"])
            #expect(queued.last == .array([.integer(1), .integer(1), .integer(60), .integer(1), .integer(-1), .integer(1), .integer(0)]), "\(queued)")
        }
    }

    @Test("EXEC with arguments ends the transaction as Redis's does: EXECABORT, the queue dropped and nothing watched, inside MULTI or not")
    func execWithArguments() async throws {
        try await withProcessor { p in
            let other = ClientSession(id: 2, peer: nil)
            let replies = await run(p, ["WATCH w", "MULTI", "HSET w a 1", "EXEC now", "EXEC", "HGET w a", "HSET w b 1"])
            #expect(replies[3] == .error("EXECABORT Transaction discarded because of: wrong number of arguments for 'EXEC' (usage: EXEC)"), "\(replies)")
            #expect(Array(replies[4...]) == [.error("ERR EXEC without MULTI"), .null, .integer(1)], "not queued: \(replies)")
            // The WATCH went with it: another connection's write no longer fails the next EXEC.
            _ = await run(p, ["HSET w c 1"], on: other)
            #expect(await run(p, ["MULTI", "HSET w d 1", "EXEC"]).last == .array([.integer(1)]))
            // Outside MULTI too (Redis answers EXECABORT there as well), and the connection goes on.
            #expect(await run(p, ["EXEC x y", "PING"]) == [replies[3], .simple("PONG")])
        }
    }

    @Test("HMGET, HLEN, HGETALL, HKEYS and HVALS inside MULTI read the namespace where they stand, the queue's earlier writes applied, later ones not; a failure after them applies nothing")
    func wholeNamespaceReadsInsideMulti() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["HSET h a 1 b 2", "MULTI", "HLEN h", "HSET h c 3", "HGETALL h", "HDEL h a", "HKEYS h", "HINCRBY h b 5",
                                        "HVALS h", "HLEN h", "EXEC", "HGETALL h"])
            #expect(Array(replies[1...9]) == [.simple("OK")] + Array(repeating: .simple("QUEUED"), count: 8))
            #expect(replies[10] == .array([.integer(2), .integer(1), .map(["a", "1", "b", "2", "c", "3"].map(bulk)), .integer(1),
                                           .array(["b", "c"].map(bulk)), .integer(7), .array(["7", "3"].map(bulk)), .integer(2)]))
            #expect(replies[11] == .map(["b", "7", "c", "3"].map(bulk)))
            // The writes are still one record, the reads between them included.
            let versions = await run(p, ["GETV h b", "GETV h c"])
            let numbers = versions.compactMap { reply -> Int64? in
                if case .array(let pair) = reply, case .integer(let n) = pair[1] { return n }
                return nil
            }
            #expect(numbers.count == 2 && numbers[0] == numbers[1], "one record: \(versions)")
            // A step after the reads that fails at EXEC: the error, nothing applied.
            let failing = await run(p, ["MULTI", "HSET h d 4", "HGETALL h", "HINCRBY h c 1", "HSET h c x", "HINCRBY h c 1", "EXEC", "HGETALL h"])
            #expect(failing[6].errorCode == "ERR" && failing[7] == .map(["b", "7", "c", "3"].map(bulk)), "\(failing)")
            // HMGET too: each field as the commands before it leave it.
            let fields = await run(p, ["MULTI", "HMGET h b nope c", "HSET h nope 1", "HMGET h nope b", "HDEL h nope", "EXEC"])
            #expect(fields[5] == .array([.array([bulk("7"), .null, bulk("3")]), .integer(1), .array([bulk("1"), bulk("7")]), .integer(1)]), "\(fields)")
            // Reads alone, and in a namespace that does not exist (which they do not create).
            let reads = await run(p, ["MULTI", "HLEN h", "HKEYS h", "EXEC", "MULTI", "HGETALL nowhere", "HLEN nowhere", "EXEC", "NAMESPACES"])
            #expect(reads[3] == .array([.integer(2), .array(["b", "c"].map(bulk))]))
            #expect(reads[7] == .array([.map([]), .integer(0)]))
            #expect(reads[8] == .array([bulk("h")]))
            // A delete-only transaction in a namespace that does not exist reads it empty.
            let missing = await run(p, ["MULTI", "HDEL gone a", "HGETALL gone", "HLEN gone", "EXEC"])
            #expect(missing[4] == .array([.integer(0), .map([]), .integer(0)]))
        }
    }

    @Test("under WATCH, a read of the whole namespace inside MULTI is guarded as the writes are: *-1 when another connection wrote in between")
    func watchedWholeNamespaceRead() async throws {
        try await withProcessor { p in
            let other = ClientSession(id: 2, peer: nil)
            _ = await run(p, ["HSET w a 1"])
            let session = ClientSession(id: 1, peer: nil)
            _ = await run(p, ["WATCH w", "MULTI", "HGETALL w", "HLEN w"], on: session)
            _ = await run(p, ["HSET w b 2"], on: other)
            let exec = await run(p, ["EXEC"], on: session)
            #expect(exec == [.nullArray])
            let again = await run(p, ["WATCH w", "MULTI", "HGETALL w", "HSET w c 3", "HLEN w", "EXEC"], on: session)
            #expect(again.last == .array([.map(["a", "1", "b", "2"].map(bulk)), .integer(1), .integer(3)]))
        }
    }

    @Test("reads and deletes of a hash that does not exist create no namespace: HGETDEL, and HGET, HMGET, HEXISTS, GET, EXISTS queued in a transaction, with or without WATCH")
    func readsCreateNothing() async throws {
        try await withProcessor { p in
            let session = ClientSession(id: 1, peer: nil)
            let replies = await run(p, ["HGETDEL n1 FIELDS 1 a",
                                        "WATCH n2", "MULTI", "HGET n2 a", "HMGET n2 a b", "HEXISTS n2 a", "EXEC",
                                        "MULTI", "GET n3 a", "EXISTS n3 a", "EXEC", "NAMESPACES"], on: session)
            #expect(replies[0] == .array([.null]))
            #expect(replies[6] == .array([.null, .array([.null, .null]), .integer(0)]))
            #expect(replies[10] == .array([.null, .integer(0)]))
            #expect(replies[11] == .array([]), "no namespace was created: \(replies[11])")
            // A write still creates one.
            #expect(await run(p, ["HSET n1 a 1", "NAMESPACES"], on: session) == [.integer(1), .array([bulk("n1")])])
        }
    }

    @Test("a delete that removes nothing (HDEL, DEL, a BATCH's DEL, a failed IFVERSION) is no write: another connection's WATCH holds, as in Redis; one that removes a field breaks it")
    func noOpDeletesKeepAWatch() async throws {
        try await withProcessor { p in
            let other = ClientSession(id: 2, peer: nil)
            let session = ClientSession(id: 1, peer: nil)
            _ = await run(p, ["HSET w a 1"])
            _ = await run(p, ["WATCH w", "MULTI", "HSET w y 1"], on: session)
            let noOps = await run(p, ["HDEL w nosuch", "DEL w nosuch other", "BATCH w DEL nosuch", "PUT w a 2 IFVERSION 999"], on: other)
            #expect(noOps == [.integer(0), .integer(0), .array([.integer(0)]), .null])
            #expect(await run(p, ["EXEC"], on: session) == [.array([.integer(1)])])
            _ = await run(p, ["WATCH w", "MULTI", "HSET w z 1"], on: session)
            #expect(await run(p, ["HDEL w y nosuch"], on: other) == [.integer(1)])
            #expect(await run(p, ["EXEC"], on: session) == [.nullArray])
        }
    }

    @Test("a transaction is all or nothing: a command that fails at EXEC, one refused while queueing, or two namespaces apply nothing")
    func allOrNothing() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET t word hello n 1"])
            let failing = await run(p, ["MULTI", "HINCRBY t n 1", "HINCRBY t word 1", "EXEC", "HGET t n"])
            #expect(failing[3].errorCode == "ERR")
            #expect(failing[4] == bulk("1"), "the first HINCRBY was not applied either")
            let aborted = await run(p, ["MULTI", "HINCRBY t n 1", "FROB t", "HSET t a", "GETV t n", "SCAN t 0", "EXEC", "HGET t n", "PING"])
            #expect(aborted[2].errorCode == "ERR" && aborted[3].errorCode == "ERR" && aborted[4].errorCode == "ERR" && aborted[5].errorCode == "ERR")
            #expect(aborted[6] == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(aborted[7] == bulk("1") && aborted[8] == .simple("PONG"), "nothing applied, and the connection is out of MULTI")
            let cross = await run(p, ["MULTI", "HINCRBY t n 1", "HSET other a b", "EXEC", "HGET t n", "HLEN other"])
            #expect(cross[3].errorCode == "CROSSNS")
            #expect(cross[4] == bulk("1") && cross[5] == .integer(0))
            let nested = await run(p, ["MULTI", "MULTI", "HINCRBY t n 1", "EXEC"])
            #expect(nested == [.simple("OK"), .error("ERR MULTI calls can not be nested"), .simple("QUEUED"), .array([.integer(2)])])
        }
    }

    @Test("MEMORY USAGE: the estimate of the namespace's figures (keys, their bytes, their lifetimes), following every write; nil for a namespace without a key; SAMPLES checked and ignored; MEMORY HELP; refused in MULTI")
    func memoryUsage() async throws {
        try await withProcessor { p in
            func estimate(keys: Int, bytes: Int, lifetimes: Int = 0) -> Reply {
                .integer(Int64(MemoryEstimate(keys: keys, keyAndValueBytes: bytes, keysWithLifetimes: lifetimes).bytes))
            }
            let big = String(repeating: "v", count: 1000)
            let replies = await run(p, [
                "MEMORY USAGE sizes", "HSET sizes a 1 bb 22", "MEMORY USAGE sizes", "memory usage sizes samples 0 SAMPLES 7",
                "HSET sizes a \(big)", "MEMORY USAGE sizes", "PUT sizes t v PX 600000", "MEMORY USAGE sizes",
                "HDEL sizes a bb t", "MEMORY USAGE sizes", "HLEN sizes",
            ])
            #expect(replies == [
                .null, .integer(2), estimate(keys: 2, bytes: 6), estimate(keys: 2, bytes: 6),
                .integer(0), estimate(keys: 2, bytes: 1005), .simple("OK"), estimate(keys: 3, bytes: 1007, lifetimes: 1),
                .integer(3), .null, .integer(0),
            ])
            // Each key costs its bytes and more; a lifetime adds to it.
            #expect(MemoryEstimate(keys: 1, keyAndValueBytes: 10, keysWithLifetimes: 0).bytes > MemoryEstimate(keys: 0, keyAndValueBytes: 0, keysWithLifetimes: 0).bytes + 10)
            #expect(MemoryEstimate(keys: 1, keyAndValueBytes: 10, keysWithLifetimes: 1).bytes > MemoryEstimate(keys: 1, keyAndValueBytes: 10, keysWithLifetimes: 0).bytes)
            // A key whose deadline passed is not counted as held (nil), once nothing else is.
            #expect(await run(p, ["PUT brief k v PX 1"]) == [.simple("OK")])
            try await Task.sleep(for: .milliseconds(20))
            #expect(await run(p, ["MEMORY USAGE brief", "EXISTS brief"]) == [.null, .integer(0)])

            let errors = await run(p, ["MEMORY USAGE sizes SAMPLES -1", "MEMORY USAGE sizes SAMPLES x", "MEMORY USAGE sizes SAMPLES",
                                       "MEMORY USAGE sizes COUNT 5", "MEMORY USAGE", "MEMORY", "MEMORY STATS", "MEMORY DOCTOR",
                                       "MEMORY HELP x", "MEMORY USAGE bad/name"])
            #expect(errors.map(\.errorCode) == ["ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "ERR", "BADNS"], "\(errors)")
            #expect(errors[1] == .error("ERR value is not an integer or out of range"))
            #expect(errors[6] == .error("ERR unknown MEMORY subcommand 'STATS' (usage: MEMORY USAGE ns [SAMPLES count] | MEMORY HELP); INFO gives the server's used_memory and each namespace's live_bytes"))
            guard case .array(let help) = await run(p, ["MEMORY help"])[0] else { Issue.record("MEMORY HELP: no array"); return }
            #expect(help.first == .simple("MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:") && help.count == MemoryCommands.helpLines.count)

            // Not queued in MULTI: refused there, EXEC then aborts, nothing applied.
            let queued = await run(p, ["MULTI", "HSET sizes q 1", "MEMORY USAGE sizes", "EXEC", "HLEN sizes"])
            #expect(queued.map(\.errorCode) == [nil, nil, "ERR", "EXECABORT", nil], "\(queued)")
            #expect(queued.last == .integer(0))
        }
    }

    @Test("Redis's keyspace commands see the namespaces that hold keys as hashes: SCAN 0 (one page), KEYS, DBSIZE, TYPE, EXISTS of one name, TOUCH; SCAN ns cursor still pages a namespace")
    func keyspaceCommands() async throws {
        try await withProcessor { p in
            #expect(await run(p, ["RANDOMKEY", "DBSIZE", "SCAN 0"]) == [.null, .integer(0), .array([bulk("0"), .array([])])])
            let setup = await run(p, ["HSET user.1 n a", "HSET user.2 n b", "HSET config theme dark", "HSET gone a 1", "HDEL gone a"])
            #expect(setup == [.integer(1), .integer(1), .integer(1), .integer(1), .integer(1)])
            let all = Reply.array(["config", "user.1", "user.2"].map(bulk))
            let users = Reply.array(["user.1", "user.2"].map(bulk))
            let replies = await run(p, [
                "SCAN 0", "scan 0 match user.* count 1", "SCAN 0 TYPE HASH", "SCAN 0 TYPE string", "SCAN 0 MATCH [c]* TYPE hash COUNT 100",
                "KEYS *", "KEYS user.?", "KEYS nothing*", "DBSIZE",
                "TYPE config", "TYPE gone", "TYPE never", "EXISTS config", "EXISTS gone", "EXISTS never",
                "TOUCH config gone never config user.1", "touch never",
                "SCAN config 0", "EXISTS config theme nope theme", "HMSET config a 1 b 2", "HMSET config a 3", "HGETALL config",
            ])
            #expect(replies == [
                .array([bulk("0"), all]), .array([bulk("0"), users]), .array([bulk("0"), all]), .array([bulk("0"), .array([])]),
                .array([bulk("0"), .array([bulk("config")])]),
                all, users, .array([]), .integer(3),
                .simple("hash"), .simple("none"), .simple("none"), .integer(1), .integer(0), .integer(0),
                .integer(3), .integer(0),
                .array([bulk("0"), .array([bulk("theme"), bulk("dark")])]), .integer(2), .simple("OK"), .simple("OK"),
                .map(["a", "3", "b", "2", "theme", "dark"].map(bulk)),
            ])
            // RANDOMKEY: one of them, each in time; none on a server without keys.
            var drawn: Set<String> = []
            for _ in 0..<200 where drawn.count < 3 {
                for reply in await run(p, ["RANDOMKEY"]) {
                    if case .bulk(let name) = reply { drawn.insert(String(decoding: name, as: UTF8.self)) } else { drawn.insert("\(reply)") }
                }
            }
            #expect(drawn == ["config", "user.1", "user.2"])
            #expect(await run(p, ["HMSET config a", "HMSET config", "RANDOMKEY x"]).map(\.errorCode) == ["ERR", "ERR", "ERR"])
            let errors = await run(p, ["SCAN 7", "SCAN x", "SCAN 0 COUNT 0", "SCAN 0 COUNT x", "SCAN 0 NOVALUES x", "SCAN 0 MATCH",
                                       "SCAN", "SCAN 0 MATCH a COUNT 1 TYPE hash x", "KEYS", "DBSIZE x", "TYPE a b", "TYPE bad/name",
                                       "TOUCH", "TOUCH config bad/name"])
            // SCAN 0 MATCH, an even count, is SCAN ns cursor: a namespace "0" and no cursor.
            #expect(errors.map(\.errorCode) == ["BADCURSOR", "ERR", "ERR", "ERR", "ERR", "BADCURSOR", "ERR", "ERR", "ERR", "ERR", "ERR", "BADNS",
                                                "ERR", "BADNS"], "\(errors)")
            #expect(errors[1] == .error("ERR wrong number of arguments for 'SCAN' (usage: \(KeyValueCommands.scanUsage))"),
                    "an odd count whose first word is no cursor is SCAN ns cursor with an option missing")
            #expect(errors[4] == .error("ERR unknown SCAN option 'NOVALUES' (expected MATCH, COUNT or TYPE; SCAN ns cursor pages a namespace)"))
            // Neither the reads nor the refusals created a namespace; the data is as it was.
            #expect(await run(p, ["KEYS *", "HGETALL config"]) == [all, .map(["a", "3", "b", "2", "theme", "dark"].map(bulk))])
            // TYPE and EXISTS of one name, queued: each sees the writes queued before it.
            let queued = await run(p, ["MULTI", "TYPE fresh", "EXISTS fresh", "HSET fresh a 1", "TYPE fresh", "EXISTS fresh", "EXEC", "DBSIZE"])
            #expect(queued.last == .integer(4))
            #expect(queued[6] == .array([.simple("none"), .integer(0), .integer(1), .simple("hash"), .integer(1)]), "\(queued)")
        }
    }

    @Test("HINCRBYFLOAT adds in long double and writes the sum as Redis does (digits checked against redis-server 7.0); refuses what Redis refuses, writing nothing; keeps a deadline; queues in MULTI")
    func floatIncrements() async throws {
        try await withProcessor { p in
            // Each reply as redis-server 7.0.15 gave it for the same commands on x86-64.
            let steps: [(String, Reply)] = [
                ("0.1", bulk("0.1")), ("0.1", bulk("0.2")), ("0.1", bulk("0.3")), ("1e3", bulk("1000.29999999999999999")),
                ("-2000.5", bulk("-1000.20000000000000001")), ("3.0e-5", bulk("-1000.19997000000000004")), ("5", bulk("-995.19997000000000004")),
                (" 1", .error("ERR value is not a valid float")), ("1 ", .error("ERR value is not a valid float")),
                ("abc", .error("ERR value is not a valid float")), ("nan", .error("ERR value is not a valid float")),
                ("inf", .error("ERR value is NaN or Infinity")), ("-inf", .error("ERR value is NaN or Infinity")),
                ("+995.5", bulk("0.30002999999999996")), ("0x10", bulk("16.30002999999999996")), (".5", bulk("16.80002999999999996")),
            ]
            var replies: [Reply] = []
            for (increment, _) in steps {
                replies += await p.process([Command(parsing: Request([Array("HINCRBYFLOAT".utf8), Array("f".utf8), Array("x".utf8), Array(increment.utf8)]))],
                                           session: ClientSession(id: 1, peer: nil))
            }
            #expect(replies == steps.map(\.1), "\(replies)")
            let edges = await run(p, ["HSET f s abc", "HINCRBYFLOAT f s 1", "HSET f z -0", "HINCRBYFLOAT f z 0", "HINCRBYFLOAT f new 10",
                                      "HINCRBYFLOAT f n2 -0.0", "HSET f i 123", "HINCRBYFLOAT f i 1.5", "HINCRBYFLOAT f y 100000000000000000000",
                                      "HINCRBYFLOAT f big 1e4932", "HINCRBYFLOAT f big 1e4932", "HGET f big", "HINCRBYFLOAT f s", "HGET f s"])
            #expect(edges == [.integer(1), .error("ERR hash value is not a float"), .integer(1), bulk("0"), bulk("10"),
                              bulk("0"), .integer(1), bulk("124.5"), bulk("100000000000000000000"),
                              edges[9], .error("ERR increment would produce NaN or Infinity"), edges[9], edges[12], bulk("abc")], "\(edges)")
            #expect(edges[12].errorCode == "ERR", "arity")
            // A deadline is kept, as HINCRBY keeps one.
            let ttl = await run(p, ["PUT f t 1.5 PX 600000", "HINCRBYFLOAT f t 1", "HGET f t", "PTTL f t"])
            #expect(ttl[1] == bulk("2.5") && ttl[2] == bulk("2.5"))
            if case .integer(let left) = ttl[3] { #expect(left > 0 && left <= 600_000) } else { Issue.record("\(ttl)") }
            // In MULTI: a bad increment is refused when queued; a value that is not a float
            // fails EXEC, applying nothing; otherwise the sum is EXEC's entry.
            let queued = await run(p, ["MULTI", "HINCRBYFLOAT f q nan", "EXEC", "MULTI", "HSET f q 1", "HINCRBYFLOAT f s 1", "EXEC", "HGET f q",
                                       "MULTI", "HSET f q 1", "HINCRBYFLOAT f q 0.25", "EXEC"])
            #expect(queued[1].errorCode == "ERR" && queued[2].errorCode == "EXECABORT")
            #expect(queued[6] == .error("ERR hash value is not a float") && queued[7] == .null, "\(queued)")
            #expect(queued[11] == .array([.integer(1), bulk("1.25")]), "\(queued)")
        }
    }

    @Test("HGETDEL: each field's value, then the field gone, as one log record; a field named twice is read once; queues in MULTI; Redis's errors")
    func getAndDelete() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET g a 1 b 2 c 3"])
            let before = try #require(try await p.store.existingNamespace("g")?.sequence)
            let replies = await run(p, ["HGETDEL g FIELDS 3 a missing a", "HKEYS g",
                                        "HGETDEL nowhere FIELDS 1 a", "HGETDEL g FIELDS 2 b", "HGETDEL g FIELD 1 b", "HGETDEL g FIELDS 0 b",
                                        "MULTI", "HSET g d 4", "HGETDEL g FIELDS 2 d c", "HLEN g", "EXEC", "TYPE g"])
            #expect(replies[0] == .array([bulk("1"), .null, .null]), "\(replies[0])")
            #expect(replies[1] == .array([bulk("b"), bulk("c")]))
            #expect(try await p.store.existingNamespace("g")?.sequence == before + 2, "one record, and one for the transaction")
            #expect(replies[2] == .array([.null]))
            #expect(replies[3] == .error("ERR The `numfields` parameter must match the number of arguments"))
            #expect(replies[4] == .error("ERR Mandatory argument FIELDS is missing or not at the right position"))
            #expect(replies[5] == .error("ERR Number of fields must be a positive integer"))
            #expect(replies[8] == .simple("QUEUED"))
            #expect(replies[10] == .array([.integer(1), .array([bulk("4"), bulk("3")]), .integer(1)]), "\(replies[10])")
            #expect(replies[11] == .simple("hash"), "b is left")
        }
    }

    @Test("HRANDFIELD: one field, count distinct ones, -count with repeats, WITHVALUES as pairs (flat in RESP2, arrays of two in RESP3); Redis's errors")
    func randomFields() async throws {
        try await withProcessor { p in
            let session = ClientSession(id: 1, peer: nil)
            let fields: Set<String> = ["a", "b", "c"]
            _ = await run(p, ["HSET r a 1 b 2 c 3"], on: session)
            let replies = await run(p, ["HRANDFIELD nowhere", "HRANDFIELD nowhere 3", "HRANDFIELD r 0", "HRANDFIELD r", "HRANDFIELD r 5",
                                        "HRANDFIELD r 2", "HRANDFIELD r -7", "HRANDFIELD r 2 WITHVALUES", "HRANDFIELD r -4 withvalues"], on: session)
            #expect(Array(replies[0...2]) == [.null, .array([]), .array([])])
            #expect(replies[3].bulkText.map { ["a", "b", "c"].contains($0) } == true, "\(replies[3])")
            guard case .array(let all) = replies[4].unpacked, case .array(let two) = replies[5].unpacked, case .array(let seven) = replies[6].unpacked,
                  case .pairs(let flat) = replies[7], case .pairs(let repeated) = replies[8] else { Issue.record("\(replies)"); return }
            let names = { (replies: [Reply]) in replies.map { $0.bulkText ?? "\($0)" } }
            #expect(all.count == 3 && Set(names(all)) == fields, "a count past the size: every field once")
            #expect(two.count == 2 && Set(names(two)).count == 2 && Set(names(two)).isSubset(of: fields), "distinct")
            #expect(seven.count == 7 && Set(names(seven)).isSubset(of: fields), "a negative count: that many, repeats allowed")
            #expect(flat.count == 4 && repeated.count == 8)
            for pairs in [flat, repeated] {
                for i in stride(from: 0, to: pairs.count, by: 2) {
                    let value: [String: String] = ["a": "1", "b": "2", "c": "3"]
                    #expect(pairs[i].bulkText.flatMap { value[$0] } == pairs[i + 1].bulkText, "\(pairs)")
                }
            }
            // RESP3 sends each field and value as an array of two (the encoding: RESP3EncodingTests).
            guard case .array(let nested) = replies[8].arrayForm(in: .resp3) else { Issue.record("RESP3"); return }
            #expect(nested.count == 4 && nested.allSatisfy { if case .array(let pair) = $0 { pair.count == 2 } else { false } }, "\(nested)")
            #expect(replies[8].arrayForm(in: .resp2) == .array(repeated))
            let errors = await run(p, ["HRANDFIELD r x", "HRANDFIELD r 1 VALUES", "HRANDFIELD r -100001", "HRANDFIELD r -9223372036854775808",
                                       "HRANDFIELD r 1 WITHVALUES x"], on: session)
            #expect(errors[0] == .error("ERR value is not an integer or out of range") && errors[1] == .error("ERR syntax error"))
            #expect(errors[2].errorCode == "ERR" && errors[3].errorCode == "ERR" && errors[4].errorCode == "ERR")
        }
    }

    @Test("HRANDFIELD queues in MULTI and draws from the namespace as the commands queued before it leave it")
    func randomFieldsInTransaction() async throws {
        try await withProcessor { p in
            let session = ClientSession(id: 1, peer: nil)
            let replies = await run(p, ["MULTI", "HRANDFIELD q", "HRANDFIELD q 3", "HSET q only 1", "HRANDFIELD q", "HRANDFIELD q -3 WITHVALUES",
                                        "HSET q other 2", "HRANDFIELD q 5", "HDEL q only other", "HRANDFIELD q -2", "EXEC"], on: session)
            #expect(Array(replies[0...9]) == [.simple("OK")] + Array(repeating: .simple("QUEUED"), count: 9), "\(replies)")
            guard case .array(let exec) = replies[10], exec.count == 9, case .array(let both) = exec[6].unpacked else { Issue.record("\(replies)"); return }
            #expect(Array(exec[0...5]) == [.null, .array([]), .integer(1), bulk("only"),
                                           .pairs([bulk("only"), bulk("1"), bulk("only"), bulk("1"), bulk("only"), bulk("1")]), .integer(1)], "\(exec)")
            #expect(Set(both.map { $0.bulkText ?? "\($0)" }) == ["only", "other"] && both.count == 2, "\(both)")
            #expect(Array(exec[7...8]) == [.integer(2), .array([])], "\(exec)")
            // Refused when queued like any command: a bad count makes EXEC abort, nothing applied.
            let refused = await run(p, ["MULTI", "HSET q a 1", "HRANDFIELD q x", "EXEC", "HLEN q"], on: session)
            #expect(refused[2].errorCode == "ERR" && refused[3].errorCode == "EXECABORT" && refused[4] == .integer(0), "\(refused)")
        }
    }

    @Test("the refusal of a command that cannot be queued lists the commands that can, and each of them queues")
    func queueableCommandsListed() async throws {
        let samples = ["GET": "GET q k", "PUT": "PUT q k v", "DEL": "DEL q k", "EXISTS": "EXISTS q k", "INCR": "INCR q n",
                       "HGET": "HGET q k", "HSET": "HSET q k v", "HSETNX": "HSETNX q k v", "HDEL": "HDEL q k",
                       "HEXISTS": "HEXISTS q k", "HSTRLEN": "HSTRLEN q k", "HINCRBY": "HINCRBY q n 1",
                       "HLEN": "HLEN q", "HGETALL": "HGETALL q", "HKEYS": "HKEYS q", "HVALS": "HVALS q", "HMGET": "HMGET q k j",
                       "TYPE": "TYPE q", "HMSET": "HMSET q k v j w", "HINCRBYFLOAT": "HINCRBYFLOAT q f 1.5", "HGETDEL": "HGETDEL q FIELDS 1 k",
                       "PEXPIRE": "PEXPIRE q k 100", "PERSIST": "PERSIST q k", "PTTL": "PTTL q k", "HGETEX": "HGETEX q EX 10 FIELDS 1 k",
                       "HSETEX": "HSETEX q FXX EX 10 FIELDS 1 k v", "HEXPIRE": "HEXPIRE q 10 FIELDS 1 k", "HPEXPIRE": "HPEXPIRE q 10 FIELDS 1 k",
                       "HEXPIREAT": "HEXPIREAT q 1 FIELDS 1 k", "HPEXPIREAT": "HPEXPIREAT q 1 FIELDS 1 k", "HPERSIST": "HPERSIST q FIELDS 1 k",
                       "HTTL": "HTTL q FIELDS 1 k", "HPTTL": "HPTTL q FIELDS 1 k", "HEXPIRETIME": "HEXPIRETIME q FIELDS 1 k",
                       "HPEXPIRETIME": "HPEXPIRETIME q FIELDS 1 k", "HRANDFIELD": "HRANDFIELD q 2 WITHVALUES", "PING": "PING", "ECHO": "ECHO hi", "ROLE": "ROLE",
                       "EXPIRE": "EXPIRE q 10 NX", "EXPIREAT": "EXPIREAT q 4000000000", "PEXPIREAT": "PEXPIREAT q 4000000000000 GT",
                       "TTL": "TTL q", "EXPIRETIME": "EXPIRETIME q", "PEXPIRETIME": "PEXPIRETIME q"]
        try await withProcessor { p in
            let refused = await run(p, ["MULTI", "SCAN q 0", "DISCARD"])[1]
            guard case .error(let text) = refused,
                  let listed = text.split(separator: "(").dropFirst().first?.split(separator: ";").first else {
                Issue.record("\(refused)")
                return
            }
            let names = listed.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(Set(names) == Set(samples.keys), "\(text)")
            let queued = await run(p, ["MULTI"] + names.compactMap { samples[$0] } + ["EXEC"])
            #expect(Array(queued.dropFirst().dropLast()) == Array(repeating: .simple("QUEUED"), count: names.count), "\(queued)")
            #expect(queued.last.map { if case .array = $0 { true } else { false } } == true, "\(queued)")
        }
    }

    @Test("ROLE answers Redis's primary without replicas, alone and queued in MULTI; INFO's Replication section says the same")
    func role() async throws {
        try await withProcessor { p in
            let master = Reply.array([bulk("master"), .integer(0), .array([])])
            let replies = await run(p, ["ROLE", "MULTI", "ROLE", "HSET r a 1", "EXEC", "ROLE x"])
            #expect(Array(replies.prefix(5)) == [master, .simple("OK"), .simple("QUEUED"), .simple("QUEUED"), .array([master, .integer(1)])],
                    "\(replies)")
            #expect(replies[5] == .error("ERR wrong number of arguments for 'ROLE' (usage: ROLE)"))
        }
    }

    @Test("PING and ECHO queue in MULTI: EXEC gives their replies in their places among the data commands' (as redis-server 7.0 does), alone too; under a failed WATCH, a refusal or a failure at EXEC, EXEC's reply is what it would be without them")
    func pingAndEchoQueued() async throws {
        try await withProcessor { p in
            let (me, other) = (ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil))
            let mixed = await run(p, ["MULTI", "PING", "ECHO hi", "HSET t a 1", "PING x", "HGET t a", "EXEC"], on: me)
            #expect(Array(mixed.prefix(6)) == [.simple("OK")] + Array(repeating: .simple("QUEUED"), count: 5))
            #expect(mixed.last == .array([.simple("PONG"), bulk("hi"), .integer(1), bulk("x"), bulk("1")]), "\(mixed)")
            // No data command at all, and a data command between two of them.
            #expect(await run(p, ["MULTI", "PING", "EXEC"], on: me).last == .array([.simple("PONG")]))
            #expect(await run(p, ["MULTI", "ECHO a", "HINCRBY t n 2", "ECHO b", "EXEC"], on: me).last == .array([bulk("a"), .integer(2), bulk("b")]))
            // A WATCH that fails: *-1, with or without a data command.
            for queue in [["PING"], ["PING", "HSET t a 2"]] {
                _ = await run(p, ["WATCH t"], on: me)
                _ = await run(p, ["HSET t other 1"], on: other)
                #expect(await run(p, ["MULTI"] + queue + ["EXEC"], on: me).last == .nullArray, "\(queue)")
            }
            // A refused command makes EXEC refuse, PING or not; so does one failing at EXEC, and two namespaces.
            #expect(await run(p, ["MULTI", "PING", "FROB t", "EXEC"], on: me).last?.errorCode == "EXECABORT")
            _ = await run(p, ["HSET t word abc"], on: me)
            let failed = await run(p, ["MULTI", "PING", "HSET t a 3", "HINCRBY t word 1", "EXEC", "HGET t a"], on: me)
            #expect(failed.suffix(2) == [.error("ERR value is not an integer"), bulk("1")], "\(failed)")
            #expect(await run(p, ["MULTI", "HSET t a 4", "PING", "HSET u a 4", "EXEC"], on: me).last?.errorCode == "CROSSNS")
            // A queued message weighs its bytes and 256 against the limit (1,000 here).
            let big = String(repeating: "m", count: 700)
            let limited = await run(p, ["MULTI", "ECHO \(big)", "EXEC", "MULTI", "PING", "ECHO \(big)", "EXEC"],
                                    on: ClientSession(id: 3, peer: nil, transactionLimit: 1000))
            #expect(limited[2] == .array([bulk(big)]) && limited[5].errorCode == "TOOBIG" && limited[6].errorCode == "EXECABORT", "\(limited)")
            // RESP3: the same replies, EXEC's array of them.
            let resp3 = await run(p, ["HELLO 3", "MULTI", "PING", "HGET t missing", "EXEC"], on: me)
            #expect(resp3.last == .array([.simple("PONG"), .null]), "\(resp3)")
        }
    }

    @Test("a MULTI queue weighs its commands (keys, values, 256 bytes each) against the session's limit: past it TOOBIG, and EXEC applies nothing")
    func queueLimit() async throws {
        try await withProcessor { p in
            let session = ClientSession(id: 1, peer: nil, transactionLimit: 1000)
            // 256 + 2 + 1 bytes per HSET t fN v: three fit in 1,000, the fourth does not, nor
            // does a read after it (256 + 2).
            let replies = await run(p, ["MULTI", "HSET t f1 a", "HSET t f2 b", "HSET t f3 c", "HSET t f4 d", "HGET t f1", "EXEC", "HLEN t"], on: session)
            #expect(Array(replies[0...3]) == [.simple("OK"), .simple("QUEUED"), .simple("QUEUED"), .simple("QUEUED")])
            #expect(replies[4] == .error("TOOBIG transaction too large: its watched namespaces and queued commands would hold more than 1000 bytes (--max-request-bytes); EXEC will apply nothing"))
            #expect(replies[5].errorCode == "TOOBIG")
            #expect(replies[6].errorCode == "EXECABORT" && replies[7] == .integer(0))
            // A multi-field HSET counts each field; the next queue starts from nothing.
            let next = await run(p, ["MULTI", "HSET t f1 a f2 b f3 c", "EXEC", "MULTI", "HSET t f1 a f2 b f3 c f4 d", "EXEC", "HLEN t"], on: session)
            #expect(Array(next[0...2]) == [.simple("OK"), .simple("QUEUED"), .array([.integer(3)])])
            #expect(next[4].errorCode == "TOOBIG" && next[5].errorCode == "EXECABORT" && next[6] == .integer(3))
        }
    }

    @Test("WATCH counts each watched name (its bytes and 128) against the same limit as the queue: past it TOOBIG and nothing watched; EXEC, UNWATCH and RESET free it")
    func watchLimit() async throws {
        try await withProcessor { p in
            let session = ClientSession(id: 1, peer: nil, transactionLimit: 1000)
            // 129 bytes a name: 7 fit in 1,000, 8 do not, and a refused WATCH watches none of its names.
            let refused = await run(p, ["WATCH a b c d e f g h", "MULTI", "HSET w f 1", "EXEC"], on: session)
            #expect(refused[0] == .error("TOOBIG transaction too large: its watched namespaces and queued commands would hold more than 1000 bytes (--max-request-bytes); this WATCH watches nothing"))
            #expect(session.watchesNothing)
            #expect(refused[3] == .array([.integer(1)]))
            // Watched names and the queue share it: 3 names (387) and two HSETs (2 x 258) fit, a third does not.
            let shared = await run(p, ["WATCH a b c", "WATCH a b", "MULTI", "HSET w f 2", "HSET w g 2", "HSET w h 2", "EXEC", "HGET w f"], on: session)
            #expect(Array(shared[0...5]) == [.simple("OK"), .simple("OK"), .simple("OK"), .simple("QUEUED"), .simple("QUEUED"), shared[5]])
            #expect(shared[5].errorCode == "TOOBIG" && shared[6].errorCode == "EXECABORT" && shared[7] == bulk("1"))
            // EXEC forgot them, UNWATCH and RESET too: each time 7 names fit again.
            let freed = await run(p, ["WATCH a b c d e f g", "UNWATCH", "WATCH a b c d e f g", "RESET", "WATCH a b c d e f g"], on: session)
            #expect(freed == [.simple("OK"), .simple("OK"), .simple("OK"), .switching(to: .resp2, .simple("RESET")), .simple("OK")])
        }
    }

    @Test("WATCH: EXEC applies nothing (*-1) when a watched namespace was written since, by another connection or this one; UNWATCH, EXEC and DISCARD forget")
    func watch() async throws {
        try await withProcessor { p in
            let (me, other) = (ClientSession(id: 1, peer: nil), ClientSession(id: 2, peer: nil))
            _ = await run(p, ["HSET c visits 41"], on: me)
            // Untouched since WATCH: applied.
            #expect(await run(p, ["WATCH c", "HGET c visits", "MULTI", "HSET c visits 42", "EXEC"], on: me).last == .array([.integer(0)]))
            // Another connection writes in between: nothing applied.
            _ = await run(p, ["WATCH c"], on: me)
            _ = await run(p, ["HSET c other 1"], on: other)
            #expect(await run(p, ["MULTI", "HSET c visits 43", "EXEC", "HGET c visits"], on: me) == [.simple("OK"), .simple("QUEUED"), .nullArray, bulk("42")])
            // EXEC forgot the watch: the next transaction applies.
            #expect(await run(p, ["MULTI", "HSET c visits 43", "EXEC"], on: me).last == .array([.integer(0)]))
            // A watched namespace the transaction does not write, written by this connection itself.
            #expect(await run(p, ["WATCH d", "HSET d x 1", "MULTI", "HSET c visits 44", "EXEC", "HGET c visits"], on: me).suffix(2) == [.nullArray, bulk("43")])
            // A namespace that does not exist yet, then created by another connection.
            _ = await run(p, ["WATCH fresh"], on: me)
            _ = await run(p, ["HSET fresh a 1"], on: other)
            #expect(await run(p, ["MULTI", "HSET fresh a 2", "EXEC"], on: me).last == .nullArray)
            // UNWATCH and DISCARD forget.
            _ = await run(p, ["WATCH c", "UNWATCH"], on: me)
            _ = await run(p, ["HSET c other 2"], on: other)
            #expect(await run(p, ["MULTI", "HSET c visits 45", "EXEC"], on: me).last == .array([.integer(0)]))
            _ = await run(p, ["WATCH c", "MULTI", "DISCARD"], on: me)
            _ = await run(p, ["HSET c other 3"], on: other)
            #expect(await run(p, ["MULTI", "HSET c visits 46", "EXEC"], on: me).last == .array([.integer(0)]))
            #expect(await run(p, ["MULTI", "WATCH c", "EXEC"], on: me) == [.simple("OK"), .error("ERR WATCH inside MULTI is not allowed"), .array([])])
        }
    }

    @Test("HELLO answers the server's facts as a map and switches the protocol; other versions get NOPROTO, AUTH an error; RESET goes back")
    func hello() async throws {
        try await withProcessor { p in
            let session = ClientSession(id: 7, peer: nil)
            let replies = await run(p, ["HELLO 3 SETNAME app", "CLIENT GETNAME", "HELLO", "HELLO 4", "HELLO x", "HELLO 3 AUTH u p", "HELLO 2"], on: session)
            guard case .switching(.resp3, .map(let facts)) = replies[0] else { Issue.record("HELLO 3: \(replies[0])"); return }
            #expect(facts == ["server", "actorkv", "version", ActorKVVersion.string].map(bulk) + [bulk("proto"), .integer(3), bulk("id"), .integer(7)]
                + ["mode", "standalone", "role", "master", "modules"].map(bulk) + [.array([])])
            #expect(replies[1] == bulk("app"))
            guard case .switching(.resp3, _) = replies[2] else { Issue.record("HELLO keeps RESP3: \(replies[2])"); return }
            #expect(replies[3] == .error("NOPROTO unsupported protocol version"))
            #expect(replies[4].errorCode == "ERR" && replies[5].errorCode == "ERR")
            guard case .switching(.resp2, _) = replies[6] else { Issue.record("HELLO 2: \(replies[6])"); return }
            #expect(session.version == .resp2)
            _ = await run(p, ["HELLO 3", "MULTI", "WATCH x"], on: session)
            #expect(session.version == .resp3 && session.inTransaction)
            #expect(await run(p, ["RESET", "CLIENT GETNAME"], on: session) == [.switching(to: .resp2, .simple("RESET")), .null])
            #expect(session.version == .resp2 && !session.inTransaction)
        }
    }

    @Test("CLIENT SETINFO, CLIENT INFO, SELECT 0, CONFIG GET with globs; unknown commands name protocol.md")
    func connectionCommands() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["CLIENT SETINFO LIB-NAME redis-py", "CLIENT SETINFO LIB-VER 8.1.0", "CLIENT INFO",
                                        "CLIENT SETINFO COLOUR red", "SELECT 0", "SELECT 1", "CONFIG GET save", "CONFIG GET APPEND*",
                                        "CONFIG GET nothing", "CONFIG SET save x", "SET k v", "LPUSH l a"])
            #expect(replies[0] == .simple("OK") && replies[1] == .simple("OK"))
            guard case .bulk(let info) = replies[2] else { Issue.record("CLIENT INFO: \(replies[2])"); return }
            #expect(String(decoding: info, as: UTF8.self).contains("lib-name=redis-py lib-ver=8.1.0"))
            #expect(replies[3].errorCode == "ERR" && replies[4] == .simple("OK") && replies[5].errorCode == "ERR")
            #expect(replies[6] == .map([bulk("save"), bulk("")]))
            #expect(replies[7] == .map(["appendonly", "yes", "appendfsync", "everysec"].map(bulk)))
            #expect(replies[8] == .map([]) && replies[9].errorCode == "ERR")
            #expect(replies[10] == .error("ERR unknown command 'SET'; ActorKV keeps keys in namespaces: see protocol.md \"Differences from Redis\""))
            #expect(replies[11].errorCode == "ERR")
        }
    }

    /// Pages through `ns` with HSCAN to the end, each page on a session of its own (as a
    /// client's pool might), calling `between` after each page; returns the fields seen.
    func hscanAll(_ p: CommandProcessor, _ ns: String, options: String = "", between: () async -> Void = {}) async throws -> [String] {
        var cursor = "0"
        var seen: [String] = []
        repeat {
            let reply = await run(p, ["HSCAN \(ns) \(cursor) \(options)"], on: ClientSession(id: UInt64.random(in: 100...1_000_000), peer: nil))[0]
            guard case .array(let parts) = reply, case .bulk(let next) = parts[0], case .array(let flat) = parts[1].unpacked else {
                throw TestFailure("HSCAN reply: \(reply)")
            }
            cursor = String(decoding: next, as: UTF8.self)
            let number = try #require(UInt64(cursor), "the cursor is a decimal integer: \(cursor)")
            #expect(number <= 1 << 53)
            for case (let i, .bulk(let field)) in flat.enumerated() where i % 2 == 0 { seen.append(String(decoding: field, as: UTF8.self)) }
            await between()
        } while cursor != "0"
        return seen
    }

    @Test("HSCAN: integer cursors that work on any connection, every stable field exactly once under concurrent writes, MATCH, unknown cursors refused")
    func hashScan() async throws {
        try await withProcessor { p in
            let stable = (0..<500).map { "f\($0)" }
            for chunk in stride(from: 0, to: stable.count, by: 100) {
                _ = await run(p, ["HSET h " + stable[chunk..<(chunk + 100)].map { "\($0) v" }.joined(separator: " ")])
            }
            var round = 0
            let seen = try await hscanAll(p, "h", options: "COUNT 37") {
                // Writers add and remove other fields between pages, before and after the cursor.
                round += 1
                _ = await run(p, ["HSET h a\(round) x z\(round) y", "HDEL h a\(round - 1) z\(round - 1)"])
            }
            let stableSeen = seen.filter { $0.hasPrefix("f") }
            #expect(stableSeen.count == stable.count && Set(stableSeen) == Set(stable), "each stable field exactly once")
            let matched = try await hscanAll(p, "h", options: "MATCH f1?")
            #expect(matched == (10...19).map { "f\($0)" })
            let matchedEverywhere = try await hscanAll(p, "h", options: "MATCH *9 COUNT 50")
            #expect(matchedEverywhere.allSatisfy { $0.hasSuffix("9") })
            #expect(Set(stable.filter { $0.hasSuffix("9") }).isSubset(of: Set(matchedEverywhere)))
            // NOVALUES (Redis 7.4), anywhere among the options: the fields alone.
            for options in ["MATCH f1? NOVALUES", "NOVALUES MATCH f1? COUNT 3", "novalues match f1?"] {
                var cursor = "0"
                var fields: [Reply] = []
                repeat {
                    guard case .array(let parts) = await run(p, ["HSCAN h \(cursor) \(options)"])[0], case .bulk(let next) = parts[0],
                          case .array(let page) = parts[1].unpacked else { Issue.record("HSCAN \(options)"); break }
                    fields += page
                    cursor = String(decoding: next, as: UTF8.self)
                } while cursor != "0"
                #expect(fields == (10...19).map { bulk("f\($0)") }, "\(options)")
            }
            let errors = await run(p, ["HSCAN h 12345", "HSCAN h k6162", "HSCAN h -1", "HSCAN h 0 COUNT 0", "HSCAN h 0 FILTER x", "HSCAN nowhere 0",
                                       "HSCAN h 0 MATCH", "HSCAN h 0 NOVALUES COUNT"])
            #expect(errors[6].errorCode == "ERR" && errors[7].errorCode == "ERR")
            #expect(errors[0] == .error("BADCURSOR unknown or expired HSCAN cursor; start again from 0"))
            #expect(errors[1].errorCode == "BADCURSOR" && errors[2].errorCode == "BADCURSOR" && errors[3].errorCode == "ERR" && errors[4].errorCode == "ERR")
            #expect(errors[5] == .array([bulk("0"), .array([])]))
            // A cursor of one namespace is not another's.
            guard case .array(let first) = await run(p, ["HSCAN h 0 COUNT 1"])[0], case .bulk(let cursor) = first[0] else { Issue.record("HSCAN"); return }
            _ = await run(p, ["HSET other a b c d"])
            #expect(await run(p, ["HSCAN other \(String(decoding: cursor, as: UTF8.self))"])[0].errorCode == "BADCURSOR")
        }
    }
}
