#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVProtocol
import Synchronization

/// How many lock benchmark clients believe they hold the lock right now; above 1 is a broken lock.
private let holdersNow = Atomic<Int>(0)

/// `lock`: lock acquire + release round trips (issue #20's lock recipe against Redis's
/// `SET key val NX PX 30000` + `DEL`).
///
/// Each client is a thread with its own blocking connection that, until the time is up, acquires
/// the lock, counts itself inside (an atomic counter that must never exceed 1 while clients share
/// one key) and releases it:
/// - ActorKV: `PUT ns key <owner> IFVERSION 0 EPHEMERAL` (`:token`, or `$-1` when held), then
///   `BATCH ns IFVERSION key <token> DEL key` (`*2`).
/// - Redis: `SET key <owner> NX PX 30000` (`+OK`, or `$-1` when held), then `DEL key` (`:1`).
///
/// A refused acquire is retried at once (`--wait spin`, what both servers allow), or, for ActorKV
/// with `--wait changes`, after a change feed (`CHANGES ns PREFIX key` on a second connection per
/// client) reports a delete of the key, as the clients' `lock` does.
/// `--shared no` gives every client a key of its own (uncontended, in parallel).
enum LockBench {
    enum Target: String { case akv, redis }
    enum Wait: String { case spin, changes }

    final class Worker: ClientThread {
        let path: String
        let target: Target
        let wait: Wait
        let namespace: [UInt8]
        let key: [UInt8]
        let owner: [UInt8]
        let seconds: Double
        let barrier: UnsafeMutablePointer<pthread_barrier_t>
        var acquired = 0
        var refused = 0
        var overlaps = 0
        var latencies = Samples(capacity: 4096)
        var error: String?
        var finishedAt: UInt64 = 0

        init(path: String, target: Target, wait: Wait, namespace: [UInt8], key: [UInt8], owner: [UInt8], seconds: Double,
             barrier: UnsafeMutablePointer<pthread_barrier_t>) {
            self.path = path; self.target = target; self.wait = wait; self.namespace = namespace; self.key = key
            self.owner = owner; self.seconds = seconds; self.barrier = barrier
        }

        func run() {
            let client = SocketClient(path: path)
            let follower = wait == .changes ? SocketClient(path: path) : nil
            pthread_barrier_wait(barrier)
            guard let client, wait == .spin || follower != nil else { error = "cannot connect to \(path)"; return }
            do {
                if let follower { try follow(follower) }
                try loop(client, follower: follower)
            } catch {
                self.error = error.description
            }
            finishedAt = nowNanos()
        }

        private func follow(_ follower: SocketClient) throws(ClientError) {
            let header = try follower.call([Array("CHANGES".utf8), namespace, Array("PREFIX".utf8), key])
            guard case .array(let items) = header, items.first == .bulk(Array("changes".utf8)) else {
                throw ClientError("CHANGES: unexpected reply \(header)")
            }
        }

        private func loop(_ client: SocketClient, follower: SocketClient?) throws(ClientError) {
            let deadline = nowNanos() + UInt64(seconds * 1e9)
            var acquire: [UInt8] = []
            switch target {
            case .akv:
                RequestEncoder.encode([Array("PUT".utf8), namespace, key, owner, Array("IFVERSION".utf8), Array("0".utf8),
                                       Array("EPHEMERAL".utf8)], into: &acquire)
            case .redis:
                RequestEncoder.encode([Array("SET".utf8), key, owner, Array("NX".utf8), Array("PX".utf8), Array("30000".utf8)],
                                      into: &acquire)
            }
            var release: [UInt8] = []
            while nowNanos() < deadline {
                let t0 = nowNanos()
                try client.send(acquire)
                let reply = try client.receive()
                let token: Int64
                switch (target, reply) {
                case (.akv, .integer(let v)): token = v
                case (.redis, .simple("OK")): token = 0
                case (_, .null):
                    refused += 1
                    if let follower { try waitForDelete(follower, until: deadline) }
                    continue
                default: throw ClientError("acquire: unexpected reply \(reply)")
                }
                if holdersNow.add(1, ordering: .sequentiallyConsistent).newValue != 1 { overlaps += 1 }
                holdersNow.subtract(1, ordering: .sequentiallyConsistent)
                release.removeAll(keepingCapacity: true)
                switch target {
                case .akv:
                    RequestEncoder.encode([Array("BATCH".utf8), namespace, Array("IFVERSION".utf8), key, Array(String(token).utf8),
                                           Array("DEL".utf8), key], into: &release)
                case .redis:
                    RequestEncoder.encode([Array("DEL".utf8), key], into: &release)
                }
                try client.send(release)
                let released = try client.receive()
                switch (target, released) {
                case (.akv, .array(let items)) where items == [.simple("OK"), .integer(1)]: break
                case (.redis, .integer(1)): break
                default: throw ClientError("release: unexpected reply \(released)")
                }
                latencies.add(nowNanos() - t0)
                acquired += 1
            }
        }

