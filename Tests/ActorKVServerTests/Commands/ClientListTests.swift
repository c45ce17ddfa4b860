import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing

/// `CLIENT LIST` and `CLIENT KILL` on a real server: a line per open connection, as CLIENT INFO's,
/// filtered by TYPE and ID; a connection that ends is no longer listed; a killed one is closed at
/// once and what it held released.
@Suite struct ClientListTests {
    /// The connection's id (CLIENT ID).
    static func id(of connection: RawConnection) throws -> Int64 {
        guard case .integer(let id) = try connection.command(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
        return id
    }

    /// The `key=value` fields of each line of a CLIENT LIST reply.
    static func lines(_ reply: Reply) throws -> [[String: String]] {
        guard case .bulk(let bytes) = reply else { throw TestFailure("not a bulk string: \(reply)") }
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(text.isEmpty || text.hasSuffix("\n"), "each line ends with a newline")
        return text.split(separator: "\n").map { line in
            var fields: [String: String] = [:]
            for word in line.split(separator: " ") {
                let parts = word.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                fields[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
            }
            return fields
        }
    }

    @Test("CLIENT LIST shows every open connection by id: its name, whether it follows changes (TYPE pubsub), its age, idle time, last command and peer; the one asking runs client|list; a connection that ends goes")
    func listsOpenConnections() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let named = try RawConnection(path: server.socketPath)
            #expect(try named.command(["CLIENT", "SETNAME", "worker-1"]) == .simple("OK"))
            let namedID = try Self.id(of: named)
            let follower = try RawConnection(path: server.socketPath)
            let followerID = try Self.id(of: follower)
            try follower.send("CHANGES jobs\r\n")
            _ = try follower.reply()  // the subscription's confirmation
            let asking = try RawConnection(path: server.socketPath)
            let askingID = try Self.id(of: asking)
            let silent = try RawConnection(path: server.socketPath)  // sends nothing
            usleep(1_100_000)  // so that the first two are a second old
            // `named` sends again, more than a second after the follower last did: their idle
            // times differ by a second or more, however the machine is loaded.
            #expect(try named.command(["PUT", "jobs", "a", "1"]) == .simple("OK"))
            _ = try named.command(["NOSUCHCOMMAND"])  // an unknown command is noted as none

            let all = try Self.lines(try asking.command(["CLIENT", "LIST"]))
            #expect(all.map { $0["id"] }.prefix(3) == [namedID, followerID, askingID].map { String($0) }[...], "in id order: \(all)")
            #expect(all.map { $0["name"] } == ["worker-1", "", "", ""])
            #expect(all.map { $0["flags"] } == ["U", "UP", "U", "U"])
            #expect(all.map { $0["cmd"] } == ["NULL", "changes", "client|list", "NULL"], "each connection's last command")
            #expect(all.allSatisfy { $0["pid"] == String(getpid()) && $0["uid"] == String(getuid()) })
            #expect(all.prefix(2).allSatisfy { Int($0["age"] ?? "") ?? 0 >= 1 }, "\(all.map { $0["age"] })")
            let silentID = all.last?["id"]
            let idle = all.map { Int($0["idle"] ?? "") ?? -1 }
            #expect(idle[1] >= 1 && idle[3] >= 1, "the follower and the silent connection sent nothing for a second: \(idle)")
            #expect(idle[0] >= 0 && idle[0] < idle[1], "the named connection sent since: \(idle)")
            #expect(idle[2] == 0, "the connection asking is running its command")
            #expect(try named.command(["CLIENT", "GETNAME"]) == .bulk("worker-1"))
            #expect(try Self.lines(try asking.command(["CLIENT", "LIST", "ID", String(namedID)])).first?["cmd"] == "client|getname")
            #expect(try named.command(["GET", "jobs", "a"]) == .bulk("1"))
            #expect(try Self.lines(try asking.command(["CLIENT", "LIST", "ID", String(namedID)])).first?["cmd"] == "get")
            #expect(try Self.lines(try asking.command(["CLIENT", "LIST", "TYPE", "pubsub"])).map { $0["id"] } == [String(followerID)])
            #expect(try Self.lines(try asking.command(["client", "list", "type", "NORMAL"])).map { $0["id"] }
                    == [String(namedID), String(askingID), silentID])
            #expect(try Self.lines(try asking.command(["CLIENT", "LIST", "ID", String(askingID), String(namedID), "99999"])).map { $0["id"] }
                    == [namedID, askingID].map { String($0) })
            #expect(try Self.lines(try asking.command(["CLIENT", "LIST", "ID", String(namedID), "TYPE", "pubsub"])).isEmpty)
            #expect(try asking.command(["CLIENT", "LIST", "TYPE", "master"]) == .bulk(""))
            // The line of CLIENT INFO is the connection's own line of CLIENT LIST.
            guard case .bulk(let own) = try named.command(["CLIENT", "INFO"]) else { throw TestFailure("CLIENT INFO") }
            #expect(try Self.lines(.bulk(own)).first?["name"] == "worker-1")

