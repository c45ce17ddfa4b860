@testable import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// Keys that expire (`PUT … PX`, `PEXPIRE`, `PERSIST`, `PTTL`) and keys that belong to a
/// connection (`PUT … EPHEMERAL`), through the Swift client against a real `actorkvd`.
@Suite("Client: expiring and ephemeral keys")
struct ExpiryClientTests {
    @Test("put with a ttl: pttl reports it; a put without one, and persist, remove it; pexpire sets it and keeps the version; Redis's -1/-2")
    func ttlAndPttl() async throws {
        try await withServer { _, kv in
            try await kv.put("exp", "a", "1", ttl: .seconds(60))
            let left = try await kv.pttl("exp", "a")
            guard case .remaining(let duration) = left else { throw TestFailure("pttl of a key put with a ttl: \(left)") }
            #expect(duration > .zero && duration <= .seconds(60) + ClusterTarget.deadlineSlack, "\(duration)")
            #expect(try await kv.getString("exp", "a") == "1")

            try await kv.put("exp", "p", "2")
            #expect(try await kv.pttl("exp", "p") == .persistent)
            #expect(try await kv.pttl("exp", "missing") == .absent)
            try await kv.put("exp", "a", "3")  // a put without a ttl removes the expiry
            #expect(try await kv.pttl("exp", "a") == .persistent)

            let version = try #require(try await kv.put("exp", "b", "4", ifVersion: 0, ttl: .seconds(60)))
            guard case .remaining = try await kv.pttl("exp", "b") else { throw TestFailure("pttl after put ifVersion ttl") }
            #expect(try await kv.getVersioned("exp", "b") == VersionedValue(value: "4".bytes, version: version))

            let before = try #require(try await kv.getVersioned("exp", "p"))
            #expect(try await kv.pexpire("exp", "p", ttl: .seconds(60)))
            guard case .remaining = try await kv.pttl("exp", "p") else { throw TestFailure("pttl after pexpire") }
            #expect(try await sameVersioned(kv.getVersioned("exp", "p"), before), "pexpire keeps the value and the version")
            #expect(try await kv.persist("exp", "p"))
            #expect(try await kv.pttl("exp", "p") == .persistent)
            #expect(try await kv.persist("exp", "p") == false, "no expiry to remove")
            #expect(try await kv.persist("exp", "missing") == false)
            #expect(try await kv.pexpire("exp", "missing", ttl: .seconds(5)) == false)
            #expect(try await sameVersioned(kv.getVersioned("exp", "p"), before), "persist keeps the value and the version")

            #expect(try await kv.pexpire("exp", "p", ttl: .zero), "a ttl of zero deletes the key now")
            #expect(try await kv.get("exp", "p") == nil)
            #expect(try await kv.pttl("exp", "p") == .absent)

            await #expect(throws: ActorKVError.self) { try await kv.put("exp", "z", "v", ttl: .zero) }
            do throws(ActorKVError) {
                try await kv.put("exp", "z", "v", ttl: .milliseconds(-5))
                Issue.record("a negative ttl was accepted")
            } catch {
                #expect(error.serverCode == "ERR" && error.description.contains("invalid expire time"), "\(error)")
            }
            #expect(try await kv.get("exp", "z") == nil)
        }
    }

    @Test("a whole namespace's deadline: pexpire(ns, ttl:), pttl(ns), persist(ns); every key goes at it; refused through an etcd agent")
    func namespaceDeadline() async throws {
        try await withServer { _, kv in
            try await kv.put("whole", "a", "1")
            guard !ClusterTarget.active else {
                do throws(ActorKVError) {
                    try await kv.pexpire("whole", ttl: .seconds(60))
                    Issue.record("an agent gave a namespace a deadline")
                } catch {
                    #expect(error.serverCode == "ERR" && error.description.contains("cluster mode"), "\(error)")
                }
                return
            }
            #expect(try await kv.pexpire("none", ttl: .seconds(60)) == false, "no key")
            #expect(try await kv.pttl("none") == .absent)
            #expect(try await kv.pttl("whole") == .persistent)
            #expect(try await kv.pexpire("whole", ttl: .seconds(60)))
            guard case .remaining(let left) = try await kv.pttl("whole") else { throw TestFailure("pexpire(ns) set no deadline") }
            #expect(left > .seconds(50) && left <= .seconds(60), "\(left)")
            try await kv.put("whole", "b", "2")
            guard case .remaining = try await kv.pttl("whole") else { throw TestFailure("a write ended the deadline") }
            #expect(try await kv.persist("whole"))
            #expect(try await kv.persist("whole") == false)
            #expect(try await kv.pexpire("whole", ttl: .milliseconds(100)))
            try await eventually("every key goes") { try await kv.count("whole") == 0 }
            #expect(try await kv.pttl("whole") == .absent)
        }
    }

