@testable import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// Why the tests against a server with `--acl` may not run: the server's own uid has every
/// right, so the server must run as another user (``ServerUser/nobody``) for this process to
/// be refused anything, and only root can start it so.
let permissionTestsNeed = "needs root and /usr/bin/setpriv: the server runs as uid 65534 so that this process lacks rights"

/// Runs `body` with an `actorkvd` running as ``ServerUser/nobody`` with `--acl` (the file
/// `<directory>/acl.conf`, holding `rules`) and a client of it, which is this process, uid 0:
/// an ordinary client of that server. Stops the server afterwards, also on failure.
func withNobodyServer(rules: String, arguments: [String] = [], clientTimeout: Duration? = ActorKVClient.defaultTimeout,
                      _ body: (ServerProcess, ActorKVClient, _ aclPath: String) async throws -> Void) async throws {
    let directory = TemporaryDirectory("acl")
    let aclPath = directory.path + "/acl.conf"
    try writeRules(rules, to: aclPath)
    let server = try await ServerProcess.started(directory: directory, arguments: ["--socket-mode", "666", "--acl", aclPath] + arguments,
                                                 user: .nobody)
    try await serving(server, with: ActorKVClient(socketPath: server.socketPath, timeout: clientTimeout)) { server, client in
        try await body(server, client, aclPath)
    }
}

/// Writes an ACL file readable by the server's user (replacing it whole, as an editor would).
func writeRules(_ rules: String, to path: String) throws {
    try rules.write(toFile: path, atomically: true, encoding: .utf8)
    guard chmod(path, 0o644) == 0 else { throw TestFailure("chmod \(path): \(String(cString: strerror(errno)))") }
}

