import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing

/// The Swift client's versions, conditional writes and counters against a real server, and
/// RemoteRepository's read-modify-write that retries on conflict.
@Suite("Client: versions, conditional writes, counters")
struct VersionClientTests {
    @Test("getVersioned, put(ifVersion:), delete(ifVersion:), increment and guarded batches")
    func clientCalls() async throws {
        try await withServer { _, kv in
            #expect(try await kv.getVersioned("v", "k") == nil)
            let created = try #require(try await kv.put("v", "k", "1", ifVersion: 0))
            #expect(try await kv.put("v", "k", "again", ifVersion: 0) == nil)
            #expect(try await kv.getVersioned("v", "k") == VersionedValue(value: "1".bytes, version: created))
            let next = try #require(try await kv.put("v", "k", "2", ifVersion: created))
            #expect(next > created)
            #expect(try await kv.put("v", "k", "stale", ifVersion: created) == nil)
            #expect(try await kv.getString("v", "k") == "2")
            // README's read-modify-write: the bytes read, changed, written back under a String key.
            let read = try #require(try await kv.getVersioned("v", "k"))
            let appended = try #require(try await kv.put("v", "k", read.value + ",3".bytes, ifVersion: read.version))
            #expect(try await kv.put("v", "k", read.value, ifVersion: read.version) == nil, "the version moved: nothing written")
            #expect(try await kv.getVersioned("v", "k") == VersionedValue(value: "2,3".bytes, version: appended))
            #expect(try await kv.put("v", "k", "2".bytes, ifVersion: appended) != nil)

            #expect(try await kv.increment("v", "n") == 1)
            #expect(try await kv.increment("v", "n", by: -11) == -10)
            #expect(try await kv.getString("v", "n") == "-10")
            try await kv.put("v", "text", "abc")
            do {
                try await kv.increment("v", "text", by: 1)
                Issue.record("INCR of a non-integer succeeded")
            } catch {
                #expect(error as? ActorKVError == .server(code: "ERR", message: "value is not an integer"))
            }
            try await kv.put("v", "max", String(Int64.max))
            do {
                try await kv.increment("v", "max")
                Issue.record("INCR past Int64.max succeeded")
            } catch {
                #expect((error as? ActorKVError)?.wireCode == .err)
                #expect(error as? ActorKVError == .server(code: "ERR", message: "increment or decrement would overflow"))
            }

            let version = try #require(try await kv.getVersioned("v", "k")?.version)
            let results = try await kv.batch("v", [.ifVersion("k", version), .put("k", "3"), .increment("n", by: 5), .delete("gone")])
            #expect(results == [.held, .stored, .counted(-5), .deleted(false)])
            #expect(try await kv.batch("v", [.ifVersion("k", version), .put("k", "never")]) == nil)
            #expect(try await kv.getString("v", "k") == "3")

            #expect(try await kv.delete("v", "k", ifVersion: version) == false)
            let current = try #require(try await kv.getVersioned("v", "k")?.version)
            #expect(try await kv.delete("v", "k", ifVersion: current) == true)
            #expect(try await kv.get("v", "k") == nil)
            #expect(try await kv.ping() == "PONG", "the connection is still usable")
        }
    }

