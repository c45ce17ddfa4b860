import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import Testing

/// Redis 7.4's field expiry commands over a namespace's keys (protocol.md, "Field expiry"), with
/// the processor's harness of ``RedisCommandsTests``.
extension RedisCommandsTests {
    /// The integers of an array reply (nil for any other reply).
    func integers(_ reply: Reply) -> [Int64]? {
        guard case .array(let items) = reply else { return nil }
        return items.map { if case .integer(let n) = $0 { return n }; return .min }
    }

    @Test("HEXPIRE's family sets, conditions, deletes and removes deadlines per field with Redis's numbers; HTTL's family reads them back")
    func fieldExpiry() async throws {
        try await withProcessor { p in
            let set = await run(p, ["HSET h a 1 b 2 c 3 d 4", "HEXPIRE h 100 FIELDS 3 a b missing", "HPEXPIRE h 50000 FIELDS 1 c",
                                    "HTTL h FIELDS 4 a c d missing", "HPTTL h FIELDS 2 a d", "HTTL nowhere FIELDS 1 a"])
            #expect(integers(set[1]) == [1, 1, -2] && integers(set[2]) == [1])
            #expect(integers(set[3]) == [100, 50, -1, -2], "seconds rounded up: \(set[3])")
            let pttl = integers(set[4])!
            #expect(pttl[0] > 99_000 && pttl[0] <= 100_000 && pttl[1] == -1)
            #expect(integers(set[5]) == [-2])
            // Conditions: NX only without a deadline, XX only with one, GT later, LT earlier (a
            // field without a deadline is later than any).
            let conditions = await run(p, ["HEXPIRE h 200 NX FIELDS 2 a d", "HEXPIRE h 300 XX FIELDS 2 a b", "HEXPIRE h 10 GT FIELDS 3 a b c",
                                           "HEXPIRE h 400 gt FIELDS 2 b d", "HEXPIRE h 20 LT FIELDS 2 a c", "HTTL h FIELDS 4 a b c d"])
            #expect(conditions.compactMap(integers) == [[0, 1], [1, 1], [0, 0, 0], [1, 1], [1, 1], [20, 400, 20, 400]], "\(conditions)")
            // Absolute times: HEXPIREAT, HPEXPIREAT, read back by HEXPIRETIME and HPEXPIRETIME.
            let at = await run(p, ["HPEXPIREAT h 4102444800123 FIELDS 1 a", "HEXPIREAT h 4102444801 FIELDS 1 b",
                                   "HPEXPIRETIME h FIELDS 3 a b missing", "HEXPIRETIME h FIELDS 3 a b d", "HPEXPIRETIME h FIELDS 1 x", "HSET h x 0",
                                   "HEXPIRETIME h FIELDS 1 x"])
            #expect(integers(at[2]) == [4_102_444_800_123, 4_102_444_801_000, -2])
            #expect(integers(at[3])![0] == 4_102_444_801 && integers(at[3])![1] == 4_102_444_801, "seconds rounded up: \(at[3])")
            #expect(integers(at[6]) == [-1])
            // A time at or before now deletes (2); HPERSIST removes (1), finds none (-1) or no field (-2).
            let end = await run(p, ["HEXPIRE h 0 FIELDS 1 a", "HPEXPIREAT h 1 FIELDS 2 b b", "HPERSIST h FIELDS 4 c d x missing",
                                    "HTTL h FIELDS 2 c d", "HKEYS h", "HEXPIRE h 0 XX FIELDS 1 x", "HEXISTS h x"])
            #expect(integers(end[0]) == [2] && integers(end[1]) == [2, -2] && integers(end[2]) == [1, 1, -1, -2])
            #expect(integers(end[3]) == [-1, -1])
            #expect(end[4] == .array([bulk("c"), bulk("d"), bulk("x")]))
            #expect(integers(end[5]) == [0] && end[6] == .integer(1), "a condition that does not hold deletes nothing")
        }
    }

