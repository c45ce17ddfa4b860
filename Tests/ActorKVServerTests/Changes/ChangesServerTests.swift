import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// CHANGES over real sockets to a real server: the bytes protocol.md pins, what a following
/// connection may send, every refusal, a watcher that sees exactly the acknowledged writes of
/// concurrent writers, resuming after a disconnect and after kill -9, SNAPSHOT + changes equal to
/// the final state, and a stalled watcher dropped with LAGGING while the others go on.
@Suite("CHANGES over the wire")
struct ChangesServerTests {
    /// One message of a change stream, decoded.
    enum Message: Equatable {
        case header(String, UInt64)
        case snapshot(String, UInt64, [[UInt8]: [UInt8]])
        case change(String, UInt64, [(key: [UInt8], value: [UInt8]?)])
        case synced(String, UInt64)
        case other(Reply)

        static func == (a: Message, b: Message) -> Bool {
            switch (a, b) {
            case let (.header(n1, s1), .header(n2, s2)), let (.synced(n1, s1), .synced(n2, s2)): return n1 == n2 && s1 == s2
            case let (.snapshot(n1, s1, p1), .snapshot(n2, s2, p2)): return n1 == n2 && s1 == s2 && p1 == p2
            case let (.change(n1, s1, p1), .change(n2, s2, p2)):
                return n1 == n2 && s1 == s2 && p1.map(\.key) == p2.map(\.key) && p1.map(\.value) == p2.map(\.value)
            case let (.other(r1), .other(r2)): return r1 == r2
            default: return false
            }
        }

        init(_ reply: Reply) {
            guard case .array(let parts) = reply, parts.count >= 3, case .bulk(let kind) = parts[0], case .bulk(let ns) = parts[1],
                  case .integer(let seq) = parts[2] else { self = .other(reply); return }
            let name = String(decoding: ns, as: UTF8.self)
            switch (String(decoding: kind, as: UTF8.self), parts.count) {
            case ("changes", 3): self = .header(name, UInt64(seq))
            case ("synced", 3): self = .synced(name, UInt64(seq))
            case ("snapshot", 4), ("change", 4):
                guard case .array(let flat) = parts[3] else { self = .other(reply); return }
                var pairs: [(key: [UInt8], value: [UInt8]?)] = []
                var i = 0
                while i + 1 < flat.count {
                    guard case .bulk(let key) = flat[i] else { self = .other(reply); return }
                    if case .bulk(let value) = flat[i + 1] { pairs.append((key, value)) } else { pairs.append((key, nil)) }
                    i += 2
                }
                if kind == Array("change".utf8) {
                    self = .change(name, UInt64(seq), pairs)
                } else {
                    self = .snapshot(name, UInt64(seq), Dictionary(pairs.map { ($0.key, $0.value ?? []) }, uniquingKeysWith: { $1 }))
                }
            default: self = .other(reply)
            }
        }
    }

    /// Reads messages until `stop` says so (or the timeout of the connection ends it).
    static func read(_ c: RawConnection, until stop: (Message) -> Bool) throws -> [Message] {
        var messages: [Message] = []
        while true {
            let message = Message(try c.reply())
            messages.append(message)
            if stop(message) { return messages }
        }
    }

    /// The sequence numbers of the `change` messages among `messages`.
    static func sequences(_ messages: [Message]) -> [UInt64] {
        messages.compactMap { if case .change(_, let s, _) = $0 { return s }; return nil }
    }

