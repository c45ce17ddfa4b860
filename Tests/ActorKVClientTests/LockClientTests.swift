@testable import ActorKVClient
import ActorKVTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// Locks through the Swift client (`withLock`, `acquireLock`) against a real `actorkvd`:
/// mutual exclusion with fencing tokens, release on return, on throw and on a dead holder's
/// connection, waiting on the change stream, the timeout, a lock's ttl, and a server restart.
@Suite("Client: locks")
struct LockClientTests {
    @Test("withLock: 6 tasks x 10 rounds of a read-modify-write under one lock: no overlap, no lost update, tokens increase")
    func mutualExclusion() async throws {
        try await withServer { server, kv in
            let tasks = 6, rounds = 10
            let inside = Shared((now: 0, most: 0))
            let tokens = Shared<[UInt64]>([])
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<tasks {
                    group.addTask {
                        let client = ActorKVClient(socketPath: server.socketPath)
                        for _ in 0..<rounds {
                            try await client.withLock("locks", "counter", timeout: .seconds(60)) { token in
                                inside.withLock { $0.now += 1; $0.most = max($0.most, $0.now) }
                                defer { inside.withLock { $0.now -= 1 } }
                                tokens.withLock { $0.append(token) }
                                // A read-modify-write that another task would interleave with
                                // (losing updates) if the lock let two in at once.
                                let n = Int(try await client.getString("data", "count") ?? "0") ?? -1000
                                try await Task.sleep(for: .milliseconds(1))
                                try await client.put("data", "count", String(n + 1))
                            }
                        }
                        await client.close()
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await kv.getString("data", "count") == String(tasks * rounds))
            #expect(inside.withLock { $0.most } == 1, "never two holders at once")
            let order = tokens.withLock { $0 }
            #expect(order.count == tasks * rounds)
            #expect(zip(order, order.dropFirst()).allSatisfy { $0 < $1 }, "each holder's token is larger than the one before: \(order)")
            #expect(try await kv.getVersioned("locks", "counter") == nil, "released: the key is gone")
        }
    }

    @Test("while held, the key holds host:pid at the token's version; released on return and on throw; the body's result comes back")
    func releaseOnReturnAndThrow() async throws {
        struct Boom: Error {}
        try await withServer { _, kv in
            let token = try await kv.withLock("locks", "job", timeout: .seconds(10)) { token in
                let held = try #require(try await kv.getVersioned("locks", "job"))
                #expect(held.version == token, "the token is the key's version")
                #expect(String(decoding: held.value, as: UTF8.self).hasSuffix(":\(getpid())"), "host:pid")
                return token
            }
            #expect(try await kv.getVersioned("locks", "job") == nil)

            await #expect(throws: Boom.self) {
                try await kv.withLock("locks", "job", timeout: .seconds(10)) { _ in
                    #expect(try await kv.exists("locks", "job"))
                    throw Boom()
                }
            }
            #expect(try await kv.getVersioned("locks", "job") == nil, "released after the throw")
            // Free at once: one attempt is enough.
            let next = try await kv.withLock("locks", "job", timeout: .zero) { $0 }
            #expect(next > token)

            // acquireLock / release, and a HeldLock that is let go without release.
            var held: HeldLock? = try await kv.acquireLock("locks", "manual", timeout: .zero)
            #expect(try await kv.getVersioned("locks", "manual")?.version == held?.token)
            held = nil
            try await eventually("a HeldLock let go closes its connection, which releases the lock") {
                try await kv.get("locks", "manual") == nil
            }
        }
    }