        /// Reads the change feed until a change deletes the lock key (or the time is up).
        private func waitForDelete(_ follower: SocketClient, until deadline: UInt64) throws(ClientError) {
            while nowNanos() < deadline {
                let message = try follower.receive()
                guard case .array(let items) = message, let kind = items.first else {
                    throw ClientError("CHANGES: unexpected message \(message)")
                }
                guard kind == .bulk(Array("change".utf8)) else { continue }  // `synced`: nothing to wait for
                guard items.count == 4, case .array(let pairs) = items[3] else { throw ClientError("CHANGES: unexpected message \(message)") }
                for i in stride(from: 0, to: pairs.count - 1, by: 2) where pairs[i] == .bulk(key) && pairs[i + 1] == .null {
                    return
                }
            }
        }
    }

    static func run(path: String, target: String, wait: String, namespace: String, key: String, clients: Int,
                    shared: Bool, seconds: Double) throws(ClientError) {
        guard let target = Target(rawValue: target) else { fail("--target: akv or redis") }
        guard let wait = Wait(rawValue: wait) else { fail("--wait: spin or changes") }
        guard wait == .spin || target == .akv else { fail("--wait changes is ActorKV's (Redis has no change feed)") }
        guard clients > 0, seconds > 0 else { fail("--clients and --seconds must be at least 1") }
        let ns = Array(namespace.utf8)
        let keys = (0..<clients).map { shared ? Array(key.utf8) : Array("\(key)-\($0)".utf8) }

        guard let control = SocketClient(path: path) else { throw ClientError("cannot connect to \(path)") }
        for k in Set(keys) {
            let deleted = try control.call(target == .akv ? [Array("DEL".utf8), ns, k] : [Array("DEL".utf8), k])
            guard case .integer = deleted else { throw ClientError("DEL: unexpected reply \(deleted)") }
        }

        let barrier = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
        defer { barrier.deallocate() }
        guard pthread_barrier_init(barrier, nil, UInt32(clients + 1)) == 0 else { fail("pthread_barrier_init: errno \(errno)") }
        defer { pthread_barrier_destroy(barrier) }
        let workers = (0..<clients).map { i in
            Worker(path: path, target: target, wait: wait, namespace: ns, key: keys[i], owner: Array("client-\(i)".utf8),
                   seconds: seconds, barrier: barrier)
        }
        let start = runClients(workers, barrier: barrier)
        let end = workers.map(\.finishedAt).max() ?? nowNanos()
        if let failed = workers.first(where: { $0.error != nil }) { throw ClientError("a client failed: \(failed.error ?? "")") }

        let acquired = workers.reduce(0) { $0 + $1.acquired }
        let refused = workers.reduce(0) { $0 + $1.refused }
        let overlaps = workers.reduce(0) { $0 + $1.overlaps }
        var latencies = Samples(capacity: acquired)
        for worker in workers { for sample in worker.latencies.nanos { latencies.add(sample) } }
        let elapsed = Double(end - start) / 1e9
        let rate = elapsed > 0 ? Double(acquired) / elapsed : 0
        result("lock target=\(target.rawValue) wait=\(wait.rawValue) clients=\(clients) shared=\(shared ? "yes" : "no") "
            + "acquired=\(acquired) seconds=\(secs(end - start)) locks_per_s=\(Int(rate.rounded())) refused=\(refused) "
            + "overlaps=\(overlaps) \(latencies.fields()) client_min=\(workers.map(\.acquired).min() ?? 0) "
            + "client_max=\(workers.map(\.acquired).max() ?? 0)")
        guard !shared || overlaps == 0 else {
            fail("lock: MUTUAL EXCLUSION BROKEN on \(target.rawValue): \(overlaps) acquisitions while another client held the lock")
        }
        guard acquired > 0 else { fail("lock: no client acquired the lock in \(seconds) s") }
    }
}