    @Test("the example of protocol.md, byte for byte; what a following connection may send; every refusal")
    func wireContract() throws {
        let server = try ServerProcess()
        defer { server.stop() }
        let writer = try RawConnection(path: server.socketPath)
        #expect(try writer.command(["PUT", "config", "motd", "hello"]) == .simple("OK"))
        #expect(try writer.command(["BATCH", "config", "PUT", "k1", "v1", "DEL", "k1", "PUT", "k2", "v2"]) != .nullArray)
        #expect(try writer.command(["PUT", "config", "theme", "dark"]) == .simple("OK"))
        #expect(try writer.command(["DEL", "config", "theme"]) == .integer(1))   // record 4: k2 and motd remain
        let watcher = try RawConnection(path: server.socketPath)
        try VersionServerTests.exchange(watcher, "CHANGES config SNAPSHOT\r\n",
            "*3\r\n$7\r\nchanges\r\n$6\r\nconfig\r\n:4\r\n"
            + "*4\r\n$8\r\nsnapshot\r\n$6\r\nconfig\r\n:4\r\n*4\r\n$2\r\nk2\r\n$2\r\nv2\r\n$4\r\nmotd\r\n$5\r\nhello\r\n"
            + "*3\r\n$6\r\nsynced\r\n$6\r\nconfig\r\n:4\r\n")
        #expect(try writer.command(["PUT", "config", "theme", "light"]) == .simple("OK"))
        #expect(try writer.command(["BATCH", "config", "DEL", "motd", "PUT", "k3", "v3"]) == .array([.integer(1), .simple("OK")]))
        try VersionServerTests.exchange(watcher, "",
            "*4\r\n$6\r\nchange\r\n$6\r\nconfig\r\n:5\r\n*2\r\n$5\r\ntheme\r\n$5\r\nlight\r\n"
            + "*4\r\n$6\r\nchange\r\n$6\r\nconfig\r\n:6\r\n*4\r\n$4\r\nmotd\r\n$-1\r\n$2\r\nk3\r\n$2\r\nv3\r\n")
        // While following: PING, QUIT and CHANGES only; a refusal leaves the stream going.
        try VersionServerTests.exchange(watcher, "PING\r\n", "+PONG\r\n")
        try VersionServerTests.exchange(watcher, "PING hi\r\n", "$2\r\nhi\r\n")
        try VersionServerTests.exchange(watcher, "GET config k2\r\n", "-ERR only CHANGES, PING, QUIT and RESET are allowed while following changes\r\n")
        try VersionServerTests.exchange(watcher, "PUT config k2 x\r\n", "-ERR only CHANGES, PING, QUIT and RESET are allowed while following changes\r\n")
        try VersionServerTests.exchange(watcher, "CHANGES config\r\n", "-ERR already following namespace 'config' with prefix '' on this connection\r\n")
        try VersionServerTests.exchange(watcher, "CHANGES config PREFIX z FROM 99\r\n", "-ERR FROM sequence 99 is after the last sequence of namespace 'config' (6)\r\n")
        // A second namespace (and the same one with a prefix) on the same connection.
        try VersionServerTests.exchange(watcher, "CHANGES jobs\r\n", "*3\r\n$7\r\nchanges\r\n$4\r\njobs\r\n:0\r\n*3\r\n$6\r\nsynced\r\n$4\r\njobs\r\n:0\r\n")
        try VersionServerTests.exchange(watcher, "CHANGES config PREFIX k FROM 4\r\n",
            "*3\r\n$7\r\nchanges\r\n$6\r\nconfig\r\n:4\r\n*4\r\n$6\r\nchange\r\n$6\r\nconfig\r\n:6\r\n*2\r\n$2\r\nk3\r\n$2\r\nv3\r\n"
            + "*3\r\n$6\r\nsynced\r\n$6\r\nconfig\r\n:6\r\n")
        #expect(try writer.command(["PUT", "jobs", "j1", "x"]) == .simple("OK"))
        try VersionServerTests.exchange(watcher, "", "*4\r\n$6\r\nchange\r\n$4\r\njobs\r\n:1\r\n*2\r\n$2\r\nj1\r\n$1\r\nx\r\n")
        try VersionServerTests.exchange(watcher, "QUIT\r\n", "+OK\r\n")
        #expect(watcher.isClosedByServer())

        // Refusals on a connection that is not following: it stays usable and not following.
        let c = try RawConnection(path: server.socketPath)
        let refusals: [(String, String)] = [
            ("CHANGES config FROM x\r\n", "-ERR FROM takes a sequence number (a decimal integer from 0), not 'x'\r\n"),
            ("CHANGES config FROM -1\r\n", "-ERR FROM takes a sequence number (a decimal integer from 0), not '-1'\r\n"),
            ("CHANGES config FROM 1 SNAPSHOT\r\n", "-ERR FROM and SNAPSHOT cannot be combined\r\n"),
            ("CHANGES config snapshot snapshot\r\n", "-ERR CHANGES option SNAPSHOT given twice\r\n"),
            ("CHANGES config PREFIX\r\n", "-ERR CHANGES option PREFIX needs a value\r\n"),
            ("CHANGES config WATCH\r\n", "-ERR unknown CHANGES option 'WATCH' (expected PREFIX, FROM or SNAPSHOT)\r\n"),
            ("CHANGES\r\n", "-ERR wrong number of arguments for 'CHANGES' (usage: CHANGES ns [PREFIX prefix] [FROM seq | SNAPSHOT])\r\n"),
            ("CHANGES bad/ns\r\n", "-BADNS namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x2f)\r\n"),
            ("CHANGES config FROM 7\r\n", "-ERR FROM sequence 7 is after the last sequence of namespace 'config' (6)\r\n"),
            ("CHANGES nothing FROM 1\r\n", "-ERR FROM sequence 1 is after the last sequence of namespace 'nothing' (0)\r\n"),
        ]
        for (request, reply) in refusals { try VersionServerTests.exchange(c, request, reply) }
        try VersionServerTests.exchange(c, "GET config k3\r\n", "$2\r\nv3\r\n")
    }

