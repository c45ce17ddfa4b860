import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Synchronization
import Testing

/// A read of the whole namespace queued in MULTI (HGETALL) against another connection's writes
/// over real sockets: what EXEC answers is the namespace as the transaction commits it. Locally
/// the namespace's run makes this so; in cluster mode (``ClusterTarget``) the read and the write
/// are two etcd requests, and the write's guard (nothing in the namespace changed since the read)
/// does: without it, a write landing between them would go unseen.
@Suite("Client: a whole-namespace read in MULTI is the namespace the transaction commits, under concurrent writes")
struct TransactionReadClientTests {
    /// Set when the writer is done.
    final class Flag: Sendable {
        let raised = Atomic<Bool>(false)
    }

    @Test("HGETALL in MULTI, while another connection writes key c: the c it shows is the one current at the transaction's version")
    func wholeNamespaceReadUnderWrites() async throws {
        try await withServer { server, _ in
            let ns = "txn-read"
            let writer = ActorKVClient(socketPath: server.socketPath)
            let reader = ActorKVClient(socketPath: server.socketPath)
            let done = Flag()
            // The writer: the only one to write c, which it sets to 1, 2, 3, … and notes the
            // version each value was written at (a PUT IFVERSION answers it).
            let writes = Task { () throws -> [UInt64] in
                defer { done.raised.store(true, ordering: .releasing) }
                var versions: [UInt64] = [0]
                for value in 1...300 {
                    guard let version = try await writer.put(ns, "c", String(value), ifVersion: versions.last!) else {
                        throw TestFailure("the writer's PUT IFVERSION of c = \(value) failed: someone else wrote c")
                    }
                    versions.append(version)
                }
                return versions
            }
            // The reader: MULTI, HGETALL, HINCRBY seq, EXEC, then seq's version, which is the
            // transaction's (nobody else writes seq).
            var seen: [(c: Int, committed: UInt64)] = []
            var refused = 0
            while seen.count < 20 || !done.raised.load(ordering: .acquiring) {
                _ = try await reader.send(["MULTI"])
                _ = try await reader.send(["HGETALL", ns])
                _ = try await reader.send(["HINCRBY", ns, "seq", "1"])
                let exec: Reply
                do { exec = try await reader.send(["EXEC"]) } catch {
                    // Cluster mode gives up after many retries under contention; nothing applied.
                    refused += 1
                    #expect(refused < 100, "EXEC refused \(refused) times: \(error)")
                    if refused >= 100 { break }
                    continue
                }
                guard case .array(let replies) = exec, replies.count == 2, case .array(let flat) = replies[0],
                      let committed = try await reader.getVersioned(ns, "seq")?.version else {
                    Issue.record("EXEC: \(exec)")
                    break
                }
                seen.append((Self.counter(in: flat), committed))
            }
            let versions = try await writes.value
            await writer.close()
            await reader.close()
            for (c, committed) in seen {
                // c was current at `committed`: written at or before it, and not yet replaced.
                #expect(versions[c] <= committed && (c == versions.count - 1 || committed < versions[c + 1]),
                        "EXEC showed c = \(c) (written at version \(versions[c])), but committed at \(committed), when c was \(versions.lastIndex { $0 <= committed } ?? 0)")
            }
            #expect(seen.contains { $0.c > 0 && $0.c < versions.count - 1 }, "some transaction ran while the writer wrote: \(seen.map(\.c))")
        }
    }

    /// The value of field `c` in an HGETALL's flat `field value …` array (0 when absent).
    static func counter(in flat: [Reply]) -> Int {
        for index in stride(from: 0, to: flat.count - 1, by: 2) {
            if case .bulk(let field) = flat[index], field == Array("c".utf8), case .bulk(let value) = flat[index + 1] {
                return Int(String(decoding: value, as: UTF8.self)) ?? -1
            }
        }
        return 0
    }
}
