import ActorKVProtocol
@testable import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// Namespace permissions inside the server: every command of the table judged by the right it
/// declares, rights resolved again after a reload, EXEC judged again, the listings filtered, the
/// server's own uid unrestricted. (Real peers under real uids over the socket: Tests/acl.)
@Suite("Namespace permissions: commands judged by their declared right")
struct NamespacePermissionTests {
    let directory = TemporaryDirectory("permissions")
    static let peer = PeerIdentity(uid: 2001, gid: 2001, groups: [3001])
    static let names = AccountNames(uidForUser: { _ in nil }, gidForGroup: { _ in nil }, userForUID: { _ in nil })

    /// An AccessControl over a file of `rules` (rewritten by ``write(_:)``) for a server of uid 0.
    func access(_ rules: String) throws -> AccessControl {
        try write(rules)
        return try AccessControl(path: directory.path + "/acl.conf", ownUID: 0, names: Self.names)
    }

    func write(_ rules: String) throws {
        try rules.write(toFile: directory.path + "/acl.conf", atomically: true, encoding: .utf8)
    }

    func request(_ words: [String]) -> Request { Request(words.map { Array($0.utf8) }) }

    /// The reply of `words` judged for ``peer``: nil when it may run, else the NOPERM message.
    func refusal(_ words: [String], _ rights: ConnectionRights) -> String? {
        guard case .refused(let error) = Command(parsing: request(words), rights: rights) else { return nil }
        return error.kind == .wire(.noPerm) ? error.message : "not NOPERM: \(error.message)"
    }