    /// The client does not check the range itself: the server's refusal is typed and names it.
    @Test("a version past Int64.max: the server refuses it with ERR naming the range, nothing written")
    func versionPastRange() async throws {
        try await withServer { _, kv in
            try await kv.put("v", "k", "1")
            let refused = "IFVERSION needs a version: an integer from 0 to 9223372036854775807, not '18446744073709551615'"
            for version in [UInt64.max, UInt64(Int64.max) + 1] {
                let error = await expectActorKVError { _ = try await kv.put("v", "k", "2", ifVersion: version) }
                #expect(error?.wireCode == .err, "\(String(describing: error))")
                #expect(error?.description.contains("an integer from 0 to 9223372036854775807, not '\(version)'") == true)
            }
            #expect(await expectActorKVError { _ = try await kv.put("v", "k", "2", ifVersion: .max) }
                    == .server(code: "ERR", message: refused))
            let batch = await expectActorKVError { _ = try await kv.batch("v", [.ifVersion("k", .max), .put("k", "3")]) }
            #expect(batch?.wireCode == .err && batch?.description.contains(refused) == true, "\(String(describing: batch))")
            let delete = await expectActorKVError { _ = try await kv.delete("v", "k", ifVersion: .max) }
            #expect(delete?.wireCode == .err, "\(String(describing: delete))")
            #expect(try await kv.getString("v", "k") == "1", "nothing written")
            #expect(try await kv.put("v", "k", "4", ifVersion: UInt64(Int64.max)) == nil, "Int64.max is a version: not this key's")
        }
    }

    @Test("RemoteRepository.update: 8 clients × 20 updates of one item add up to 160; findVersioned, save(ifVersion:), delete(ifVersion:)")
    func repositoryUpdatesRetryOnConflict() async throws {
        try await withServer { server, kv in
            let repo = RemoteRepository<Counter>(client: kv, namespace: "counters")
            #expect(try await repo.update(7) { $0.value += 1 } == nil, "no item: nothing written")
            #expect(try await repo.save(Counter(id: 7, value: 0, note: nil), ifVersion: 0) != nil)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let client = ActorKVClient(socketPath: server.socketPath)
                        let mine = RemoteRepository<Counter>(client: client, namespace: "counters")
                        for _ in 0..<20 { try await mine.update(7) { $0.value += 1 } }
                        await client.close()
                    }
                }
                try await group.waitForAll()
            }
            let (item, version) = try #require(try await repo.findVersioned(by: 7))
            #expect(item.value == 160)
            #expect(try await repo.save(Counter(id: 7, value: -1, note: "stale"), ifVersion: version - 1) == nil)
            #expect(try await repo.delete(7, ifVersion: version - 1) == false)
            #expect(try await repo.delete(7, ifVersion: version) == true)
            #expect(try await repo.find(by: 7) == nil)
        }
    }

    @Test("RemoteRepository.update whose body changes the item's id throws encodingFailed at once and writes nothing (it would overwrite the other item)")
    func repositoryUpdateThatChangesTheIDIsRefused() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Counter>(client: kv, namespace: "counters")
            // One batch: both items have the same version, so a write of 2 with 1's version would hold.
            try await repo.save(contentsOf: [Counter(id: 1, value: 10, note: nil), Counter(id: 2, value: 20, note: nil)])
            var attempts = 0
            do {
                _ = try await repo.update(1) { attempts += 1; $0.id = 2; $0.value = 11 }
                Issue.record("the update was written")
            } catch let error as ActorKVError {
                guard case .encodingFailed(let reason) = error else { throw error }
                #expect(reason.contains("changed the item's id from '1' to '2'"), "\(reason)")
            }
            #expect(attempts == 1, "refused at once, not retried as a conflict")
            #expect(try await repo.loadAll() == [Counter(id: 1, value: 10, note: nil), Counter(id: 2, value: 20, note: nil)])
        }
    }

    @Test("RemoteRepository.update gives up with conflict after maxAttempts when every write loses the race, writing nothing")
    func repositoryUpdateGivesUp() async throws {
        try await withServer { server, kv in
            let repo = RemoteRepository<Counter>(client: kv, namespace: "counters")
            try await repo.save(Counter(id: 1, value: 0, note: nil))
            let rivalItem = try embeddedFormat(Counter(id: 1, value: -7, note: "rival"))
            var attempts = 0
            var outcome: Result<Counter?, any Error>
            do {
                outcome = .success(try await repo.update(1, maxAttempts: 3) { item in
                    attempts += 1
                    item.value = 100
                    // A rival writes the item between this attempt's read and its conditional
                    // write (a blocking round trip on a socket of its own).
                    try Self.put(server.socketPath, ["PUT", "counters", "1"].map(\.bytes) + [rivalItem])
                })
            } catch {
                outcome = .failure(error)
            }
            guard case .failure(let error) = outcome, case .conflict(let reason)? = error as? ActorKVError else {
                Issue.record("expected a conflict, got \(outcome)"); return
            }
            #expect(reason.contains("3 attempts"))
            #expect(attempts == 3)
            #expect(try await repo.find(by: 1) == Counter(id: 1, value: -7, note: "rival"), "only the rival's writes landed")
        }
    }

    /// Sends one request on a new blocking connection and waits for `+OK`.
    static func put(_ socket: String, _ arguments: [[UInt8]]) throws {
        let fd = connectUnixSocket(socket)
        guard fd >= 0 else { throw TestFailure("connect \(socket)") }
        defer { close(fd) }
        var request: [UInt8] = []
        RequestEncoder.encode(arguments, into: &request)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else { throw TestFailure("send") }
        var reply = [UInt8](repeating: 0, count: 5)
        guard reply.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, 5, Int32(MSG_WAITALL)) }) == 5, reply == "+OK\r\n".bytes else {
            throw TestFailure("the rival's PUT was not acknowledged")
        }
    }
}
