import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing

/// What Redis clients and tools read from the server's own commands, over a real socket:
/// CLIENT INFO's fields (node-redis 4 reads them by position), INFO's sections and the fields
/// `redis-cli --stat` reads, COMMAND DOCS (redis-cli's HELP), CONFIG GET proto-max-bulk-len, and
/// HSCAN cursors that one long scan does not push out (protocol.md, "Namespaces as Redis
/// hashes", "CLIENT", "INFO", "Differences from Redis").
@Suite("Redis tools: CLIENT INFO, INFO sections, COMMAND DOCS, CONFIG GET, HSCAN cursors")
struct RedisToolsServerTests {
    /// Redis 7's CLIENT INFO fields, in its order (networking.c, catClientInfoString).
    static let redisFields = ["id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub", "psub", "ssub", "multi",
                              "qbuf", "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem",
                              "events", "cmd", "user", "redir", "resp", "lib-name", "lib-ver"]

    @Test("CLIENT INFO: Redis 7's fields in Redis's order with this connection's values, then uid, gid and pid")
    func clientInfoFields() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["CLIENT", "SETNAME", "probe"]) == .simple("OK"))
            #expect(try c.command(["CLIENT", "SETINFO", "LIB-NAME", "node-redis"]) == .simple("OK"))
            guard case .integer(let id) = try c.command(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
            let line = try #require(try c.command(["CLIENT", "INFO"]).bulkText)
            #expect(line.hasSuffix("\n") && !line.dropLast().contains("\n"))
            let pairs = line.dropLast().split(separator: " ").map { word -> (String, String) in
                let parts = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "<no =>")
            }
            #expect(pairs.map(\.0) == Self.redisFields + ["uid", "gid", "pid"])
            let fields = Dictionary(pairs, uniquingKeysWith: { first, _ in first })
            #expect(fields["id"] == String(id))
            #expect(fields["addr"] == server.socketPath + ":0" && fields["laddr"] == server.socketPath + ":0")
            #expect(fields["name"] == "probe" && fields["lib-name"] == "node-redis" && fields["lib-ver"] == "")
            #expect(fields["flags"] == "U" && fields["db"] == "0" && fields["multi"] == "-1" && fields["resp"] == "2")
            #expect(fields["cmd"] == "client|info" && fields["redir"] == "-1" && fields["events"] == "r")
            #expect(fields["uid"] == String(getuid()) && fields["pid"] == String(getpid()))
            for name in ["fd", "age", "idle", "sub", "psub", "ssub", "qbuf", "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp",
                         "obl", "oll", "omem", "tot-mem", "redir"] {
                #expect(fields[name].flatMap { Int($0) } != nil, "\(name) is an integer, as clients parse it")
            }
        }
    }

    /// The `# Name` headers of an INFO text, in order.
    static func headers(_ text: String) -> [String] {
        text.components(separatedBy: "\r\n").filter { $0.hasPrefix("# ") }.map { String($0.dropFirst(2)) }
    }

    /// The value of `field:` in an INFO text.
    static func field(_ name: String, _ text: String) -> String? {
        text.components(separatedBy: "\r\n").first { $0.hasPrefix(name + ":") }.map { String($0.dropFirst(name.count + 1)) }
    }

    @Test("INFO section…: only the sections asked for, in any case; used_memory, blocked_clients and db0:keys as Redis names them")
    func infoSections() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["INFO", "keyspace"]).bulkText == "# Keyspace\r\n", "no keys: no db0 line, as in Redis")
            #expect(try c.command(["HSET", "info-a", "x", "1", "y", "2"]) == .integer(2))
            #expect(try c.command(["HSET", "info-b", "z", "3"]) == .integer(1))
            #expect(try c.command(["PUT", "info-b", "soon", "v", "PX", "600000"]) == .simple("OK"))
            #expect(try c.command(["INFO", "keyspace"]).bulkText == "# Keyspace\r\ndb0:keys=4,expires=1,avg_ttl=0\r\n")
            #expect(try c.command(["INFO", "KeySpace"]).bulkText == "# Keyspace\r\ndb0:keys=4,expires=1,avg_ttl=0\r\n")

            let every = try #require(try c.command(["INFO"]).bulkText)
            #expect(Self.headers(every) == ["Server", "Clients", "Memory", "Replication", "Namespaces", "Keyspace"])
            #expect(try c.command(["INFO", "replication"]).bulkText == "# Replication\r\nrole:master\r\nconnected_slaves:0\r\n",
                    "what redis-py's info('replication')['role'] reads")
            // A name with Redis's `:` has it written %3A in its field, which ends at the first `:`.
            #expect(try c.command(["HSET", "user:1", "f", "v"]) == .integer(1))
            #expect(try c.command(["KEYS", "user:*"]) == .array([.bulk("user:1")]))
            let lines = try #require(try c.command(["INFO", "namespaces"]).bulkText).components(separatedBy: "\r\n")
            #expect(lines.contains { $0.hasPrefix("ns_user%3A1:keys=1,") }, "\(lines)")
            for name in ["all", "everything", "default", "ALL"] {
                #expect(Self.headers(try #require(try c.command(["INFO", name]).bulkText)) == Self.headers(every), "INFO \(name)")
            }
            let two = try #require(try c.command(["INFO", "MEMORY", "clients"]).bulkText)
            #expect(Self.headers(two) == ["Clients", "Memory"], "the asked sections, in INFO's order")
            #expect(two.hasPrefix("# Clients\r\nconnected_clients:1\r\n") && two.contains("\r\n\r\n# Memory\r\nused_memory:"))
            #expect(two.hasSuffix("\r\n") && !two.hasSuffix("\r\n\r\n"))
            #expect(Self.field("blocked_clients", two) == "0")
            let used = try #require(Self.field("used_memory", two).flatMap { Int($0) })
            #expect(used > 1 << 20 && used < 1 << 40, "the resident set size of a running server: \(used)")
            #expect(Self.field("used_memory_human", two)?.hasSuffix("M") == true)
            #expect(Self.field("used_memory_rss", two).flatMap { Int($0) } != nil)
            #expect(try c.command(["INFO", "nosuch"]) == .bulk([]), "a section no one has: empty, as in Redis")
            #expect(Self.headers(try #require(try c.command(["INFO", "server", "nosuch"]).bulkText)) == ["Server"])
        }
    }

    @Test("COMMAND DOCS is an error, so redis-cli falls back to its own HELP; COMMAND lists nothing, and COMMAND COUNT is 0, an integer as Redis's; TIME answers the clock as Redis does")
    func commandDocs() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["COMMAND", "DOCS"]).errorCode == "ERR")
            #expect(try c.command(["command", "docs", "HSET"]).errorCode == "ERR")
            #expect(try c.command(["COMMAND"]) == .array([]))
            #expect(try c.command(["COMMAND", "COUNT"]) == .integer(0))
            #expect(try c.command(["COMMAND", "LIST"]) == .array([]))
            #expect(try c.command(["PING"]) == .simple("PONG"), "the connection goes on")
            // TIME: the seconds since the epoch and the microseconds into the second, as bulk strings.
            let before = Date().timeIntervalSince1970
            let time = try c.command(["TIME"])
            let after = Date().timeIntervalSince1970
            guard case .array(let parts) = time, parts.count == 2, case .bulk(let s) = parts[0], case .bulk(let us) = parts[1],
                  let seconds = Double(String(decoding: s, as: UTF8.self)), let micros = Double(String(decoding: us, as: UTF8.self)) else {
                Issue.record("TIME: \(time)")
                return
            }
            #expect(micros >= 0 && micros < 1_000_000, "\(time)")
            #expect(seconds + micros / 1e6 >= before.rounded(.down) && seconds + micros / 1e6 <= after + 1, "\(time) between \(before) and \(after)")
            #expect(try c.command(["TIME", "x"]).errorCode == "ERR")
        }
    }

    @Test("CONFIG GET proto-max-bulk-len is --max-bulk-bytes, the protocol's bulk limit, not --max-value-bytes")
    func protoMaxBulkLen() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--max-value-bytes", "1000", "--max-bulk-bytes", "5000", "--max-request-bytes", "20000"])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["CONFIG", "GET", "proto-max-bulk-len"]) == .array([.bulk("proto-max-bulk-len"), .bulk("5000")]))
            #expect(try c.command(["CONFIG", "GET", "client-query-buffer-limit"]) == .array([.bulk("client-query-buffer-limit"), .bulk("20000")]))
            // What the two limits mean: a 3,000-byte bulk is read (the value is refused), a 6,000-byte one is not.
            #expect(try c.command(["PUT", "cfg", "k", String(repeating: "v", count: 3000)]).errorCode == "TOOBIG")
            #expect(try c.command(["PING"]) == .simple("PONG"))
            #expect(try c.command(["PUT", "cfg", "k", String(repeating: "v", count: 6000)]).errorCode == "PROTO")
        }
    }

    @Test("a long HSCAN (70,000 pages, more than the table's 65,536 cursors) leaves another scan's cursor valid",
          .tags(.slow), .skippedWhenQuick)
    func longScanKeepsOtherCursors() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let a = try RawConnection(path: server.socketPath), b = try RawConnection(path: server.socketPath)
            let slowFields = (0..<20).flatMap { ["f\($0 + 10)", "v"] }
            #expect(try a.command(["HSET", "slowscan"] + slowFields) == .integer(20))
            let bigKeys = 70_000
            #expect(try b.command(["HSET", "bigscan"] + (0..<bigKeys).flatMap { ["k\(100_000 + $0)", "v"] }) == .integer(Int64(bigKeys)))

            guard case .array(let first) = try a.command(["HSCAN", "slowscan", "0", "COUNT", "10"]),
                  let cursor = first.first?.bulkText, cursor != "0" else { throw TestFailure("A's first page") }
            var next = "0", pages = 0, seen = 0
            repeat {
                guard case .array(let page) = try b.command(["HSCAN", "bigscan", next, "COUNT", "1"]), let text = page[0].bulkText,
                      case .array(let flat) = page[1] else { throw TestFailure("B's page \(pages): BADCURSOR mid-scan?") }
                (next, pages, seen) = (text, pages + 1, seen + flat.count / 2)
            } while next != "0"
            #expect(seen == bigKeys && pages >= bigKeys)
            let resumed = try a.command(["HSCAN", "slowscan", cursor, "COUNT", "10"])
            guard case .array(let last) = resumed, case .array(let flat) = last[1] else {
                Issue.record("A's second page after B's long scan: \(resumed)")
                return
            }
            #expect(flat.count == 20, "the other 10 fields")
        }
    }
}
