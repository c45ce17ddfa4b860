import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing

/// `CLIENT LIST` on a real server: a line per open connection, as CLIENT INFO's, filtered by TYPE
/// and ID; a connection that ends is no longer listed.
@Suite struct ClientListTests {
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

    @Test("CLIENT LIST shows every open connection by id: its name, whether it follows changes (TYPE pubsub), its age and peer; the one asking runs client|list; a connection that ends goes")
    func listsOpenConnections() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let named = try RawConnection(path: server.socketPath)
            #expect(try named.command(["CLIENT", "SETNAME", "worker-1"]) == .simple("OK"))
            guard case .integer(let namedID) = try named.command(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
            let follower = try RawConnection(path: server.socketPath)
            guard case .integer(let followerID) = try follower.command(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
            try follower.send("CHANGES jobs\r\n")
            _ = try follower.reply()  // the subscription's confirmation
            let asking = try RawConnection(path: server.socketPath)
            guard case .integer(let askingID) = try asking.command(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
            usleep(1_100_000)  // so that the first two are a second old

            let all = try Self.lines(try asking.command(["CLIENT", "LIST"]))
            #expect(all.map { $0["id"] } == [namedID, followerID, askingID].map { String($0) }, "in id order: \(all)")
            #expect(all.map { $0["name"] } == ["worker-1", "", ""])
            #expect(all.map { $0["flags"] } == ["U", "UP", "U"])
            #expect(all.map { $0["cmd"] } == ["NULL", "NULL", "client|list"])
            #expect(all.allSatisfy { $0["pid"] == String(getpid()) && $0["uid"] == String(getuid()) })
            #expect(all.prefix(2).allSatisfy { Int($0["age"] ?? "") ?? 0 >= 1 }, "\(all.map { $0["age"] })")
            #expect(try Self.lines(try asking.command(["CLIENT", "LIST", "TYPE", "pubsub"])).map { $0["id"] } == [String(followerID)])
            #expect(try Self.lines(try asking.command(["client", "list", "type", "NORMAL"])).map { $0["id"] }
                    == [namedID, askingID].map { String($0) })
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
                if ids.count == 2 { break }
                usleep(10_000)
            }
            #expect(ids == [followerID, askingID].map { String($0) }, "the connection that quit is gone")
        }
    }
}