    @Test("a waiter follows the changes (no polling) and acquires, with a larger token, when the holder's connection dies")
    func waiterAfterHolderDies() async throws {
        try await withServer { server, kv in
            // The holder: a bare connection, as another process holds the lock; closing it is
            // what the kernel does when that process dies.
            let holder = try await onOwnThread { try RawConnection(server.socketPath) }
            let reply = try await onOwnThread {
                try holder.request(["PUT", "locks", "k", "elsewhere:1", "IFVERSION", "0", "EPHEMERAL"])
            }
            guard reply.hasPrefix(":"), let held = UInt64(reply.dropFirst()) else { throw TestFailure("acquire: \(reply)") }
            await #expect(throws: ActorKVError.lockTimedOut(namespace: "locks", key: "k".bytes, timeout: .zero)) {
                try await kv.withLock("locks", "k", timeout: .zero) { _ in }
            }
            let waiter = Task { try await kv.withLock("locks", "k", timeout: .seconds(60)) { $0 } }
            // It waits on a change stream of the namespace, not by asking again and again.
            try await eventually("the waiter follows the namespace's changes") { try await followerCount(kv, "locks") == 1 }
            let processed = try await commandsProcessed(kv)
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await commandsProcessed(kv) - processed <= 2, "no requests while waiting, but this test's INFO")
            holder.close()
            let token = try await withDeadline("the waiter acquires") { try await waiter.value }
            #expect(token > held)
            #expect(try await kv.getVersioned("locks", "k") == nil)
            try await eventually("the waiter's change stream is closed") { try await followerCount(kv, "locks") == 0 }
        }
    }

    @Test("timeout: lockTimedOut after the timeout, the body not run; zero is one attempt; then free once released")
    func timeout() async throws {
        try await withServer { _, kv in
            let held = try await kv.acquireLock("locks", "busy", timeout: .zero)
            let ran = Shared(false)
            let start = ContinuousClock.now
            do {
                try await kv.withLock("locks", "busy", timeout: .milliseconds(300)) { _ in ran.withLock { $0 = true } }
                Issue.record("acquired a held lock")
            } catch let error as ActorKVError {
                #expect(error == .lockTimedOut(namespace: "locks", key: "busy".bytes, timeout: .milliseconds(300)))
                #expect(error.description == "lock not acquired: key 'busy' in namespace 'locks' was held by another holder for the whole 0.3 s")
            }
            #expect(ContinuousClock.now - start >= .milliseconds(300), "it waited the whole timeout")
            #expect(!ran.withLock { $0 })
            await #expect(throws: ActorKVError.lockTimedOut(namespace: "locks", key: "busy".bytes, timeout: .zero)) {
                _ = try await kv.acquireLock("locks", "busy", timeout: .zero)
            }
            try await held.release()
            try await held.release()  // only the first call does anything
            #expect(try await kv.withLock("locks", "busy", timeout: .zero) { $0 } > held.token)
        }
    }

    @Test("a lock's ttl: it expires while its holder runs; the waiter gets it; the first holder's withLock throws lockLost")
    func ttlExpires() async throws {
        try await withServer { _, kv in
            let second = Shared<UInt64?>(nil)
            let firstHolds = Shared(false)
            let first = Task {
                try await kv.withLock("locks", "ttl", timeout: .zero, ttl: .milliseconds(300)) { token in
                    firstHolds.withLock { $0 = true }
                    // Held past the ttl: until the waiter has the lock.
                    try await eventually("the waiter acquires after the ttl") { second.withLock { $0 } != nil }
                    return token
                }
            }
            try await eventually("the first holder holds the lock") { firstHolds.withLock { $0 } }
            let token = try await kv.withLock("locks", "ttl", timeout: .seconds(30)) { token in
                second.withLock { $0 = token }
                return token
            }
            // The ttl is on the key (a long one here, so that it cannot run out before pttl).
            let long = try await kv.acquireLock("locks", "long", timeout: .zero, ttl: .seconds(60))
            guard case .remaining(let left) = try await kv.pttl("locks", "long"), left <= .seconds(60) + ClusterTarget.deadlineSlack else {
                throw TestFailure("no ttl on a lock taken with one")
            }
            try await long.release()
            do {
                let value = try await first.value
                Issue.record("the first holder's withLock returned \(value)")
            } catch let error as ActorKVError {
                guard case .lockLost(let namespace, let key, let lost, let reason) = error else {
                    throw TestFailure("expected lockLost, got \(error)")
                }
                #expect(namespace == "locks" && key == "ttl".bytes && lost < token, "\(error)")
                #expect(reason.contains("expired"), "\(reason)")
            }
        }
    }

    @Test("a lock shared with a child (inheritableDescriptor): kept by the child when the HeldLock goes, free when the child dies; release() frees it at once")
    func sharedWithChild() async throws {
        try await withServer { server, kv in
            let other = ActorKVClient(socketPath: server.socketPath)
            /// Acquiring "daemon" on `other`, waiting up to `timeout`.
            func attempt(_ timeout: Duration) async -> Result<HeldLock, ActorKVError> {
                await outcome { () async throws(ActorKVError) in try await other.acquireLock("locks", "daemon", timeout: timeout) }
            }
            /// A child process (a daemon, say) that inherits the lock's connection from `lock`.
            func child(sharing lock: HeldLock) throws -> ChildProcess {
                let copy = lock.inheritableDescriptor()
                guard copy >= 0 else { throw TestFailure("dup: \(String(cString: strerror(errno)))") }
                defer { close(copy) }
                return try ChildProcess("/bin/sleep", ["600"], inheriting: [copy])
            }

            var held: HeldLock? = try await kv.acquireLock("locks", "daemon", timeout: .zero)
            let token = try #require(held?.token)
            let daemon = try child(sharing: try #require(held))
            held = nil  // closes this process's copy of the connection, not the child's
            guard case .failure(.lockTimedOut) = await attempt(.seconds(1)) else {
                throw TestFailure("the lock was free while the child had its connection open")
            }
            #expect(try await kv.getVersioned("locks", "daemon")?.version == token, "the key is still the lock's")
            daemon.signal(SIGKILL)
            daemon.waitForExit()
            // Free as soon as the child's copy, the last one, is closed: this process kept none.
            let next = try await attempt(.seconds(30)).get()
            #expect(next.token > token)

            // release() releases the lock for every process, as flock -u does, the child's copy
            // notwithstanding; the child goes on.
            let second = try child(sharing: next)
            try await next.release()
            #expect(try await kv.getVersioned("locks", "daemon") == nil)
            let third = try await attempt(.zero).get()
            #expect(third.token > next.token)
            #expect(second.isRunning)
            try await third.release()
        }
    }

    @Test("a server killed and restarted: the holder's release reports lockLost; a waiter reconnects and gets it, with a larger token")
    func serverRestart() async throws {
        try await withServer(fsync: "always") { server, kv in
            let held = try await kv.acquireLock("locks", "r", timeout: .zero)
            // Its change stream reconnects for as long as its client's timeout: a generous one.
            let patient = ActorKVClient(socketPath: server.socketPath, timeout: .seconds(60))
            let waiter = Task { try await patient.withLock("locks", "r", timeout: .seconds(60)) { $0 } }
            try await eventually("the waiter follows") { try await followerCount(kv, "locks") == 1 }
            try await server.signal(SIGKILL)
            try await server.restart()
            let next = try await withDeadline("the waiter acquires after the restart") { try await waiter.value }
            #expect(next > held.token)
            do throws(ActorKVError) {
                try await held.release()
                Issue.record("released a lock whose connection the server lost")
            } catch {
                guard case .lockLost(_, _, let token, let reason) = error else { throw TestFailure("expected lockLost, got \(error)") }
                #expect(token == held.token && reason.contains("connection"), "\(reason)")
            }
            #expect(try await kv.getVersioned("locks", "r") == nil)
            #expect(try await kv.withLock("locks", "r", timeout: .zero) { $0 } > next)
        }
    }

    @Test("a waiter whose lock timeout ends while the server is down throws the connection error, not lockTimedOut (the CLI's exit 4, not 7)")
    func timeoutWhileServerDown() async throws {
        try await withServer(fsync: "always") { server, kv in
            let held = try await kv.acquireLock("locks", "d", timeout: .zero)
            let quick = ActorKVClient(socketPath: server.socketPath, timeout: .milliseconds(500))
            let waiter = Task { try await quick.withLock("locks", "d", timeout: .seconds(2)) { $0 } }
            try await eventually("the waiter follows") { try await followerCount(kv, "locks") == 1 }
            try await server.signal(SIGKILL)
            withExtendedLifetime(held) {}  // held until the server went
            let outcome = await waiter.result
            guard case .failure(let error) = outcome else { throw TestFailure("acquired a lock with the server down: \(outcome)") }
            #expect((error as? ActorKVError)?.meansServerGone == true, "the server was unreachable at the end of the wait, not the lock held: \(error)")
            try await server.restart()
        }
    }

    @Test("a waiter waits through a server outage longer than its client's timeout, for as long as its lock timeout")
    func outageLongerThanClientTimeout() async throws {
        try await withServer(fsync: "always") { server, kv in
            let held = try await kv.acquireLock("locks", "o", timeout: .zero)
            // An agent answers through etcd, which under a loaded CI run (AddressSanitizer builds
            // beside it) took longer than 300 ms for the waiter's first calls: 1 s there.
            let clientTimeout: Duration = ClusterTarget.active ? .seconds(1) : .milliseconds(300)
            let quick = ActorKVClient(socketPath: server.socketPath, timeout: clientTimeout)
            let waiter = Task { try await quick.withLock("locks", "o", timeout: .seconds(60)) { $0 } }
            try await eventually("the waiter follows") { try await followerCount(kv, "locks") == 1 }
            try await server.signal(SIGKILL)
            withExtendedLifetime(held) {}  // held until the server went
            try await Task.sleep(for: clientTimeout * 7)  // out of reach for more than six client timeouts
            try await server.restart()
            let token = try await withDeadline("the waiter acquires after the restart") { try await waiter.value }
            #expect(token > 0)
            #expect(ActorKVClient.reconnectWindow(lockTimeout: nil, clientTimeout: .seconds(10)) == .seconds(60))
            #expect(ActorKVClient.reconnectWindow(lockTimeout: .seconds(1), clientTimeout: .seconds(10)) == .seconds(10))
            #expect(ActorKVClient.reconnectWindow(lockTimeout: .seconds(90), clientTimeout: nil) == nil)
        }
    }

    @Test("a waiter whose change stream comes back to compacted history (COMPACTED) follows anew and gets the lock",
          .localOnly("COMPACT compacts the whole etcd cluster's history, under the tests running beside it (protocol.md, Cluster mode)"))
    func waiterAfterCompaction() async throws {
        try await withServer(fsync: "always", arguments: ["--changes-history", "1"]) { server, kv in
            let held = try await kv.acquireLock("locks", "w", timeout: .zero)
            let patient = ActorKVClient(socketPath: server.socketPath, timeout: .seconds(60))
            let waiter = Task { try await patient.withLock("locks", "w", timeout: .seconds(60)) { $0 } }
            try await eventually("the waiter follows") { try await followerCount(kv, "locks") == 1 }
            try await server.signal(SIGKILL)
            // While the waiter's stream cannot reach it, another server on the same data writes
            // to the namespace and compacts it twice, keeping only the last change: the
            // stream's FROM is then older than anything held.
            let side = try await ServerProcess.started(arguments: ["--data-dir", server.dataPath, "--changes-history", "1"])
            let other = ActorKVClient(socketPath: side.socketPath)
            try await writeAndCompactTwice(other, "locks")
            let compacted = await expectActorKVError {
                var events = other.changes("locks", from: .after(1)).makeAsyncIterator()
                _ = try await events.next()
            }
            guard case .compacted = compacted else { throw TestFailure("the waiter's place is still held: \(String(describing: compacted))") }
            await other.close()
            try await side.signal(SIGTERM)
            try await server.restart()
            let token = try await withDeadline("the waiter acquires after COMPACTED") { try await waiter.value }
            #expect(token > held.token)
        }
    }

    @Test("a waiting task that is cancelled throws cancelled and stops following; the lock is not taken by it")
    func cancelledWaiter() async throws {
        try await withServer { _, kv in
            let held = try await kv.acquireLock("locks", "c", timeout: .zero)
            let waiter = Task { try await kv.withLock("locks", "c", timeout: nil) { $0 } }
            try await eventually("the waiter follows") { try await followerCount(kv, "locks") == 1 }
            waiter.cancel()
            await #expect(throws: ActorKVError.cancelled) { _ = try await waiter.value }
            #expect(!ActorKVError.cancelled.isConnectionError)
            try await eventually("its change stream is closed") { try await followerCount(kv, "locks") == 0 }
            try await held.release()
            #expect(try await kv.getVersioned("locks", "c") == nil)
        }
    }

    @Test("withLock's body runs in the caller's isolation: an actor's state is changed inside it")
    func actorIsolatedBody() async throws {
        actor Tally {
            var tokens: [UInt64] = []
            func add(_ kv: ActorKVClient) async throws {
                try await kv.withLock("locks", "tally", timeout: .seconds(10)) { token in
                    tokens.append(token)  // actor state, with no hop
                }
            }
        }
        try await withServer { _, kv in
            let tally = Tally()
            try await tally.add(kv)
            try await tally.add(kv)
            let tokens = await tally.tokens
            #expect(tokens.count == 2 && tokens[0] < tokens[1])
        }
    }
}