    @Test("an expired key is gone for every read; a watcher sees its delete; it counts as absent for IFVERSION 0")
    func expiry() async throws {
        try await withServer { _, kv in
            let watcher = kv.changes("exp", from: .now).makeAsyncIterator()
            #expect(startsSynced(try await nextEvent(watcher)))
            try await kv.put("exp", "keep", "k")                                      // 1
            try await kv.put("exp", "short", "v", ttl: .milliseconds(200))             // 2
            try await eventually("the key expires") { try await kv.get("exp", "short") == nil }
            #expect(try await kv.getVersioned("exp", "short") == nil)
            #expect(try await kv.exists("exp", "short") == false)
            #expect(try await kv.count("exp") == 1)
            #expect(try await scanned(kv, "exp", prefix: "") == ["keep".bytes: "k".bytes])
            #expect(try await kv.pttl("exp", "short") == .absent)
            let changes = try await readChanges(watcher, count: 3)
            #expect(changes[0].keys == [ChangedKey(key: "keep".bytes, value: "k".bytes)])
            #expect(changes[1].keys == [ChangedKey(key: "short".bytes, value: "v".bytes)])
            #expect(changes[2].keys == [ChangedKey(key: "short".bytes, value: nil)], "the expiry is a delete watchers see")
            #expect(try await kv.put("exp", "short", "again", ifVersion: 0) != nil)

            // PEXPIRE with a short ttl expires a persistent key the same way; PERSIST is not a change.
            #expect(try await kv.persist("exp", "keep") == false)
            #expect(try await kv.pexpire("exp", "keep", ttl: .milliseconds(200)))
            try await eventually("the key expires after pexpire") { try await kv.get("exp", "keep") == nil }
            // An agent writes the key again for PEXPIRE: a put of the same value (protocol.md, Cluster mode).
            let more = try await readChanges(watcher, count: ClusterTarget.active ? 3 : 2)
            #expect(more[0].keys == [ChangedKey(key: "short".bytes, value: "again".bytes)])
            if ClusterTarget.active { #expect(more[1].keys == [ChangedKey(key: "keep".bytes, value: "k".bytes)]) }
            #expect(more.last?.keys == [ChangedKey(key: "keep".bytes, value: nil)], "pexpire itself sent no change")
        }
    }

    @Test("an ephemeral key is deleted (a change) when the connection that wrote it closes; a later plain put makes it persistent")
    func ephemeral() async throws {
        try await withServer(fsync: "always") { server, kv in
            let watcher = kv.changes("eph", from: .now).makeAsyncIterator()
            #expect(startsSynced(try await nextEvent(watcher)))
            let owner = ActorKVClient(socketPath: server.socketPath)
            try await owner.put("eph", "mine", "1", ephemeral: true)                    // 1
            try await owner.put("eph", "taken", "2", ephemeral: true)                   // 2
            try await kv.put("eph", "taken", "3")                                       // 3: now persistent
            try await owner.put("eph", "plain", "4", ephemeral: true)                   // 4
            try await owner.put("eph", "plain", "5")                                    // 5: the owner's plain put
            #expect(try await kv.getString("eph", "mine") == "1", "another connection reads it")
            await owner.close()
            try await eventually("the ephemeral key is deleted") { try await kv.get("eph", "mine") == nil }
            #expect(try await kv.getString("eph", "taken") == "3")
            #expect(try await kv.getString("eph", "plain") == "5")
            let changes = try await readChanges(watcher, count: 6)
            #expect(changes[5].keys == [ChangedKey(key: "mine".bytes, value: nil)], "\(changes[5])")

            // Ephemeral keys from before a crash are deleted as the server starts again.
            let other = ActorKVClient(socketPath: server.socketPath)
            try await other.put("eph", "crash", "6", ephemeral: true)
            #expect(try await other.put("eph", "crash-v", "7", ifVersion: 0, ephemeral: true) != nil)
            try await server.signal(SIGKILL)
            try await server.restart()
            await kv.close()
            if ClusterTarget.active {
                // An agent's leases outlive its kill -9 by up to --ephemeral-ttl (protocol.md, Cluster mode).
                try await eventually("the killed agent's ephemeral keys are gone") {
                    let (crash, crashV) = (try await kv.get("eph", "crash"), try await kv.get("eph", "crash-v"))
                    return crash == nil && crashV == nil
                }
            }
            #expect(try await kv.get("eph", "crash") == nil)
            #expect(try await kv.get("eph", "crash-v") == nil)
            #expect(try await kv.getString("eph", "taken") == "3")
            await other.close()
        }
    }

    @Test("increment keeps the key's ttl and owner (a rate limiter's counter still expires); a put, or a counter started afresh, has neither")
    func incrementKeepsLifetime() async throws {
        try await withServer { server, kv in
            // The rate limiter's pattern: the first count gives the window's deadline, later counts keep it.
            #expect(try await kv.increment("rate", "user:1") == 1)
            // A window of 3 s: the three requests below must come within it (an AddressSanitizer
            // agent on a busy CI host took longer than a 0.7 s window, which then ended first).
            #expect(try await kv.pexpire("rate", "user:1", ttl: .seconds(3)))
            #expect(try await kv.increment("rate", "user:1") == 2)
            #expect(try await kv.batch("rate", [.increment(key: "user:1".bytes, by: 3)]) == [.counted(5)])
            guard case .remaining(let left) = try await kv.pttl("rate", "user:1") else { throw TestFailure("INCR removed the deadline") }
            #expect(left <= .seconds(3) + ClusterTarget.deadlineSlack)
            try await eventually("the counter's window ends") { try await kv.get("rate", "user:1") == nil }
            #expect(try await kv.increment("rate", "user:1") == 1, "a new window counts from 1")
            #expect(try await kv.pttl("rate", "user:1") == .persistent)

            // A put replaces the lifetime, before an increment in the same batch too.
            try await kv.put("rate", "reset", "7", ttl: .seconds(60))
            #expect(try await kv.batch("rate", [.put(key: "reset".bytes, value: "0".bytes), .increment(key: "reset".bytes, by: 1)])
                == [.stored, .counted(1)])
            #expect(try await kv.pttl("rate", "reset") == .persistent)

            // An owner's counter stays its own: it goes when the owner's connection closes.
            let owner = ActorKVClient(socketPath: server.socketPath)
            try await owner.put("rate", "session", "0", ephemeral: true)
            #expect(try await kv.increment("rate", "session", by: 4) == 4, "another connection counts")
            await owner.close()
            try await eventually("the owner's counter is deleted with its connection") { try await kv.get("rate", "session") == nil }
        }
    }