            for (request, error) in [
                (["CLIENT", "LIST", "TYPE", "bogus"], "ERR Unknown client type 'bogus'"),
                (["CLIENT", "LIST", "ID", "x"], "ERR Invalid client ID"),
                (["CLIENT", "LIST", "ID", "0"], "ERR Invalid client ID"),
                (["CLIENT", "LIST", "TYPE"], "ERR syntax error (usage: CLIENT LIST [TYPE normal|pubsub] [ID id ...])"),
                (["CLIENT", "LIST", "TYPE", "normal", "TYPE", "pubsub"], "ERR syntax error (usage: CLIENT LIST [TYPE normal|pubsub] [ID id ...])"),
                (["CLIENT", "LIST", "NOW"], "ERR syntax error (usage: CLIENT LIST [TYPE normal|pubsub] [ID id ...])"),
            ] {
                #expect(try asking.command(request) == .error(error), "\(request)")
            }
            #expect(try asking.command(["MULTI"]) == .simple("OK"))
            if case .error = try asking.command(["CLIENT", "LIST"]) {} else { Issue.record("CLIENT LIST queued in MULTI") }
            #expect(try asking.command(["DISCARD"]) == .simple("OK"))

            #expect(try named.command(["QUIT"]) == .simple("OK"))
            var ids: [String?] = []
            for _ in 0..<500 {
                ids = try Self.lines(try asking.command(["CLIENT", "LIST"])).map { $0["id"] }
                if ids.count == 3 { break }
                usleep(10_000)
            }
            #expect(ids == [String(followerID), String(askingID), silentID], "the connection that quit is gone")
            withExtendedLifetime(silent) {}
        }
    }

    @Test("CLIENT KILL ID closes a lock holder's connection at once, which releases its lock (a follower sees it go); filters must all match; SKIPME no closes the asking connection after the reply")
    func killReleasesWhatTheConnectionHeld() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let holder = try RawConnection(path: server.socketPath)
            #expect(try holder.command(["PUT", "locks", "job-42", "holder", "IFVERSION", "0", "EPHEMERAL"]) == .integer(1))
            let holderID = try Self.id(of: holder)
            let watcher = try RawConnection(path: server.socketPath)
            try watcher.send("CHANGES locks\r\n")
            _ = try watcher.reply()
            let admin = try RawConnection(path: server.socketPath)
            let adminID = try Self.id(of: admin)

            // Every filter must match: the holder does not follow changes.
            #expect(try admin.command(["CLIENT", "KILL", "ID", String(holderID), "TYPE", "pubsub"]) == .integer(0))
            #expect(try admin.command(["CLIENT", "KILL", "ID", "99999"]) == .integer(0))
            #expect(try admin.command(["CLIENT", "KILL", "ID", String(adminID)]) == .integer(0), "SKIPME yes by default")
            #expect(try admin.command(["CLIENT", "KILL", "ID", String(holderID)]) == .integer(1))
            #expect(try !Self.lines(try admin.command(["CLIENT", "LIST"])).contains { $0["id"] == String(holderID) },
                    "not listed from the reply on")
            #expect(holder.isClosedByServer(), "the holder's connection is closed")
            // Its ephemeral key goes as when its process dies: a logged delete the follower sees.
            var message = try watcher.reply()
            while case .array(let parts) = message, parts.first == .bulk("synced") { message = try watcher.reply() }
            guard case .array(let change) = message, change.count == 4 else { throw TestFailure("no change for the release: \(message)") }
            #expect(change[0] == .bulk("change") && change[3] == .array([.bulk("job-42"), .null]), "\(change)")
            #expect(try admin.command(["GET", "locks", "job-42"]) == .null)

            for (request, error) in [
                (["CLIENT", "KILL", "127.0.0.1:6379"], "ERR CLIENT KILL addr:port cannot name one connection here (every client's address is the socket's path): use CLIENT KILL ID id (CLIENT LIST shows the ids)"),
                (["CLIENT", "KILL", "ID"], "ERR syntax error (usage: CLIENT KILL [ID id] [TYPE normal|pubsub] [USER name] [MAXAGE seconds] [SKIPME yes|no])"),
                (["CLIENT", "KILL", "ID", "x"], "ERR Invalid client ID"),
                (["CLIENT", "KILL", "TYPE", "bogus"], "ERR Unknown client type 'bogus'"),
                (["CLIENT", "KILL", "SKIPME", "maybe"], "ERR syntax error (SKIPME takes yes or no)"),
                (["CLIENT", "KILL", "MAXAGE", "0"], "ERR syntax error (MAXAGE takes a whole number of seconds, 1 or more)"),
                (["CLIENT", "KILL", "MAXAGE", "x"], "ERR syntax error (MAXAGE takes a whole number of seconds, 1 or more)"),
                (["CLIENT", "KILL", "NAME", "x"], "ERR syntax error (usage: CLIENT KILL [ID id] [TYPE normal|pubsub] [USER name] [MAXAGE seconds] [SKIPME yes|no])"),
            ] {
                #expect(try admin.command(request) == .error(error), "\(request)")
            }
            // TYPE pubsub: the follower.
            #expect(try admin.command(["CLIENT", "KILL", "TYPE", "pubsub"]) == .integer(1))
            #expect(watcher.isClosedByServer())
            // The asking connection, when named and not skipped: the reply, then the close.
            #expect(try admin.command(["CLIENT", "KILL", "ID", String(adminID), "SKIPME", "no"]) == .integer(1))
            #expect(admin.isClosedByServer())
            let after = try RawConnection(path: server.socketPath)
            #expect(try after.command(["PING"]) == .simple("PONG"), "the server goes on")
        }
    }

    @Test("CLIENT KILL MAXAGE closes the connections older than that many seconds (their age in CLIENT LIST), with the other filters; a younger one stays")
    func killByAge() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let old = try RawConnection(path: server.socketPath)
            let oldID = try Self.id(of: old)
            Thread.sleep(forTimeInterval: 3.2)
            let young = try RawConnection(path: server.socketPath)
            let admin = try RawConnection(path: server.socketPath)
            // 3 s old at least, against the young ones' moments: a younger one would need the
            // host to stall for 2 s between its connect and this command.
            #expect(try admin.command(["CLIENT", "KILL", "MAXAGE", "2", "ID", "99999"]) == .integer(0), "every filter must match")
            #expect(try admin.command(["CLIENT", "KILL", "MAXAGE", "2"]) == .integer(1))
            #expect(old.isClosedByServer())
            #expect(try young.command(["PING"]) == .simple("PONG"), "younger than 2 s: kept")
            #expect(try !Self.lines(try admin.command(["CLIENT", "LIST"])).contains { $0["id"] == String(oldID) })
        }
    }
}