    @Test("a field past the deadline HEXPIRE gave it is gone for every read, HTTL says -2, and HSET makes it a field without one")
    func fieldsExpire() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET h a 1 b 2", "HPEXPIRE h 30 FIELDS 1 a"])
            try await Task.sleep(for: .milliseconds(60))
            let after = await run(p, ["HGET h a", "HLEN h", "HTTL h FIELDS 2 a b", "HSET h a 3", "HTTL h FIELDS 1 a"])
            #expect(after[0] == .null && after[1] == .integer(1) && integers(after[2]) == [-2, -1])
            #expect(after[3] == .integer(1) && integers(after[4]) == [-1])
        }
    }

    @Test("bad HEXPIRE, HTTL and HPERSIST requests get Redis's errors and change nothing; the connection goes on")
    func fieldExpiryErrors() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET h a 1"])
            let errors = await run(p, ["HEXPIRE h -1 FIELDS 1 a", "HEXPIRE h x FIELDS 1 a", "HEXPIRE h 1.5 FIELDS 1 a",
                                       "HEXPIRE h 10 FIELDS 0 a", "HEXPIRE h 10 FIELDS 2 a", "HEXPIRE h 10 FIELDS 1 a b",
                                       "HEXPIRE h 10 NX XX FIELDS 1 a", "HEXPIRE h 10 FIELD 1 a", "HEXPIRE h 9223372036854775807 FIELDS 1 a",
                                       "HPEXPIRE h 9223372036854775807 FIELDS 1 a", "HTTL h FIELDS 0 a", "HTTL h FIELDS 2 a",
                                       "HTTL h 1 a b", "HPERSIST h FIELDS -1 a", "HEXPIRE h 10 FIELDS 1", "HTTL h",
                                       "HTTL h FIELDS 1 a"])
            #expect(errors[0] == .error("ERR invalid expire time, must be >= 0"))
            #expect(errors[1] == .error("ERR value is not an integer or out of range") && errors[2] == errors[1])
            #expect(errors[3] == .error("ERR Parameter `numFields` should be greater than 0"))
            #expect(errors[4] == .error("ERR The `numfields` parameter must match the number of arguments") && errors[5] == errors[4])
            #expect(errors[6] == .error("ERR Mandatory argument FIELDS is missing or not at the right position") && errors[7] == errors[6])
            #expect(errors[8] == .error("ERR invalid expire time in 'hexpire' command"))
            #expect(errors[9] == .error("ERR invalid expire time in 'hpexpire' command"))
            #expect(errors[10] == .error("ERR Number of fields must be a positive integer") && errors[13] == errors[10])
            #expect(errors[11] == errors[4] && errors[12] == errors[6])
            #expect(errors[14].errorCode == "ERR" && errors[15].errorCode == "ERR", "arity: \(errors[14]) \(errors[15])")
            #expect(integers(errors[16]) == [-1], "nothing was given a deadline")
        }
    }

    @Test("HGETEX replies the fields' values as they were, then sets, removes or (a past time) deletes their deadlines; without an option it is HMGET")
    func getAndExpire() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["HSET h a 1 b 2 c 3", "HGETEX h FIELDS 2 a missing", "HTTL h FIELDS 1 a",
                                        "HGETEX h EX 100 FIELDS 3 a b missing", "HTTL h FIELDS 3 a b c",
                                        "HGETEX h PX 50000 FIELDS 1 c", "HPTTL h FIELDS 1 c",
                                        "HGETEX h PERSIST FIELDS 2 a c", "HTTL h FIELDS 3 a b c",
                                        "HGETEX h EXAT 4102444801 FIELDS 1 a", "HGETEX h PXAT 4102444800123 FIELDS 1 c",
                                        "HPEXPIRETIME h FIELDS 2 a c", "HGETEX nowhere EX 10 FIELDS 1 a"])
            #expect(replies[1] == .array([bulk("1"), .null]) && integers(replies[2]) == [-1], "no option: nothing changes")
            #expect(replies[3] == .array([bulk("1"), bulk("2"), .null]) && integers(replies[4]) == [100, 100, -1])
            #expect(replies[5] == .array([bulk("3")]))
            let pttl = integers(replies[6])![0]
            #expect(pttl > 49_000 && pttl <= 50_000)
            #expect(replies[7] == .array([bulk("1"), bulk("3")]) && integers(replies[8]) == [-1, 100, -1], "PERSIST: \(replies[8])")
            #expect(integers(replies[11]) == [4_102_444_801_000, 4_102_444_800_123])
            #expect(replies[12] == .array([.null]))
            // A time at or before now: the values, then the fields deleted; a field named twice
            // is read the second time after its delete.
            let past = await run(p, ["HGETEX h PXAT 1 FIELDS 2 b b", "HGETEX h EX 0 FIELDS 1 a", "HKEYS h"])
            #expect(past[0] == .array([bulk("2"), .null]) && past[1] == .array([bulk("1")]))
            #expect(past[2] == .array([bulk("c")]))
        }
    }

    @Test("bad HGETEX requests get Redis 8's errors and change nothing")
    func getAndExpireErrors() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET h a 1"])
            let errors = await run(p, ["HGETEX h FIELDS 1", "HGETEX h FIELDS 0 a", "HGETEX h FIELDS -1 a", "HGETEX h FIELDS 2 a",
                                       "HGETEX h XFIELDX 1 a", "HGETEX h PXAT 1 1", "HGETEX h PERSIST 1 FIELDS 1 a",
                                       "HGETEX h EX 1 PX 1 FIELDS 1 a", "HGETEX h EX bla FIELDS 1 a", "HGETEX h EXAT 9223372036854775808 FIELDS 1 a",
                                       "HGETEX h PX -1 FIELDS 1 a", "HGETEX h EX 9223372036854775807 FIELDS 1 a", "HTTL h FIELDS 1 a", "HGET h a"])
            #expect(errors[0].errorCode == "ERR", "arity: \(errors[0])")
            #expect(errors[1] == .error("ERR Number of fields must be a positive integer") && errors[2] == errors[1])
            #expect(errors[3] == .error("ERR The `numfields` parameter must match the number of arguments"))
            #expect(errors[4] == .error("ERR Mandatory argument FIELDS is missing or not at the right position"))
            #expect(errors[5] == errors[4] && errors[6] == errors[4] && errors[7] == errors[4])
            #expect(errors[8] == .error("ERR value is not an integer or out of range") && errors[9] == errors[8])
            #expect(errors[10] == .error("ERR invalid expire time, must be >= 0"))
            #expect(errors[11] == .error("ERR invalid expire time in 'hgetex' command"))
            #expect(integers(errors[12]) == [-1] && errors[13] == bulk("1"), "nothing changed")
        }
    }

    @Test("HSETEX writes every field or none (FNX, FXX), with a deadline, the one each had (KEEPTTL) or none; a past time deletes them")
    func setWithDeadline() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["HSETEX h FIELDS 2 a 1 b 2", "HSETEX h FXX FIELDS 2 a 10 c 30", "HSETEX h FNX FIELDS 2 c 30 a 10",
                                        "HGETALL h", "HSETEX h FNX EX 100 FIELDS 1 c 3", "HSETEX h PX 50000 FXX FIELDS 2 a 11 b 22",
                                        "HTTL h FIELDS 3 a b c", "HSETEX h KEEPTTL FIELDS 3 a 111 c 333 d 444", "HTTL h FIELDS 4 a b c d",
                                        "HSETEX h FIELDS 1 a 1", "HTTL h FIELDS 1 a", "HSETEX h PXAT 4102444800123 FIELDS 2 d 4 d 44",
                                        "HPEXPIRETIME h FIELDS 1 d", "HGET h d"])
            #expect(replies[0] == .integer(1) && replies[1] == .integer(0) && replies[2] == .integer(0), "all or none: \(replies)")
            #expect(replies[3] == .map([bulk("a"), bulk("1"), bulk("b"), bulk("2")]), "nothing written by a condition not met")
            #expect(replies[4] == .integer(1) && replies[5] == .integer(1))
            #expect(integers(replies[6]) == [50, 50, 100])
            #expect(replies[7] == .integer(1) && integers(replies[8]) == [50, 50, 100, -1], "KEEPTTL: \(replies[8])")
            #expect(replies[9] == .integer(1) && integers(replies[10]) == [-1], "no option: the deadline goes, as with HSET")
            #expect(integers(replies[12]) == [4_102_444_800_123] && replies[13] == bulk("44"), "a field named twice: the last value")
            // A time at or before now: 1, the fields that exist deleted, none written.
            let past = await run(p, ["HSETEX h EXAT 1 FIELDS 2 b x missing y", "HKEYS h", "HSETEX h FXX EX 0 FIELDS 1 missing z", "HEXISTS h missing"])
            #expect(past[0] == .integer(1) && past[1] == .array([bulk("a"), bulk("c"), bulk("d")]), "\(past)")
            #expect(past[2] == .integer(0) && past[3] == .integer(0))
            // FXX where the namespace does not exist: 0, and it is not created.
            let nowhere = await run(p, ["HSETEX nowhere FXX FIELDS 1 a 1", "EXISTS nowhere"])
            #expect(nowhere == [.integer(0), .integer(0)])
        }
    }

    @Test("bad HSETEX requests get Redis 8's errors and change nothing")
    func setWithDeadlineErrors() async throws {
        try await withProcessor { p in
            _ = await run(p, ["HSET h a 1"])
            let errors = await run(p, ["HSETEX h FIELDS 2 a b", "HSETEX h FIELDS 1 a b c", "HSETEX h NX FIELDS 1 a b", "HSETEX h 1 FIELDS 1 a b",
                                       "HSETEX h FXX FNX FIELDS 1 a b", "HSETEX h FNX FNX FIELDS 1 a b", "HSETEX h EX 1 PX 1 FIELDS 1 a b",
                                       "HSETEX h KEEPTTL EX 1 FIELDS 1 a b", "HSETEX h EX FIELDS 1 a b", "HSETEX h EXAT -1 FIELDS 1 a b",
                                       "HSETEX h FIELDS x a b", "HSETEX h FIELDS 0 a b", "HSETEX h FIELDS -1 a b",
                                       "HSETEX h EX 9223372036854775807 FIELDS 1 a b", "HSETEX h FNX EX 10", "HGET h a", "HTTL h FIELDS 1 a"])
            #expect(errors[0].errorCode == "ERR" && errors[1].errorCode == "ERR", "arity: \(errors[0]) \(errors[1])")
            let unknown = [errors[2], errors[3]].map { reply -> String in if case .error(let text) = reply { return text }; return "" }
            #expect(unknown[0].hasPrefix("ERR unknown argument 'NX'") && unknown[1].hasPrefix("ERR unknown argument '1'"), "\(unknown)")
            #expect(errors[4] == .error("ERR Only one of FXX or FNX arguments can be specified") && errors[5] == errors[4])
            #expect(errors[6] == .error("ERR Only one of EX, PX, EXAT, PXAT or KEEPTTL arguments can be specified") && errors[7] == errors[6])
            #expect(errors[8] == .error("ERR value is not an integer or out of range"))
            #expect(errors[9] == .error("ERR invalid expire time, must be >= 0"))
            #expect(errors[10] == .error("ERR invalid number of fields") && errors[11] == errors[10] && errors[12] == errors[10])
            #expect(errors[13] == .error("ERR invalid expire time in 'hsetex' command"))
            #expect(errors[14].errorCode == "ERR", "\(errors[14])")
            #expect(errors[15] == bulk("1") && integers(errors[16]) == [-1], "nothing changed")
        }
    }

    @Test("the field expiry commands and PUT PX, PEXPIRE, PERSIST, PTTL queue in MULTI: each sees the commands before it, HINCRBY keeps a deadline given before it, and a failing command applies none of them")
    func fieldExpiryQueued() async throws {
        try await withProcessor { p in
            let replies = await run(p, ["HSET h s x", "MULTI", "HSET h a 1 b 2", "HEXPIRE h 100 FIELDS 2 a zz", "HTTL h FIELDS 2 a b",
                                        "HGETEX h PX 5000 FIELDS 1 b", "HPTTL h FIELDS 1 b", "HSETEX h FNX EX 50 FIELDS 1 c 3",
                                        "HSETEX h FNX FIELDS 1 c 4", "HINCRBY h n 1", "HEXPIRE h 60 NX FIELDS 1 n", "HINCRBY h n 1",
                                        "HTTL h FIELDS 1 n", "HPERSIST h FIELDS 1 a", "HPEXPIRETIME h FIELDS 2 a zz", "EXEC"])
            #expect(Array(replies[2...14]) == Array(repeating: .simple("QUEUED"), count: 13), "\(replies)")
            guard case .array(let exec) = replies[15], exec.count == 13 else {
                Issue.record("EXEC: \(replies[15])")
                return
            }
            #expect(exec[0] == .integer(2) && integers(exec[1]) == [1, -2] && integers(exec[2]) == [100, -1], "\(exec)")
            #expect(exec[3] == .array([bulk("2")]) && (4_990...5_000).contains(integers(exec[4])?.first ?? 0), "HGETEX, then HPTTL: \(exec)")
            #expect(exec[5] == .integer(1) && exec[6] == .integer(0), "HSETEX FNX: \(exec)")
            #expect(exec[7] == .integer(1) && integers(exec[8]) == [1] && exec[9] == .integer(2) && integers(exec[10]) == [60], "\(exec)")
            #expect(integers(exec[11]) == [1] && integers(exec[12]) == [-1, -2], "HPERSIST, then HPEXPIRETIME: \(exec)")
            let after = await run(p, ["HTTL h FIELDS 5 a b c n s", "HMGET h c n"])
            #expect(integers(after[0]).map { [$0[0], $0[1] > 0 ? 5 : 0, $0[2] > 40 ? 50 : 0, $0[3] > 50 ? 60 : 0, $0[4]] } == [-1, 5, 50, 60, -1], "\(after)")
            #expect(after[1] == .array([bulk("3"), bulk("2")]))

            // One command failing when EXEC runs it: none of the deadlines before it is given.
            let failing = await run(p, ["MULTI", "HEXPIRE h 1000 FIELDS 1 c", "HSETEX h EX 1000 FIELDS 1 t 1", "HINCRBY h s 1", "EXEC",
                                        "HTTL h FIELDS 2 c t"])
            #expect(failing[4].errorCode == "ERR" && integers(failing[5]).map { [$0[0] <= 50 ? 1 : 0, $0[1]] } == [1, -2], "\(failing)")

            // ActorKV's own: PUT with PX, PEXPIRE, PERSIST, PTTL.
            let native = await run(p, ["MULTI", "PUT k p v PX 3000", "PTTL k p", "PEXPIRE k p 9000", "PTTL k p", "PERSIST k p", "PTTL k p",
                                       "PTTL k zz", "PEXPIRE k zz 10", "PERSIST k p", "EXEC"])
            guard case .array(let results) = native[10], results.count == 9 else {
                Issue.record("EXEC: \(native)")
                return
            }
            #expect(results[0] == .simple("OK") && results[2] == .integer(1) && results[4] == .integer(1), "\(results)")
            #expect((2_990...3_000).contains(integers(.array([results[1]]))![0]) && (8_990...9_000).contains(integers(.array([results[3]]))![0]), "\(results)")
            #expect(Array(results[5...8]) == [.integer(-1), .integer(-2), .integer(0), .integer(0)], "\(results)")

            // What stays refused: a put of a connection's key, a conditional one.
            let refused = await run(p, ["MULTI", "PUT k e v EPHEMERAL", "PUT k c v IFVERSION 0", "EXEC", "EXISTS k e c"])
            #expect(refused[1].errorCode == "ERR" && refused[2].errorCode == "ERR" && refused[3].errorCode == "EXECABORT" && refused[4] == .integer(0), "\(refused)")
        }
    }
}