    /// The client sends a ttl past the range as Int64.max milliseconds (below) and leaves the
    /// deadline's check, which needs the server's clock, to the server.
    @Test("a ttl whose deadline passes Int64.max ms: put and pexpire are refused with ERR, the key unchanged")
    func ttlPastRange() async throws {
        try await withServer { _, kv in
            try await kv.put("exp", "k", "1")
            for ttl: Duration in [.seconds(Int64.max), .milliseconds(Int64.max)] {
                let pexpire = await expectActorKVError { try await kv.pexpire("exp", "k", ttl: ttl) }
                #expect(pexpire == .server(code: "ERR", message: "invalid expire time in 'PEXPIRE' command"))
                let put = await expectActorKVError { try await kv.put("exp", "k", "2", ttl: ttl) }
                #expect(put == .server(code: "ERR", message: "invalid expire time in 'PUT' command"))
                let versioned = await expectActorKVError { _ = try await kv.put("exp", "k", "2", ifVersion: 0, ttl: ttl) }
                #expect(versioned == .server(code: "ERR", message: "invalid expire time in 'PUT' command"))
            }
            #expect(try await kv.getString("exp", "k") == "1")
            #expect(try await kv.pttl("exp", "k") == .persistent, "pexpire left the key as it was")
            #expect(try await kv.pexpire("exp", "k", ttl: .seconds(-Int64.max)), "a negative ttl past the range deletes, as any")
            #expect(try await kv.get("exp", "k") == nil)
        }
    }