    @Test("an ACL file that others may write to, or that another user owns, is refused at load, and a reload then keeps the rules in force")
    func unsafeFileRefused() throws {
        let path = directory.path + "/acl.conf"
        let access = try access("uid:2001 ns read\n")
        try write("uid:2001 * read write admin\n")
        chmod(path, 0o666)
        #expect(throws: AccessRulesError(file: path, line: nil, message: "other users may write to it (mode 666), and whoever writes it grants every right; run chmod go-w on it")) {
            try access.reload(for: .signal)
        }
        #expect(access.rights(of: Self.peer, on: "other") == [], "the file's new rules are not in force")
        chmod(path, 0o620)
        #expect(throws: AccessRulesError.self) { try AccessControl(path: path, ownUID: 0, names: Self.names) }
        chmod(path, 0o644)
        #expect(try access.reload(for: .signal) == 1)
        #expect(access.rights(of: Self.peer, on: "other") == [.read, .write, .admin])
        // Owned by a user other than the server's and root (chown needs root: the CI runs as root).
        if geteuid() == 0 {
            chown(path, 4242, 4242)
            #expect(throws: AccessRulesError(file: path, line: nil, message: "it is owned by uid 4242, neither the server's uid 0 nor root, and its owner could grant every right; chown it")) {
                try AccessControl(path: path, ownUID: 0, names: Self.names)
            }
        }
        #expect(AccessRules.ownershipProblem(uid: 0, mode: 0o100600, serverUID: 1000) == nil, "root may own it")
        #expect(AccessRules.ownershipProblem(uid: 1000, mode: 0o100644, serverUID: 1000) == nil, "the server's user may own it")
        #expect(AccessRules.ownershipProblem(uid: 1000, mode: 0o100640, serverUID: 0) != nil, "another user may not")
        #expect(AccessRules.ownershipProblem(uid: 0, mode: 0o100602, serverUID: 0) != nil, "nor may others write it")
    }

    @Test("an ACL file in a directory every user may write to (not sticky) is refused at load and on reload, as the socket's directory is; the rules in force stay")
    func unsafeDirectoryRefused() throws {
        let path = directory.path + "/acl.conf"
        let access = try access("uid:2001 ns read\n")
        try write("uid:2001 * read write admin\n")
        let refusal = AccessRulesError(file: path, line: nil, message: "its directory \(directory.path) is writable by every user and not sticky: another user could replace the file, and so grant every right; use a private directory")
        chmod(directory.path, 0o777)
        defer { chmod(directory.path, 0o700) }
        #expect(throws: refusal) { try access.reload(for: .command(uid: 0)) }
        #expect(access.rights(of: Self.peer, on: "other") == [], "the rules in force stay")
        #expect(throws: refusal) { try AccessControl(path: path, ownUID: 0, names: Self.names) }
        // Sticky, as /tmp is: others cannot replace what they do not own.
        chmod(directory.path, 0o1777)
        #expect(try access.reload(for: .signal) == 1)
        #expect(access.rights(of: Self.peer, on: "other") == [.read, .write, .admin])
        chmod(directory.path, 0o755)
        #expect(try AccessControl(path: path, ownUID: 0, names: Self.names).ruleCount == 1)
    }

    @Test("an ACL file in a directory its group may write to (not sticky), or linked into one, is refused: a member of the group could replace it")
    func groupWritableDirectoryRefused() throws {
        let path = directory.path + "/acl.conf"
        try write("uid:2001 ns read\n")
        chmod(directory.path, 0o770)
        #expect(throws: AccessRulesError(file: path, line: nil, message: "its directory \(directory.path) is writable by its group (gid \(getegid())) and not sticky: a member of the group could replace the file, and so grant every right; run chmod g-w on it")) {
            try AccessControl(path: path, ownUID: 0, names: Self.names)
        }
        chmod(directory.path, 0o1770)
        #expect(try AccessControl(path: path, ownUID: 0, names: Self.names).ruleCount == 1, "sticky: others cannot replace what they do not own")
        chmod(directory.path, 0o700)
        // A link in a private directory to a file in a shared one: whoever may replace the file
        // there chooses the rules.
        let shared = directory.path + "/shared"
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        try "uid:2001 * read write admin\n".write(toFile: shared + "/acl.conf", atomically: true, encoding: .utf8)
        chmod(shared + "/acl.conf", 0o644)
        let link = directory.path + "/linked.conf"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: shared + "/acl.conf")
        chmod(shared, 0o775)
        #expect(throws: AccessRulesError(file: link, line: nil, message: "the directory it links into, \(shared) is writable by its group (gid \(getegid())) and not sticky: a member of the group could replace the file, and so grant every right; run chmod g-w on it")) {
            try AccessControl(path: link, ownUID: 0, names: Self.names)
        }
        chmod(shared, 0o755)
        #expect(try AccessControl(path: link, ownUID: 0, names: Self.names).ruleCount == 1, "a link into a private directory is fine")
    }

    @Test("actorkvd does not start with an --acl file in a directory every user may write to")
    func unsafeDirectoryStopsTheStart() async throws {
        let acl = TemporaryDirectory("acl-open")
        defer { acl.remove() }
        try "* ns read\n".write(toFile: acl.path + "/acl.conf", atomically: true, encoding: .utf8)
        chmod(acl.path + "/acl.conf", 0o644)
        chmod(acl.path, 0o777)
        let (status, stderr) = try await onOwnThread {
            let process = try ChildProcess(try ServerProcess.executable(),
                                           ["--socket", directory.path + "/s.sock", "--data-dir", directory.path + "/data",
                                            "--acl", acl.path + "/acl.conf"], stderr: .pipe)
            // A server that accepts the file serves, and is killed rather than waited for.
            DispatchQueue.global().asyncAfter(deadline: .now() + 30) { process.signal(SIGKILL) }
            let (_, err) = process.readOutputs()
            return (process.status, String(decoding: err, as: UTF8.self))
        }
        #expect(status == 1, "\(stderr)")
        #expect(stderr.contains("cannot start: --acl: \(acl.path)/acl.conf: its directory \(acl.path) is writable by every user and not sticky"), "\(stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/s.sock"))
    }

    @Test("every command of the table, on a namespace where the peer has no right, is refused with the right it declares, or runs if it needs none")
    func everyCommandJudged() throws {
        let rights = ConnectionRights(access: try access("uid:2001 other read write admin\n"), peer: Self.peer)
        for spec in CommandTable.all {
            let sample = try #require(CommandTableTests.samples[spec.name], "no sample for \(spec.name)")
            let refused = refusal(sample, rights)
            let needed = spec.flags.neededRight
            if spec.flags.contains(.serverOwner) {
                #expect(refused == "only the server's own uid 0 may run \(spec.name); this connection is uid 2001", "\(spec.name): \(refused ?? "ran")")
            } else if spec.flags.contains(.sourceThenTarget) {
                #expect(refused == "no read permission on namespace 'ns' for uid 2001", "\(spec.name) reads its source: \(refused ?? "ran")")
            } else if needed.isEmpty || spec.flags.isDisjoint(with: [.namespaced, .namespacedArguments]) {
                #expect(refused == nil, "\(spec.name) needs no right on a namespace here, yet: \(refused ?? "")")
            } else {
                // A refusal names the first right missing, read before write.
                let first = needed.contains(.read) ? "read" : needed.names
                #expect(refused == "no \(first) permission on namespace 'ns' for uid 2001", "\(spec.name): \(refused ?? "ran")")
            }
        }
        // With every right on `ns`, nothing in the table is refused but what only the server's uid may run.
        let full = ConnectionRights(access: try access("uid:2001 ns read write admin\nuid:2001 other read write\n"), peer: Self.peer)
        for spec in CommandTable.all where !spec.flags.contains(.serverOwner) {
            #expect(refusal(CommandTableTests.samples[spec.name]!, full) == nil, "\(spec.name)")
        }
        // COPY's target needs write, whatever its source allows.
        let readOnly = ConnectionRights(access: try access("uid:2001 ns read write\nuid:2001 other read\n"), peer: Self.peer)
        #expect(refusal(["COPY", "ns", "other"], readOnly) == "no write permission on namespace 'other' for uid 2001")
        #expect(refusal(["COPY", "other", "ns", "REPLACE"], readOnly) == nil)
    }

    @Test("write without read reads nothing: RENAME needs read and write on its source (write on its target), HGETDEL and HGETEX read and write; EXEC judges a queued one so again")
    func writeAloneReadsNothing() throws {
        let rights = ConnectionRights(access: try access("uid:2001 wonly write\nuid:2001 mine read write\nuid:2001 drop write\n"), peer: Self.peer)
        let noRead = "no read permission on namespace 'wonly' for uid 2001"
        // Renamed into a namespace it may read, its keys would be read there.
        #expect(refusal(["RENAME", "wonly", "mine"], rights) == noRead)
        #expect(refusal(["RENAMENX", "wonly", "mine"], rights) == noRead)
        #expect(refusal(["RENAME", "mine", "drop"], rights) == nil, "the target needs write alone: its keys are dropped, not read")
        #expect(refusal(["RENAME", "mine", "other"], rights) == "no write permission on namespace 'other' for uid 2001")
        let readOnly = ConnectionRights(access: try access("uid:2001 ro read\nuid:2001 mine read write\n"), peer: Self.peer)
        #expect(refusal(["RENAME", "ro", "mine"], readOnly) == "no write permission on namespace 'ro' for uid 2001", "RENAME empties its source")
        #expect(refusal(["HGETDEL", "wonly", "FIELDS", "1", "f"], rights) == noRead)
        #expect(refusal(["HGETEX", "wonly", "FIELDS", "1", "f"], rights) == noRead)
        #expect(refusal(["HGETEX", "wonly", "PERSIST", "FIELDS", "1", "f"], rights) == noRead)
        #expect(refusal(["HGETEX", "mine", "PX", "10", "FIELDS", "1", "f"], rights) == nil)
        #expect(refusal(["HDEL", "wonly", "f"], rights) == nil, "a write that replies counts only")
        // EXEC's judgement of what it queued: the same rights the commands declare.
        for (request, needed) in [(["HGETDEL", "ns", "FIELDS", "1", "f"], AccessRights([.read, .write])),
                                  (["HGETEX", "ns", "EX", "9", "FIELDS", "1", "f"], [.read, .write]),
                                  (["HGETEX", "ns", "FIELDS", "1", "f"], .read), (["HSET", "ns", "f", "v"], .write),
                                  (["HGET", "ns", "f"], .read), (["INCR", "ns", "k"], .write)] {
            guard case .data(_, let operation, _) = Command(parsing: Request(request.map { Array($0.utf8) })) else {
                Issue.record("\(request) does not parse as a data command")
                continue
            }
            #expect(operation.neededRight == needed, "\(request): \(operation.neededRight.names)")
        }
    }

    @Test("rights are the union of matching rules; write alone does not read; WATCH needs read and UNLINK write on every namespace; ACL LOAD, BACKUP, CLIENT LIST and CLIENT KILL are the owner's")
    func unionAndDetails() throws {
        let rights = ConnectionRights(access: try access("""
            gid:3001 jobs-* write
            *        jobs-a read
            uid:2001 ns     read
            """), peer: Self.peer)
        #expect(refusal(["PUT", "jobs-a", "k", "v"], rights) == nil)
        #expect(refusal(["GET", "jobs-a", "k"], rights) == nil)
        #expect(refusal(["GET", "jobs-b", "k"], rights) == "no read permission on namespace 'jobs-b' for uid 2001")
        #expect(refusal(["PUT", "jobs-b", "k", "v"], rights) == nil, "the supplementary group grants write")
        #expect(refusal(["WATCH", "ns", "jobs-a", "jobs-b"], rights) == "no read permission on namespace 'jobs-b' for uid 2001")
        #expect(refusal(["ACL", "LOAD"], rights) == "only the server's own uid 0 may run ACL LOAD; this connection is uid 2001")
        #expect(refusal(["ACL", "WHOAMI"], rights) == nil)
        #expect(refusal(["MEMORY", "HELP"], rights) == nil, "MEMORY HELP reads no namespace")
        #expect(refusal(["MEMORY", "USAGE", "jobs-b"], rights) == "no read permission on namespace 'jobs-b' for uid 2001", "MEMORY USAGE: judged on the namespace after its subcommand")
        #expect(refusal(["MEMORY", "USAGE", "jobs-a", "SAMPLES", "0"], rights) == nil)
        #expect(refusal(["CLIENT", "LIST"], rights) == "only the server's own uid 0 may run CLIENT LIST; this connection is uid 2001")
        #expect(refusal(["CLIENT", "ID"], rights) == nil)
        #expect(refusal(["CLIENT", "KILL", "ID", "7"], rights) == "only the server's own uid 0 may run CLIENT KILL; this connection is uid 2001")
        #expect(refusal(["backup", "/tmp/copy"], rights) == "only the server's own uid 0 may run BACKUP; this connection is uid 2001")
        #expect(refusal(["BACKUP", "/tmp/copy"], ConnectionRights(access: try access("uid:2001 * read write admin\n"), peer: Self.peer))
                == "only the server's own uid 0 may run BACKUP; this connection is uid 2001", "every right on every namespace is not the server's uid")
        #expect(refusal(["PUT", "ns", "k", "v", "EPHEMERAL"], rights) == "no write permission on namespace 'ns' for uid 2001")
        #expect(refusal(["COMPACT", "ns"], rights) == "no admin permission on namespace 'ns' for uid 2001")
        #expect(refusal(["UNLINK", "jobs-a", "jobs-b"], rights) == nil, "write on each")
        #expect(refusal(["UNLINK", "jobs-a", "ns"], rights) == "no write permission on namespace 'ns' for uid 2001")
        // A malformed request is refused for what it is, whatever the rights.
        #expect(refusal(["GET", "jobs-b"], rights)?.hasPrefix("not NOPERM") == true)
    }

    @Test("a reload is seen by the next request of a connection: rights cached per namespace are resolved again; a failed reload changes nothing")
    func reloadResolvesAgain() throws {
        let access = try access("uid:2001 ns read write\n")
        let rights = ConnectionRights(access: access, peer: Self.peer)
        // More namespaces than the cache holds, so that it starts over at least once.
        for i in 0..<(ConnectionRights.cacheLimit + 50) { #expect(refusal(["GET", "n\(i)", "k"], rights) != nil) }
        #expect(refusal(["PUT", "ns", "k", "v"], rights) == nil)
        try write("uid:2001 ns read\n")
        #expect(refusal(["PUT", "ns", "k", "v"], rights) == nil, "not in force before the reload")
        try access.reload(for: .signal)
        #expect(refusal(["PUT", "ns", "k", "v"], rights) == "no write permission on namespace 'ns' for uid 2001")
        #expect(refusal(["GET", "ns", "k"], rights) == nil)
        let generation = access.generation
        try write("uid:2001 ns read wrte\n")
        #expect(throws: AccessRulesError.self) { try access.reload(for: .signal) }
        #expect(access.generation == generation)
        #expect(refusal(["GET", "ns", "k"], rights) == nil, "the rules in force stay")
    }

    @Test("EXEC judges its queue again by the rules in force: withdrawn between MULTI and EXEC, nothing is applied")
    func execJudgedAgain() async throws {
        let access = try access("uid:2001 ns read write\n")
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store, access: access) { _ in [] }
        let session = ClientSession(id: 1, peer: PeerCredentials(uid: 2001, gid: 2001, pid: 1, groups: [3001]))
        let rights = ConnectionRights(access: access, peer: Self.peer)
        let parse = { (line: String) in Command(parsing: request(line.split(separator: " ").map(String.init)), rights: rights) }
        var replies = await processor.process(["MULTI", "PUT ns a 1", "GET ns a"].map(parse), session: session)
        #expect(replies == [.simple("OK"), .simple("QUEUED"), .simple("QUEUED")])
        try write("uid:2001 ns read\n")
        try access.reload(for: .signal)
        replies = await processor.process([parse("EXEC")], session: session)
        #expect(replies == [.error("NOPERM no write permission on namespace 'ns' for uid 2001")])
        let owner = ClientSession(id: 2, peer: PeerCredentials(uid: 0, gid: 0, pid: 1))
        #expect(await processor.process([Command(parsing: request(["GET", "ns", "a"]))], session: owner) == [.null], "nothing applied")
        // Allowed again: the same transaction runs.
        try write("uid:2001 ns read write\n")
        try access.reload(for: .signal)
        replies = await processor.process(["MULTI", "PUT ns a 1", "GET ns a", "EXEC"].map(parse), session: session)
        #expect(replies.last == .array([.simple("OK"), .bulk(Array("1".utf8))]))
        await store.close()
    }

    @Test("write without read learns what protocol.md says it does through its writes' replies: INCR k 0 and HINCRBY k 0 answer the value; HSETNX, DEL and PUT … IFVERSION 0 whether the key exists")
    func writeAloneLearnsThroughReplies() async throws {
        let access = try access("uid:2001 ns write\n")
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store, access: access) { _ in [] }
        let owner = ClientSession(id: 2, peer: PeerCredentials(uid: 0, gid: 0, pid: 1))
        #expect(await processor.process([Command(parsing: request(["PUT", "ns", "n", "41"]))], session: owner) == [.simple("OK")])
        let session = ClientSession(id: 1, peer: PeerCredentials(uid: 2001, gid: 2001, pid: 1, groups: [3001]))
        let rights = ConnectionRights(access: access, peer: Self.peer)
        let replies = await processor.process([
            ["GET", "ns", "n"], ["INCR", "ns", "n", "0"], ["HINCRBY", "ns", "n", "0"], ["HSETNX", "ns", "n", "x"],
            ["HSETNX", "ns", "m", "x"], ["PUT", "ns", "n", "y", "IFVERSION", "0"], ["DEL", "ns", "n", "absent"],
        ].map { Command(parsing: request($0), rights: rights) }, session: session)
        #expect(replies.first == .error("NOPERM no read permission on namespace 'ns' for uid 2001"))
        #expect(Array(replies.dropFirst()) == [.integer(41), .integer(41), .integer(0), .integer(1), .null, .integer(1)])
        await store.close()
        let spec = try ConfigurationDocsTests.document("protocol.md").split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(spec.contains("`write` without `read` does not hide what is stored: a write's reply tells its result"))
        #expect(spec.contains("`INCR ns k 0` and `HINCRBY ns k 0` answer the key's current integer"))
        #expect(spec.contains("`PUT … IFVERSION 0` (refused when the key exists)"))
    }

    @Test("NAMESPACES, INFO and the keyspace commands (KEYS, SCAN 0, DBSIZE) show only what the client may read; the server's own uid sees all and is never judged")
    func listingsFiltered() async throws {
        let access = try access("uid:2001 public read\nuid:2001 jobs-* write\n")
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store, access: access) { shows in
            Array(["public", "jobs-a", "secret"].filter(shows).joined(separator: ",").utf8)
        }
        let owner = ClientSession(id: 2, peer: PeerCredentials(uid: 0, gid: 0, pid: 1))
        for ns in ["public", "jobs-a", "secret"] {
            _ = await processor.process([Command(parsing: request(["PUT", ns, "k", "v"]))], session: owner)
        }
        let list = [Command(parsing: request(["NAMESPACES"])), Command(parsing: request(["INFO"]))]
        let peer = ClientSession(id: 1, peer: PeerCredentials(uid: 2001, gid: 2001, pid: 1))
        #expect(await processor.process(list, session: peer) == [.array([.bulk(Array("public".utf8))]), .bulk(Array("public".utf8))])
        #expect(await processor.process(list, session: owner) == [
            .array(["jobs-a", "public", "secret"].map { .bulk(Array($0.utf8)) }), .bulk(Array("public,jobs-a,secret".utf8)),
        ])
        #expect(access.rights(of: PeerIdentity(uid: 0, gid: 0, groups: []), on: "secret") == .all)
        // Redis's keyspace commands list the same: judged as reads of no namespace in particular
        // (not of a namespace named after SCAN's cursor), the listing filtered.
        let rights = ConnectionRights(access: access, peer: Self.peer)
        let keyspace = [["KEYS", "*"], ["SCAN", "0"], ["SCAN", "0", "MATCH", "*"], ["DBSIZE"], ["RANDOMKEY"]].map { Command(parsing: request($0), rights: rights) }
        let publicOnly = Reply.array([.bulk(Array("public".utf8))])
        #expect(await processor.process(keyspace, session: peer) == [
            publicOnly, .array([.bulk(Array("0".utf8)), publicOnly]), .array([.bulk(Array("0".utf8)), publicOnly]), .integer(1), .bulk(Array("public".utf8)),
        ])
        #expect(await processor.process([Command(parsing: request(["DBSIZE"]))], session: owner) == [.integer(3)])
        #expect(refusal(["TYPE", "secret"], rights) == "no read permission on namespace 'secret' for uid 2001")
        #expect(refusal(["EXISTS", "secret"], rights) == "no read permission on namespace 'secret' for uid 2001")
        #expect(refusal(["TYPE", "public"], rights) == nil && refusal(["SCAN", "0"], rights) == nil)
        await store.close()
    }
}