/// A value behind a lock that escaping closures can share.
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    init(_ value: Value) {
        mutex = Mutex(value)
    }

    func withLock<R: Sendable>(_ body: (inout Value) -> R) -> R {
        mutex.withLock { body(&$0) }
    }
}

/// `total_commands_processed` from INFO.
func commandsProcessed(_ kv: ActorKVClient) async throws -> Int {
    let info = try await kv.info()
    guard let line = info.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("total_commands_processed:") }),
          let n = Int(line.dropFirst("total_commands_processed:".count).trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw TestFailure("no total_commands_processed in INFO")
    }
    return n
}

/// A bare blocking connection for tests: inline requests, one reply line each. Use on a thread
/// of its own (`onOwnThread`).
final class RawConnection: Sendable {
    let fd: Int32

    init(_ path: String) throws {
        fd = connectUnixSocket(path)
        guard fd >= 0 else { throw TestFailure("connect \(path): \(String(cString: strerror(errno)))") }
    }

    /// Sends `arguments` as a multibulk request and returns the first line of the reply, without CRLF.
    func request(_ arguments: [String]) throws -> String {
        var bytes = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments { bytes += Array("$\(argument.utf8.count)\r\n\(argument)\r\n".utf8) }
        guard bytes.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count else {
            throw TestFailure("send failed")
        }
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while line.last != 0x0A {
            guard recv(fd, &byte, 1, 0) == 1 else { throw TestFailure("the server closed the connection") }
            line.append(byte)
        }
        return String(decoding: line.dropLast(2), as: UTF8.self)
    }

    func close() {
        _ = Glibc.close(fd)
    }
}