    @Test("one connection follows at most 1,024 namespace-and-prefix pairs: the next CHANGES is refused, the follows go on, RESET frees them")
    func followsPerConnectionBounded() throws {
        let server = try ServerProcess()
        defer { server.stop() }
        let watcher = try RawConnection(path: server.socketPath)
        /// The next reply that is not a follow's `synced` message (each follow sends one when caught up).
        func next() throws -> Reply {
            while true {
                let reply = try watcher.reply()
                if case .array(let items) = reply, items.first == .bulk("synced") { continue }
                return reply
            }
        }
        try watcher.send((0..<1025).map { String(format: "CHANGES many PREFIX p%04d\r\n", $0) }.joined())
        for i in 0..<1024 {
            let reply = try next()
            guard reply == .array([.bulk("changes"), .bulk("many"), .integer(0)]) else { Issue.record("CHANGES \(i): \(reply)"); return }
        }
        #expect(try next() == .error("ERR this connection follows 1024 namespaces and prefixes already, the most one may: "
                                     + "follow a shorter prefix, or from another connection"))
        // The follows still run: a write reaches the one whose prefix it has.
        #expect(try RawConnection(path: server.socketPath).command(["PUT", "many", "p0007-k", "v"]) == .simple("OK"))
        #expect(try next() == .array([.bulk("change"), .bulk("many"), .integer(1), .array([.bulk("p0007-k"), .bulk("v")])]))
        try watcher.send("RESET\r\nCHANGES many PREFIX q\r\n")
        #expect(try next() == .simple("RESET"))
        #expect(try next() == .array([.bulk("changes"), .bulk("many"), .integer(1)]), "after RESET, a new follow")
    }

    @Test("a watcher sees exactly the acknowledged writes of 8 concurrent writers, in order, each once, batches whole (fsync always)")
    func concurrentWritersAreSeenExactly() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--fsync", "always"])
            defer { server.stop() }
            let watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES w\r\n")
            #expect(try Self.read(watcher) { if case .synced = $0 { return true }; return false } == [.header("w", 0), .synced("w", 0)])
            let writers = 8, writes = 60
            // Each writer keeps the writes it saw acknowledged.
            let workers = (0..<writers).map { w in
                Worker { () throws -> [String] in
                    let c = try RawConnection(path: server.socketPath)
                    var done: [String] = []
                    for i in 0..<writes {
                        if i % 5 == 4 {  // a batch of two keys: one change
                            let reply = try c.command(["BATCH", "w", "PUT", "b\(w)-\(i)a", "1", "PUT", "b\(w)-\(i)b", "2"])
                            if reply == .array([.simple("OK"), .simple("OK")]) { done.append("b\(w)-\(i)") }
                        } else if try c.command(["PUT", "w", "p\(w)-\(i)", "\(i)"]) == .simple("OK") {
                            done.append("p\(w)-\(i)")
                        }
                    }
                    return done
                }
            }
            let acknowledged = try workers.reduce(into: Set<String>()) { $0.formUnion(try $1.join()) }
            #expect(acknowledged.count == writers * writes, "every write was acknowledged")
            let total = writers * writes
            var seen: [String] = []
            var sequence: UInt64 = 0
            for message in try Self.read(watcher, until: { if case .change(_, let s, _) = $0 { return s == UInt64(total) }; return false }) {
                guard case .change("w", let seq, let pairs) = message else { Issue.record("unexpected \(message)"); continue }
                #expect(seq == sequence + 1, "no gap, no duplicate")
                sequence = seq
                let keys = pairs.map { String(decoding: $0.key, as: UTF8.self) }
                if keys.count == 2 {
                    #expect(keys[0].hasSuffix("a") && keys[1] == keys[0].dropLast() + "b", "a batch is one message")
                    seen.append(String(keys[0].dropLast()))
                } else {
                    seen.append(keys[0])
                }
            }
            #expect(seen.count == total)
            #expect(Set(seen) == acknowledged, "exactly the acknowledged writes")
        }
    }

    @Test("a watcher that starts while writes wait for their fsync gets them from the log, never -LAGGING (fsync always)")
    func followerStartingDuringAnFsync() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--fsync", "always"])
            defer { server.stop() }
            let stop = StopFlag()
            // Writers keep records waiting for their fsync nearly all the time.
            let writers = (0..<4).map { w in
                Worker { () throws -> Int in
                    let c = try RawConnection(path: server.socketPath)
                    var i = 0
                    while !stop.isSet {
                        _ = try c.command(["PUT", "f", "w\(w)", "\(i)"])
                        i += 1
                    }
                    return i
                }
            }
            defer { stop.set(); _ = writers.map { try? $0.join() } }
            // Each watcher is the only one, so the feed's window starts anew when it follows:
            // the records written but not yet durable then are not in it.
            let info = try RawConnection(path: server.socketPath)
            var cursor: UInt64 = 0
            for _ in 0..<100 {
                while case .bulk(let text) = try info.command(["INFO"]),
                      !String(decoding: text, as: UTF8.self).contains("followers=0,") {}  // the last watcher has gone
                let watcher = try RawConnection(path: server.socketPath)
                try watcher.send("CHANGES f FROM \(cursor)\r\n")
                var changes = 0
                for message in try Self.read(watcher, until: { message in
                    if case .change = message { changes += 1 }
                    return changes == 5 || { if case .other = message { return true }; return false }()
                }) {
                    switch message {
                    case .header("f", let seq): #expect(seq == cursor)
                    case .synced("f", let seq): #expect(seq == cursor)
                    case .change("f", let seq, _):
                        #expect(seq == cursor + 1, "no gap, no duplicate")
                        cursor = seq
                    default: Issue.record("unexpected \(message) after sequence \(cursor)")
                    }
                }
            }
        }
    }

    @Test("resume with FROM after a disconnect and after kill -9 and a restart: nothing missed, nothing twice")
    func resumeAcrossRestart() async throws {
        let server = try ServerProcess(arguments: ["--fsync", "always"])
        defer { server.stop() }
        try await onOwnThread {
            let writer = try RawConnection(path: server.socketPath)
            for i in 1...20 { _ = try writer.command(["PUT", "r", "k\(i)", "v\(i)"]) }
            var watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES r FROM 0\r\n")
            var got = try Self.read(watcher) { $0 == .synced("r", 20) }
            #expect(got.count == 22 && got.first == .header("r", 0))
            // Disconnect after change 12, resume from it.
            watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES r FROM 12\r\n")
            got = try Self.read(watcher) { $0 == .synced("r", 20) }
            #expect(Self.sequences(got) == Array(13...20))
        }
        try await server.signal(SIGKILL)
        try await server.restart()
        try await onOwnThread {
            let again = try RawConnection(path: server.socketPath)
            for i in 21...25 { _ = try again.command(["PUT", "r", "k\(i)", "v\(i)"]) }
            let watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES r FROM 18\r\n")
            let got = try Self.read(watcher) { $0 == .synced("r", 25) }
            #expect(Self.sequences(got) == Array(19...25))
            _ = try again.command(["DEL", "r", "k1"])
            #expect(try Self.read(watcher) { _ in true } == [.change("r", 26, [(b("k1"), nil)])])
        }
    }

    @Test("FROM older than the history kept: -COMPACTED with the oldest sequence, the connection usable; FROM the one before the oldest works")
    func compactedHistory() throws {
        let server = try ServerProcess(arguments: ["--changes-history", "5"])
        defer { server.stop() }
        let c = try RawConnection(path: server.socketPath)
        for i in 1...10 { _ = try c.command(["PUT", "h", "k\(i)", "v"]) }
        #expect(try c.command(["COMPACT", "h"]) == .simple("OK"))          // 1-10 kept: they hold 6-10
        for i in 11...20 { _ = try c.command(["PUT", "h", "k\(i)", "v"]) }
        #expect(try c.command(["COMPACT", "h"]) == .simple("OK"))          // 1-10 dropped
        #expect(try c.command(["CHANGES", "h", "FROM", "9"]) == .error("COMPACTED oldest available sequence is 11"))
        #expect(try c.command(["PING"]) == .simple("PONG"))
        try c.send("CHANGES h FROM 10\r\n")
        let got = try Self.read(c) { $0 == .synced("h", 20) }
        #expect(Self.sequences(got) == Array(11...20))
    }

    @Test("SNAPSHOT and the changes after it, under concurrent writes, add up to the final state SCAN shows")
    func snapshotPlusChangesIsTheState() async throws {
        try await onOwnThread {
        let server = try ServerProcess()
        defer { server.stop() }
        let c = try RawConnection(path: server.socketPath)
        for i in 0..<2500 { _ = try c.command(["PUT", "m", "k\(i % 1800)", "v\(i)"]) }  // a snapshot of 3 pages
        let writing = Worker { () throws -> Void in
            let w = try RawConnection(path: server.socketPath)
            for i in 0..<600 {
                if i % 3 == 0 { _ = try w.command(["DEL", "m", "k\(i)"]) } else { _ = try w.command(["PUT", "m", "k\(i)", "new\(i)"]) }
            }
            _ = try w.command(["PUT", "m", "done", "1"])
        }
        let watcher = try RawConnection(path: server.socketPath)
        try watcher.send("CHANGES m SNAPSHOT\r\n")
        var state: [[UInt8]: [UInt8]] = [:]
        var snapshots = 0
        _ = try Self.read(watcher) { message in
            switch message {
            case .snapshot(_, _, let pairs):
                snapshots += 1
                state.merge(pairs) { $1 }
            case .change(_, _, let pairs):
                for pair in pairs { state[pair.key] = pair.value }
                return pairs.contains { $0.key == b("done") }
            default: break
            }
            return false
        }
        try writing.join()
        #expect(snapshots >= 2, "the snapshot came in pages of at most 1,000 pairs")
        var scanned: [[UInt8]: [UInt8]] = [:]
        var cursor = "0"
        repeat {
            guard case .array(let page) = try c.command(["SCAN", "m", cursor, "COUNT", "1000"]), case .bulk(let next) = page[0],
                  case .array(let flat) = page[1] else { throw TestFailure("bad SCAN reply") }
            for i in stride(from: 0, to: flat.count, by: 2) {
                if case .bulk(let key) = flat[i], case .bulk(let value) = flat[i + 1] { scanned[key] = value }
            }
            cursor = String(decoding: next, as: UTF8.self)
        } while cursor != "0"
        #expect(state == scanned)
        }
    }

    @Test("a stalled watcher is dropped with LAGGING, after everything up to it, while writers and another watcher go on")
    func stalledWatcherIsDropped() async throws {
        try await onOwnThread {
        let server = try ServerProcess(arguments: ["--changes-lag-bytes", "65536", "--max-output-bytes", "65536"])
        defer { server.stop() }
        let stalled = try RawConnection(path: server.socketPath)
        try stalled.send("CHANGES s\r\n")
        let live = try RawConnection(path: server.socketPath)
        try live.send("CHANGES s\r\n")
        _ = try Self.read(live) { $0 == .synced("s", 0) }
        let value = String(repeating: "x", count: 1000)
        // Up to 3 MB: far more than the stalled watcher's window, output and socket buffers
        // hold. Writing stops 20 changes after the drop: a dropped watcher's last words wait
        // only 10 s to be read, and a loaded machine may take longer than that for 3,000 writes.
        // The live watcher reads each change before the next write: however slowly a loaded
        // machine runs this thread, it never falls behind by the 64 KiB that would drop it too.
        let w = try RawConnection(path: server.socketPath)
        let admin = try RawConnection(path: server.socketPath)
        func info() throws -> String {
            guard let text = try admin.command(["INFO"]).bulkText else { throw TestFailure("INFO") }
            return text
        }
        var liveSeen: UInt64 = 0
        var writes = 0
        var droppedAt: Int?
        while writes < 3000 && (droppedAt.map { writes < $0 + 20 } ?? true) {
            writes += 1
            #expect(try w.command(["PUT", "s", "k\(writes)", value]) == .simple("OK"))
            _ = try Self.read(live) { message in
                if case .change(_, let seq, _) = message {
                    #expect(seq == liveSeen + 1)
                    liveSeen = seq
                }
                return liveSeen == UInt64(writes)
            }
            if droppedAt == nil, writes % 10 == 0, try info().contains("followers_dropped=1,") { droppedAt = writes }
        }
        #expect(droppedAt != nil, "the stalled watcher was not dropped in \(writes) writes")
        // The stalled watcher now reads: every change up to some N, then LAGGING naming N, then the end.
        var last: UInt64 = 0
        var ending: Reply?
        while ending == nil {
            let reply = try stalled.reply()
            switch Message(reply) {
            case .change(_, let seq, _):
                #expect(seq == last + 1, "no gap before the drop")
                last = seq
            case .header, .synced: continue
            default: ending = reply
            }
        }
        #expect(ending == .error("LAGGING resume from sequence \(last) of namespace 's'"))
        #expect(last < UInt64(writes))
        #expect(stalled.isClosedByServer())
        let text = try info()
        #expect(text.contains("followers=1,changes_sent="))
        #expect(text.contains("followers_dropped=1,"))
        // Resuming from N gets the rest, no gap.
        let resumed = try RawConnection(path: server.socketPath)
        try resumed.send("CHANGES s FROM \(last)\r\n")
        let rest = try Self.read(resumed) { $0 == .synced("s", UInt64(writes)) }
        #expect(Self.sequences(rest) == Array((last + 1)...UInt64(writes)))
        }
    }

    @Test("followers sharing encoded changes (RESP2 and RESP3, with and without a prefix, one going back to RESP2 midway) each get exactly their bytes, changes too large to share included")
    func sharedEncodings() async throws {
        try await onOwnThread {
        let server = try ServerProcess()
        defer { server.stop() }
        let synced2 = "*3\r\n$6\r\nsynced\r\n$1\r\nt\r\n:0\r\n", synced3 = ">3\r\n$6\r\nsynced\r\n$1\r\nt\r\n:0\r\n"
        var followers: [(c: RawConnection, prefix: String, version: RESPVersion)] = []
        for (prefix, version) in [("", RESPVersion.resp2), ("", .resp2), ("a:", .resp2), ("", .resp3), ("a:", .resp3), ("", .resp3)] {
            let c = try RawConnection(path: server.socketPath)
            if version == .resp3 { _ = try RESP3ServerTests.exchange(c, "HELLO 3\r\n", expect: "$7\r\nmodules\r\n*0\r\n") }
            _ = try RESP3ServerTests.exchange(c, prefix.isEmpty ? "CHANGES t\r\n" : "CHANGES t PREFIX \(prefix)\r\n", expect: version == .resp3 ? synced3 : synced2)
            followers.append((c, prefix, version))
        }
        let writer = try RawConnection(path: server.socketPath)
        var sequence: UInt64 = 0
        /// Writes and returns each change as (sequence, key/value pairs; nil value: deleted).
        func write(_ round: Int) throws -> [(UInt64, [([UInt8], [UInt8]?)])] {
            var changes: [(UInt64, [([UInt8], [UInt8]?)])] = []
            for i in 1...30 {
                sequence += 1
                let key = "\(i % 2 == 0 ? "a" : "b"):\(round):\(i)"
                let value = i % 10 == 5 ? [UInt8](repeating: 0x61 + UInt8(i % 7), count: 100_000) : b("v\(i)")
                #expect(try writer.command([b("PUT"), b("t"), b(key), value]) == .simple("OK"))
                changes.append((sequence, [(b(key), value)]))
                if i % 6 == 0 {
                    sequence += 1
                    #expect(try writer.command(["BATCH", "t", "PUT", "a:\(round):x", "\(i)", "DEL", key]) == .array([.simple("OK"), .integer(1)]))
                    changes.append((sequence, [(b("a:\(round):x"), b("\(i)")), (b(key), nil)]))
                }
            }
            return changes
        }
        func expected(_ changes: [(UInt64, [([UInt8], [UInt8]?)])], prefix: String, version: RESPVersion) -> [UInt8] {
            changes.flatMap { change -> [UInt8] in
                let pairs = change.1.filter { $0.0.starts(with: b(prefix)) }.flatMap { [Reply.bulk($0.0), $0.1.map(Reply.bulk) ?? .null] }
                guard !pairs.isEmpty else { return [] }
                return Reply.push([.bulk(b("change")), .bulk(b("t")), .integer(Int64(change.0)), .array(pairs)]).encoded(in: version)
            }
        }
        let first = try write(1)
        for f in followers {
            let want = expected(first, prefix: f.prefix, version: f.version)
            #expect(try Self.receive(f.c, count: want.count) == want, "\(f.version), prefix '\(f.prefix)'")
        }
        // The last one goes back to RESP2: from its HELLO 2 on, its messages are arrays.
        let last = followers.count - 1
        _ = try RESP3ServerTests.exchange(followers[last].c, "HELLO 2\r\n", expect: "$7\r\nmodules\r\n*0\r\n")
        followers[last].version = .resp2
        let second = try write(2)
        for f in followers {
            let want = expected(second, prefix: f.prefix, version: f.version)
            #expect(try Self.receive(f.c, count: want.count) == want, "\(f.version), prefix '\(f.prefix)', second round")
        }
        }
    }

    @Test("forty followers of a flood larger than a turn's budget for them all get every change, in order")
    func floodToManyFollowers() async throws {
        try await onOwnThread {
        let server = try ServerProcess()
        defer { server.stop() }
        let followers = try Self.followers(40, of: "f", on: server)
        let writes = 200
        let value = [UInt8](repeating: 0x76, count: 4000)  // 40 x 200 x 4 kB: 32 MB, some 240 turns' budget
        let writer = try RawConnection(path: server.socketPath)
        var pipeline: [UInt8] = []
        for i in 1...writes { RequestEncoder.encode([b("PUT"), b("f"), b("k\(i)"), value], into: &pipeline) }
        try writer.send(pipeline)
        for _ in 1...writes { #expect(try writer.reply() == .simple("OK")) }
        try Self.expectEveryChange(through: writes, on: followers) { _ in value }
        }
    }

    @Test("150 watchers of small changes, more than a turn serves, each get every change once, in order, while another client's requests are answered")
    func manyWatchersOfSmallChanges() async throws {
        try await onOwnThread {
        let server = try ServerProcess()
        defer { server.stop() }
        let watchers = try Self.followers(150, of: "s", on: server)
        let writes = 400
        let writer = try RawConnection(path: server.socketPath)
        let reader = try RawConnection(path: server.socketPath)
        var pipeline: [UInt8] = []
        for i in 1...writes { RequestEncoder.encode([b("PUT"), b("s"), b("k\(i % 7)"), b("v\(i)")], into: &pipeline) }
        try writer.send(pipeline)
        // Served while the watchers are being fed: absent, or a value the writes gave it.
        for _ in 0..<20 {
            let reply = try reader.command(["GET", "s", "k1"])
            if case .bulk(let value) = reply { #expect(value.first == 0x76) } else { #expect(reply == .null) }
        }
        for _ in 1...writes { #expect(try writer.reply() == .simple("OK")) }
        try Self.expectEveryChange(through: writes, on: watchers) { seq in b("v\(seq)") }
        }
    }

    @Test("watchers that close or RESET while put off to later turns: the others get every change, each RESET one the changes before its +RESET and then ordinary replies, and INFO counts the followers left")
    func watchersLeavingWhilePutOff() async throws {
        try await onOwnThread {
        let server = try ServerProcess()
        defer { server.stop() }
        var leaving = try Self.followers(30, of: "q", on: server)
        let resetting = try Self.followers(30, of: "q", on: server)
        let staying = try Self.followers(30, of: "q", on: server)
        let writes = 300
        let writer = try RawConnection(path: server.socketPath)
        var pipeline: [UInt8] = []
        for i in 1...writes { RequestEncoder.encode([b("PUT"), b("q"), b("k"), b("v\(i)")], into: &pipeline) }
        try writer.send(pipeline)
        // While the writes are fed to 90 watchers, 16 a turn: a third leave, a third stop following.
        leaving.removeAll()  // closes them
        for c in resetting { try c.send("RESET\r\n") }
        for _ in 1...writes { #expect(try writer.reply() == .simple("OK")) }
        try Self.expectEveryChange(through: writes, on: staying) { seq in b("v\(seq)") }
        for (n, c) in resetting.enumerated() {
            var seen: UInt64 = 0
            _ = try Self.read(c) { message in
                if case .change(_, let seq, _) = message {
                    #expect(seq == seen + 1, "resetting \(n)")
                    seen = seq
                }
                return message == .other(.simple("RESET"))
            }
            #expect(try c.command(["PING"]) == .simple("PONG"), "resetting \(n)")
        }
        let admin = try RawConnection(path: server.socketPath)
        var followers = ""
        for _ in 0..<100 {
            guard case .bulk(let text) = try admin.command(["INFO"]) else { throw TestFailure("INFO") }
            followers = String(decoding: text, as: UTF8.self).split(separator: "\r\n").first { $0.hasPrefix("ns_q:") }?
                .split(separator: ",").first { $0.hasPrefix("followers=") }.map(String.init) ?? ""
            if followers == "followers=30" { break }
            usleep(50_000)  // the closed ones are counted out as the server reads their ends
        }
        #expect(followers == "followers=30")
        }
    }

    /// `count` connections following `namespace` (empty, synced at 0).
    static func followers(_ count: Int, of namespace: String, on server: ServerProcess) throws -> [RawConnection] {
        let followers = try (0..<count).map { _ in try RawConnection(path: server.socketPath) }
        let synced = "$6\r\nsynced\r\n$\(namespace.utf8.count)\r\n\(namespace)\r\n:0\r\n"
        for c in followers { _ = try RESP3ServerTests.exchange(c, "CHANGES \(namespace)\r\n", expect: synced) }
        return followers
    }

    /// Reads each follower's changes 1 through `last`: each once, in order, its first value
    /// the one `value(seq)` gives.
    static func expectEveryChange(through last: Int, on followers: [RawConnection], value: (UInt64) -> [UInt8]) throws {
        for (n, c) in followers.enumerated() {
            var seen: UInt64 = 0
            _ = try read(c) { message in
                if case .change(_, let seq, let pairs) = message {
                    #expect(seq == seen + 1 && pairs.first?.value == value(seq), "follower \(n)")
                    seen = seq
                }
                return seen == UInt64(last)
            }
        }
    }

    @Test("INFO's changes_held: as followers (two prefixes, RESP2 and RESP3) are served new changes, what all of them took is let go; followers that do not read keep theirs held; one joining FROM before the window still gets every change")
    func changesHeldAreLetGo() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--max-output-bytes", "65536"])
            defer { server.stop() }
            let admin = try RawConnection(path: server.socketPath)
            func held() throws -> Int {
                guard let text = try admin.command(["INFO"]).bulkText,
                      let field = text.split(separator: "\r\n").first(where: { $0.hasPrefix("ns_h:") })?
                          .split(separator: ",").first(where: { $0.hasPrefix("changes_held=") }),
                      let bytes = Int(field.dropFirst("changes_held=".count)) else { throw TestFailure("INFO has no changes_held for h") }
                return bytes
            }
            let all = try RawConnection(path: server.socketPath)
            _ = try RESP3ServerTests.exchange(all, "CHANGES h\r\n", expect: "$6\r\nsynced\r\n$1\r\nh\r\n:0\r\n")
            let prefixed = try RawConnection(path: server.socketPath)
            _ = try RESP3ServerTests.exchange(prefixed, "HELLO 3\r\n", expect: "$7\r\nmodules\r\n*0\r\n")
            _ = try RESP3ServerTests.exchange(prefixed, "CHANGES h PREFIX a\r\n", expect: ">3\r\n$6\r\nsynced\r\n$1\r\nh\r\n:0\r\n")
            let writer = try RawConnection(path: server.socketPath)
            let value = [UInt8](repeating: 0x76, count: 1000)
            var last = 0
            /// Writes changes `last + 1 ... through`, keys `a<seq>` for even sequences, `b<seq>` for odd.
            func write(through: Int) throws {
                var pipeline: [UInt8] = []
                for i in (last + 1)...through { RequestEncoder.encode([b("PUT"), b("h"), b(i % 2 == 0 ? "a\(i)" : "b\(i)"), value], into: &pipeline) }
                try writer.send(pipeline)
                for _ in (last + 1)...through { #expect(try writer.reply() == .simple("OK")) }
                last = through
            }
            /// Reads what the RESP3 follower of prefix `a` gets for changes `from...through` and checks it.
            func expectUnderA(_ from: Int, through: Int) throws {
                let pushes = stride(from: from + from % 2, through: through, by: 2).flatMap { i in
                    Reply.push([.bulk(b("change")), .bulk(b("h")), .integer(Int64(i)), .array([.bulk(b("a\(i)")), .bulk(value)])]).encoded(in: .resp3)
                }
                #expect(try Self.receive(prefixed, count: pushes.count) == pushes, "the RESP3 follower of prefix a gets exactly its changes \(from)...\(through)")
            }
            /// Serves every follower in `readers` (and the prefixed one) new changes, two at a time,
            /// until INFO shows nothing held (at most 20 times): the loop lets go of what they all
            /// took as it serves them a change.
            func heldAsNewChangesAreServed(_ readers: [RawConnection]) throws -> Int {
                var bytes = try held()
                for _ in 0..<20 where bytes > 0 {
                    let from = last + 1
                    try write(through: last + 2)
                    for c in readers { _ = try Self.read(c) { $0 == .change("h", UInt64(last), [(b("a\(last)"), value)]) } }
                    try expectUnderA(from, through: last)
                    bytes = try held()
                }
                return bytes
            }
            try write(through: 200)
            _ = try Self.read(all) { $0 == .change("h", 200, [(b("a200"), value)]) }
            try expectUnderA(1, through: 200)
            // Both took all 200 changes (200 kB): nothing needs to be held.
            var bytes = try heldAsNewChangesAreServed([all])
            #expect(bytes == 0, "both followers have every change, yet \(bytes) bytes are held")
            // A follower that does not read holds what it has not taken: 2 MB, past its output
            // bound and socket buffer (the prefixed one does not read either).
            let stalled = try RawConnection(path: server.socketPath)
            try stalled.send("CHANGES h\r\n")
            let start = last
            _ = try Self.read(stalled) { $0 == .synced("h", UInt64(start)) }
            try write(through: start + 2000)
            _ = try Self.read(all) { $0 == .change("h", UInt64(last), [(b("a\(last)"), value)]) }
            #expect(try held() >= 1000 * 1000, "the changes the followers that do not read have not taken are held")
            let caughtUp = try Self.read(stalled) { $0 == .change("h", UInt64(last), [(b("a\(last)"), value)]) }
            #expect(Self.sequences(caughtUp) == Array(UInt64(start + 1)...UInt64(last)), "the stalled follower, reading again, gets every change")
            try expectUnderA(start + 1, through: last)
            bytes = try heldAsNewChangesAreServed([all, stalled])
            #expect(bytes == 0, "all followers caught up, yet \(bytes) bytes are held")
            // One joining from before the window still gets every change, from the log files.
            let late = try RawConnection(path: server.socketPath)
            try late.send("CHANGES h FROM 10\r\n")
            let messages = try Self.read(late) { $0 == .synced("h", UInt64(last)) }
            #expect(Self.sequences(messages) == Array(11...UInt64(last)))
        }
    }

    /// Reads exactly `count` bytes from `c` (or fails at its timeout).
    static func receive(_ c: RawConnection, count: Int) throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while received.count < count {
            let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, min($0.count, count - received.count), 0) }
            guard n > 0 else { throw TestFailure("recv after \(received.count) of \(count) bytes: \(n)") }
            received += buffer[0..<n]
        }
        return received
    }
}

private func b(_ s: String) -> [UInt8] { Array(s.utf8) }

/// A flag one thread sets and others poll.
final class StopFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isSet: Bool { value.load(ordering: .acquiring) }
    func set() { value.store(true, ordering: .releasing) }
}

/// Runs a body on a thread of its own (a writer beside a test's own blocking reads); `join()`
/// waits for it and returns what it returned, or throws what it threw.
final class Worker<T: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<T, any Error>?

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [unowned self] in
            result = Result { try body() }
            done.signal()
        }
        thread.start()
    }

    func join() throws -> T {
        done.wait()
        return try result!.get()
    }
}