    @Test("deadlines in MULTI: HEXPIRE, HSETEX EX and PUT PX queued, applied at EXEC, expire at their time; an ephemeral key's deadline changed in MULTI and outside, the key still going with its connection")
    func deadlinesInTransactions() async throws {
        try await withServer { server, kv in
            let ns = "exp-multi"
            let raw = ActorKVClient(socketPath: server.socketPath)
            func exec(_ commands: [[String]]) async throws -> Reply {
                #expect(try await raw.send(["MULTI"]) == .simple("OK"))
                for command in commands { #expect(try await raw.send(command) == .simple("QUEUED"), "\(command)") }
                return try await raw.send(["EXEC"])
            }
            let applied = try await exec([["HSET", ns, "a", "1"], ["HPEXPIRE", ns, "300", "FIELDS", "1", "a"], ["HSETEX", ns, "PX", "300", "FIELDS", "1", "b", "2"],
                                          ["PUT", ns, "c", "3", "PX", "300"], ["HINCRBY", ns, "a", "1"], ["HPTTL", ns, "FIELDS", "3", "a", "b", "c"]])
            guard case .array(let replies) = applied, replies.count == 6, case .array(let left) = replies[5] else {
                throw TestFailure("EXEC: \(applied)")
            }
            #expect(Array(replies[0...4]) == [.integer(1), .array([.integer(1)]), .integer(1), .simple("OK"), .integer(2)], "\(replies)")
            let limit = 300 + Int64(ClusterTarget.deadlineSlack.components.seconds * 1000)
            #expect(left.allSatisfy { if case .integer(let ms) = $0 { return ms > 0 && ms <= limit }; return false }, "\(left)")
            try await eventually("the three keys expire at their deadlines", seconds: 10) { try await kv.count(ns) == 0 }

            // A key of a connection: its deadline changes in MULTI as outside, and it keeps its
            // owner (an agent puts it under a lease of that connection's).
            let owner = ActorKVClient(socketPath: server.socketPath)
            try await owner.put(ns, "e", "v", ephemeral: true)
            let owned = try await exec([["HSET", ns, "f", "1"], ["HEXPIRE", ns, "60", "FIELDS", "1", "e"]])
            #expect(owned == .array([.integer(1), .array([.integer(1)])]), "\(owned)")
            guard case .remaining = try await kv.pttl(ns, "e") else { throw TestFailure("the ephemeral key has no deadline") }
            // Outside MULTI too: the deadline is given, and the key still goes with its connection.
            #expect(try await raw.send(["HSET", ns, "g", "1"]) == .integer(1))
            #expect(try await raw.send(["HEXPIRE", ns, "120", "FIELDS", "2", "e", "g"]) == .array([.integer(1), .integer(1)]))
            guard case .remaining = try await kv.pttl(ns, "e") else { throw TestFailure("the ephemeral key has no deadline") }
            // Its deadline removed in MULTI: it lives as long as its connection.
            #expect(try await exec([["HPERSIST", ns, "FIELDS", "1", "e"]]) == .array([.array([.integer(1)])]))
            #expect(try await kv.pttl(ns, "e") == .persistent)
            await owner.close()
            try await eventually("the ephemeral key goes with its connection, deadline or not") { try await kv.get(ns, "e") == nil }
            #expect(try await kv.getString(ns, "g") == "1")
            await raw.close()
        }
    }

    @Test("ttl in milliseconds: rounded up, so a positive duration never becomes 0")
    func millisecondsRounding() {
        func ms(_ d: Duration) -> String { String(decoding: ActorKVClient.milliseconds(d), as: UTF8.self) }
        #expect(ms(.seconds(2)) == "2000")
        #expect(ms(.milliseconds(1500)) == "1500")
        #expect(ms(.microseconds(1)) == "1")
        #expect(ms(.microseconds(1001)) == "2")
        #expect(ms(.zero) == "0")
        #expect(ms(.milliseconds(-5)) == "-5")
        #expect(ms(.microseconds(-1500)) == "-1")
        #expect(ms(.seconds(Int64.max)) == String(Int64.max))
    }
}

/// Waits (at most `seconds`, checking every 20 ms) until `condition` holds; a failure if it never does.
func eventually(_ what: String, seconds: Double = 30, _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while try await !condition() {
        if ContinuousClock.now > deadline { throw TestFailure("\(what): not within \(seconds) s") }
        try await Task.sleep(for: .milliseconds(20))
    }
}

/// Whether `event` is a stream's first `synced` from now: at sequence 0 in a new namespace of
/// the local engine; an agent's sequences are etcd revisions, shared by every namespace.
func startsSynced(_ event: ChangeEvent) -> Bool {
    guard case .synced(let sequence) = event else { return false }
    return ClusterTarget.active || sequence == 0
}

/// Whether `now` is `before`: the same value and version; an agent (``ClusterTarget``) writes a
/// key again for PEXPIRE and PERSIST, so there only the value is kept (protocol.md, Cluster mode).
private func sameVersioned(_ now: VersionedValue?, _ before: VersionedValue) -> Bool {
    guard let now else { return false }
    return ClusterTarget.active ? now.value == before.value && now.version > before.version : now == before
}