/// Rewrites the ACL file and has the server read it again (SIGHUP); returns once the server's
/// log says it did (the reload is asynchronous).
func reloadRules(_ rules: String, at path: String, of server: ServerProcess) async throws {
    let before = server.log.components(separatedBy: "reloaded").count
    try writeRules(rules, to: path)
    kill(server.pid, SIGHUP)
    for _ in 0..<3000 {
        if server.log.components(separatedBy: "reloaded").count > before { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw TestFailure("the server did not log a reload within 30 s of SIGHUP:\n\(server.log)")
}

/// What `body` returned or threw.
func outcome<T: Sendable>(_ body: () async throws(ActorKVError) -> T) async -> Result<T, ActorKVError> {
    do throws(ActorKVError) {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

extension Result {
    /// The error, or nil for a success.
    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// How a follow of a change stream ended: the events it delivered, and the error, if any.
struct FollowEnd: Sendable {
    var events: [ChangeEvent]
    var error: ActorKVError?
}

/// Follows `stream` to its end.
func follow(_ stream: ChangeStream, onEvent: @escaping @Sendable (ChangeEvent) -> Void = { _ in }) async -> FollowEnd {
    var events: [ChangeEvent] = []
    do throws(ActorKVError) {
        for try await event in stream {
            events.append(event)
            onEvent(event)
        }
        return FollowEnd(events: events, error: nil)
    } catch {
        return FollowEnd(events: events, error: error)
    }
}

@Suite("ActorKVClient against a server with --acl (NOPERM)", .enabled(if: ServerUser.canRunServers, "\(permissionTestsNeed)"))
struct PermissionClientTests {
    static let rules = """
        # uid 0 is this test process; the server runs as 65534
        uid:0  readable  read
        uid:0  writable  read write

        """

    /// The connection's id on the server: the same before and after means no reconnection.
    func connectionID(_ kv: ActorKVClient) async throws -> Int64 {
        guard case .integer(let id) = try await kv.send(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID: not an integer") }
        return id
    }

    @Test("a command without its right throws server(NOPERM) with isPermissionDenied; nothing applied; the same connection goes on")
    func commandDenied() async throws {
        try await withNobodyServer(rules: Self.rules) { _, kv, _ in
            // The connection's first reply: a command's NOPERM, not a refusal of the connection.
            let write = await expectActorKVError { try await kv.put("readable", "k", "v") }
            let connection = try #require(kv.connector.current)
            #expect(connection.isUsable)
            try await kv.put("writable", "k", "v")
            let id = try await connectionID(kv)
            #expect(write == .server(code: "NOPERM", message: "no write permission on namespace 'readable' for uid 0"))
            #expect(write?.isPermissionDenied == true)
            #expect(write?.isConnectionError == false)
            #expect(write?.wireCode == .noPerm)
            #expect(write?.description == "NOPERM no write permission on namespace 'readable' for uid 0")
            #expect(try await kv.get("readable", "k") == nil, "nothing applied")

            let read = await expectActorKVError { _ = try await kv.get("other", "k") }
            #expect(read == .server(code: "NOPERM", message: "no read permission on namespace 'other' for uid 0"))
            #expect(read?.isPermissionDenied == true)

            let admin = await expectActorKVError { try await kv.compact("writable") }
            #expect(admin == .server(code: "NOPERM", message: "no admin permission on namespace 'writable' for uid 0"))

            let load = await expectActorKVError { _ = try await kv.send(["ACL", "LOAD"]) }
            #expect(load == .server(code: "NOPERM", message: "only the server's own uid 65534 may run ACL LOAD; this connection is uid 0"))
            #expect(load?.isPermissionDenied == true)

            // Other errors are not permission errors.
            let badNS = await expectActorKVError { _ = try await kv.get("a/b", "k") }
            #expect(badNS?.serverCode == "BADNS" && badNS?.isPermissionDenied == false)

            #expect(try await kv.getString("writable", "k") == "v")
            #expect(try await connectionID(kv) == id, "every call above went over the first connection")
            #expect(kv.connector.current === connection)
        }
    }

    @Test("pipelined calls: the denied one throws NOPERM, those around it get their replies on the same connection")
    func pipelinedDenial() async throws {
        try await withNobodyServer(rules: Self.rules) { _, kv, _ in
            let id = try await connectionID(kv)
            for round in 0..<20 {
                try await kv.put("writable", "a", "\(round)")
                // In flight together on the one connection, in no particular order.
                let denied = Task { await outcome { () async throws(ActorKVError) in try await kv.put("readable", "a", "\(round)") } }
                let read = Task { await outcome { () async throws(ActorKVError) in try await kv.getString("writable", "a") } }
                let deniedRead = Task { await outcome { () async throws(ActorKVError) in try await kv.count("other") } }
                let write = Task { await outcome { () async throws(ActorKVError) in try await kv.put("writable", "b", "\(round)") } }
                let (refusedWrite, refusedRead) = (await denied.value, await deniedRead.value)
                #expect(refusedWrite.failure?.isPermissionDenied == true, "\(refusedWrite)")
                #expect(refusedRead.failure?.isPermissionDenied == true, "\(refusedRead)")
                #expect(try await read.value.get() == "\(round)")
                try await write.value.get()
            }
            #expect(try await kv.getString("writable", "b") == "19")
            #expect(try await connectionID(kv) == id)
        }
    }

    @Test("changes of a namespace without the read right end with NOPERM at once, not reconnecting; so does a mirror")
    func changesDenied() async throws {
        try await withNobodyServer(rules: Self.rules) { _, kv, _ in
            for start in [ChangeStart.now, .snapshot, .after(0)] {
                let end = try await withDeadline("the follow of 'other' from \(start)") { await follow(kv.changes("other", from: start)) }
                #expect(end.events.isEmpty)
                #expect(end.error == .server(code: "NOPERM", message: "no read permission on namespace 'other' for uid 0"))
            }
            let mirrorError = try await withDeadline("the mirror of 'other'") { () async -> ActorKVError? in
                do throws(ActorKVError) {
                    _ = try await kv.mirror("other")
                    return nil
                } catch {
                    return error
                }
            }
            #expect(mirrorError?.isPermissionDenied == true, "\(String(describing: mirrorError))")
        }
    }

    @Test("a stream whose read right a reload withdraws ends with NOPERM after the changes before it, not reconnecting")
    func changesCutOffByReload() async throws {
        try await withNobodyServer(rules: Self.rules + "uid:0 feed read write\n") { server, kv, aclPath in
            let (events, sink) = AsyncStream<ChangeEvent>.makeStream()
            let follower = Task { await follow(kv.changes("feed")) { sink.yield($0) } }
            let synced = try await withDeadline("the stream's synced") { () async -> Bool in
                for await event in events { if case .synced = event { return true } }
                return false
            }
            #expect(synced)
            try await kv.put("feed", "k", "1")
            try await reloadRules(Self.rules, at: aclPath, of: server)
            let end = try await withDeadline("the end of the stream cut off") {
                await withTaskCancellationHandler { await follower.value } onCancel: { follower.cancel() }
            }
            sink.finish()
            #expect(end.error == .server(code: "NOPERM", message: "no read permission on namespace 'feed' for uid 0"),
                    "\(String(describing: end.error))")
            #expect(end.events.contains { if case .change(let c) = $0 { c.keys.map(\.key) == ["k".bytes] } else { false } },
                    "the change written before the reload came first: \(end.events)")
            // The commands of the other connection are judged by the new rules; it stays usable.
            let read = await expectActorKVError { _ = try await kv.get("feed", "k") }
            #expect(read?.isPermissionDenied == true)
            #expect(try await kv.getString("writable", "k") == nil)
        }
    }

    @Test("withLock on a namespace without the write right throws NOPERM at once, without running the body")
    func lockDenied() async throws {
        try await withNobodyServer(rules: Self.rules) { _, kv, _ in
            let error = try await withDeadline("withLock") { () async -> ActorKVError? in
                do {
                    try await kv.withLock("readable", "job", timeout: nil) { (_: UInt64) async throws -> Void in Issue.record("the body ran") }
                    return nil
                } catch {
                    return error as? ActorKVError
                }
            }
            #expect(error == .server(code: "NOPERM", message: "no write permission on namespace 'readable' for uid 0"))
        }
    }

    @Test("a lock waiter without the read right (to follow the holder) throws NOPERM instead of waiting for ever")
    func lockWaiterDenied() async throws {
        // A client timeout longer than the test's bound: a stream reconnecting until it gives up would fail the test.
        try await withNobodyServer(rules: Self.rules + "uid:0 writeonly write\n", clientTimeout: .seconds(120)) { _, kv, _ in
            let held = try await kv.acquireLock("writeonly", "job", timeout: .zero)
            let error = try await withDeadline("the waiter") { () async -> ActorKVError? in
                do throws(ActorKVError) {
                    _ = try await kv.acquireLock("writeonly", "job", timeout: nil)
                    return nil
                } catch {
                    return error
                }
            }
            #expect(error == .server(code: "NOPERM", message: "no read permission on namespace 'writeonly' for uid 0"))
            try await held.release()
        }
    }

    @Test("a connection refused on accept (--allow-uid) is refused(NOPERM), a connection error, not isPermissionDenied")
    func refusedOnAccept() async throws {
        try await withNobodyServer(rules: Self.rules, arguments: ["--allow-uid", "4242"]) { server, kv, _ in
            let error = await expectActorKVError { _ = try await kv.ping() }
            #expect(error == .refused(path: server.socketPath, code: "NOPERM", message: "connection refused: uid 0 gid 0 is not allowed to connect"))
            #expect(error?.isConnectionError == true && error?.isPermissionDenied == false)
            let end = try await withDeadline("the follow refused on accept") { await follow(kv.changes("readable")) }
            #expect(end.error == error)
        }
    }
}

@Suite("FollowState: NOPERM")
struct FollowStatePermissionTests {
    @Test("NOPERM ends the follow (before the header, and while following; a mirror too): a right withdrawn is not waited out")
    func nopermFails() {
        let denied = ActorKVError.server(code: "NOPERM", message: "no read permission on namespace 'ns' for uid 33")
        for resnapshots in [false, true] {
            var refused = FollowState(namespace: "ns", prefix: [], start: .now, resnapshots: resnapshots)
            #expect(refused.handle(.error("NOPERM no read permission on namespace 'ns' for uid 33")) == .fail(denied))
            var following = FollowState(namespace: "ns", prefix: [], start: .after(2), resnapshots: resnapshots)
            #expect(following.handle(.array([.bulk("changes".bytes), .bulk("ns".bytes), .integer(2)])) == .deliver([]))
            #expect(following.handle(.error("NOPERM no read permission on namespace 'ns' for uid 33")) == .fail(denied))
        }
    }
}

/// The reloads of the `--acl` file, by SIGHUP and by `ACL LOAD`, against a server run as this
/// process's own user (so that this process may send `ACL LOAD`).
@Suite("Server: ACL file reloads are logged")
struct AccessReloadLogTests {
    @Test("ACL LOAD logs as SIGHUP does: who asked, and the rule count or the mistake with the rules kept in force")
    func reloadsLogged() async throws {
        let directory = TemporaryDirectory("acl-log")
        let aclPath = directory.path + "/acl.conf"
        try writeRules("uid:2001  jobs  read\n", to: aclPath)
        try await withServer(arguments: ["--acl", aclPath]) { server, kv in
            func logged(_ line: String) async throws {
                try await eventually("the server logs '\(line)'") { server.log.contains(line) }
            }
            let uid = getuid()
            try writeRules("uid:2001  jobs  read\nuid:2002  jobs  read write\n", to: aclPath)
            #expect(try await kv.send(["ACL", "LOAD"]) == .simple("OK"))
            try await logged("reloaded \(aclPath) on ACL LOAD from uid \(uid): 2 rules")

            try writeRules("uid:2001  jobs  wrte\n", to: aclPath)
            let mistake = "\(aclPath):1: unknown right 'wrte' (expected read, write or admin)"
            let refused = await outcome { () async throws(ActorKVError) in try await kv.send(["ACL", "LOAD"]) }
            #expect(refused.failure == .server(code: "ERR", message: mistake))
            try await logged("ACL LOAD from uid \(uid): \(mistake); keeping the rules in force")

            kill(server.pid, SIGHUP)
            try await logged("SIGHUP: \(mistake); keeping the rules in force")
            try writeRules("*  jobs  read\n", to: aclPath)
            kill(server.pid, SIGHUP)
            try await logged("reloaded \(aclPath) on SIGHUP: 1 rules")
        }
    }
}
