import ActorKVClient
import ActorKVTestSupport
import Foundation
import Testing

/// `actorkv clients` and `actorkv kill-client ID` (CLIENT LIST, CLIENT KILL ID) and the Swift
/// client's ``ActorKVClient/clientList()``, ``ActorKVClient/clients()`` and
/// ``ActorKVClient/killClient(_:)``.
@Suite("Connections from the command line")
struct CLIClientsTests {
    @Test("actorkv clients lists the lock holder's connection; kill-client closes it, which releases its lock; a missing id is exit 1, a bad one exit 2")
    func killReleasesALock() async throws {
        try await withServer { server, kv in
            let holder = ActorKVClient(socketPath: server.socketPath)
            defer { Task { await holder.close() } }
            #expect(try await holder.send(["PUT", "locks", "job-7", "me", "IFVERSION", "0", "EPHEMERAL"]) != .null)
            guard case .integer(let id) = try await holder.send(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID") }
            let listed = try await runCLI(["clients"], socket: server.socketPath)
            #expect(listed.status == 0 && listed.text.split(separator: "\n").contains { $0.hasPrefix("id=\(id) ") }, "\(listed.text)")
            #expect(try await kv.clientList().split(separator: "\n").contains { $0.hasPrefix("id=\(id) ") && $0.contains(" flags=U ") })
            let holderEntry = try await kv.clients().first { $0.id == UInt64(id) }
            #expect(holderEntry?.command == "client|id" && holderEntry?.followsChanges == false, "\(String(describing: holderEntry))")
            #expect(holderEntry?.uid == getuid() && holderEntry?.pid == getpid())

            let killed = try await runCLI(["kill-client", String(id)], socket: server.socketPath)
            #expect(killed.status == 0 && killed.text == "1\n", "\(killed.status) \(killed.text) \(killed.stderr)")
            var left: String? = "me"
            for _ in 0..<300 {
                left = try await kv.getString("locks", "job-7")
                if left == nil { break }
                try await Task.sleep(nanoseconds: 10_000_000)
            }
            #expect(left == nil, "the killed holder's lock is released")
            #expect(try await kv.killClient(UInt64(id)) == false, "gone already")
            let missing = try await runCLI(["kill-client", String(id)], socket: server.socketPath)
            #expect(missing.status == 1 && missing.text == "0\n")
            let bad = try await runCLI(["kill-client", "x"], socket: server.socketPath)
            #expect(bad.status == 2 && bad.stderr.contains("usage: actorkv kill-client ID"), "\(bad.stderr)")
        }
    }

    @Test("ConnectedClient reads CLIENT LIST's lines: ids, names, ages, idle times, last commands, followers and peers; NULL, empty and ? fields are nil; a line without an id is left out")
    func readsLines() {
        let text = "id=7 addr=/s.sock:0 laddr=/s.sock:0 fd=-1 name=worker age=12 idle=9 flags=U db=0 multi=-1 cmd=hset user=alice resp=3 uid=1000 gid=100 pid=4242\n"
            + "id=8 addr=unix:0 name= age=3 idle=3 flags=UP cmd=NULL uid=? gid=? pid=?\n"
            + "garbage line\n"
        let clients = ConnectedClient.list(text)
        #expect(clients.map(\.id) == [7, 8])
        #expect(clients.map(\.name) == ["worker", nil])
        #expect(clients.map(\.age) == [12, 3])
        #expect(clients.map(\.idle) == [9, 3])
        #expect(clients.map(\.command) == ["hset", nil])
        #expect(clients.map(\.followsChanges) == [false, true])
        #expect(clients.map(\.uid) == [1000, nil] && clients.map(\.gid) == [100, nil] && clients.map(\.pid) == [4242, nil])
        #expect(clients.first?.fields["user"] == "alice" && clients.first?.fields["resp"] == "3")
    }
}
