#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVProtocol

/// `contended-update`: many clients increment ONE shared key by read → modify → conditional
/// write, retrying on conflict (issue #18's optimistic concurrency against Redis's WATCH/MULTI/EXEC).
///
/// Each client is a thread with its own blocking connection. One attempt:
/// - ActorKV: `GETV ns key` (`*2` value, version; `$-1` when absent: value 0, version 0), then
///   `PUT ns key <n+1> IFVERSION <v>` (`:newVersion` on success, `$-1` on conflict).
/// - Redis: `WATCH key` + `GET key` (sent together), then `MULTI` + `SET key <n+1>` + `EXEC` (sent
///   together; `+OK`, `+QUEUED`, then `*1` on success or `*-1` on conflict). Both sides therefore
///   make two round trips per attempt: each write waits only for the replies it depends on, as a
///   Redis client's transaction pipeline does. `--redis-pipeline no` sends the five commands one at a
///   time (five round trips), for comparison.
///
/// The counter is deleted first; at the end its value must equal the number of successful updates
/// (the run fails loudly otherwise: a lost update in either server).
enum ContendedUpdate {
    enum Target: String { case akv, redis }

    /// One client thread's parameters and results (read by the main thread only after the join).
    final class Worker: ClientThread {
        let path: String
        let target: Target
        let namespace: [UInt8]
        let key: [UInt8]
        let updates: Int            // successes to reach (count mode), or 0 (duration mode)
        let seconds: Double         // duration mode, or 0
        let redisPipeline: Bool
        let barrier: UnsafeMutablePointer<pthread_barrier_t>
        var successes = 0
        var retries = 0
        var latencies = Samples()
        var error: String?
        var finishedAt: UInt64 = 0

        init(path: String, target: Target, namespace: [UInt8], key: [UInt8], updates: Int, seconds: Double,
             redisPipeline: Bool, barrier: UnsafeMutablePointer<pthread_barrier_t>) {
            self.path = path; self.target = target; self.namespace = namespace; self.key = key
            self.updates = updates; self.seconds = seconds; self.redisPipeline = redisPipeline; self.barrier = barrier
            latencies = Samples(capacity: updates > 0 ? updates : 1024)
        }

        func run() {
            let client = SocketClient(path: path)
            // Everyone waits at the barrier, connected or not, so the main thread never hangs.
            pthread_barrier_wait(barrier)
            guard let client else { error = "cannot connect to \(path)"; return }
            do {
                try loop(client)
            } catch {
                self.error = error.description
            }
            finishedAt = nowNanos()
        }

        private func loop(_ client: SocketClient) throws(ClientError) {
            let deadline = seconds > 0 ? nowNanos() + UInt64(seconds * 1e9) : UInt64.max
            var read: [UInt8] = [], write: [UInt8] = []
            switch target {
            case .akv:
                RequestEncoder.encode([Array("GETV".utf8), namespace, key], into: &read)
            case .redis:
                RequestEncoder.encode([Array("WATCH".utf8), key], into: &read)
                RequestEncoder.encode([Array("GET".utf8), key], into: &read)
            }
            while updates > 0 ? successes < updates : nowNanos() < deadline {
                let t0 = nowNanos()
                while true {
                    let done: Bool
                    switch target {
                    case .akv: done = try akvAttempt(client, read: read, write: &write)
                    case .redis: done = try redisAttempt(client, read: read, write: &write)
                    }
                    if done { break }
                    retries += 1
                    // In duration mode an update still retrying at the deadline is abandoned.
                    if updates == 0 && nowNanos() >= deadline { return }
                }
                latencies.add(nowNanos() - t0)
                successes += 1
            }
        }

        /// One GETV → PUT IFVERSION attempt; true if the write was applied.
        private func akvAttempt(_ client: SocketClient, read: [UInt8], write: inout [UInt8]) throws(ClientError) -> Bool {
            try client.send(read)
            let value: Int, version: Int64
            switch try client.receive() {
            case .null:
                (value, version) = (0, 0)
            case .array(let items) where items.count == 2:
                guard case .bulk(let bytes) = items[0], let n = Int(String(decoding: bytes, as: UTF8.self)),
                      case .integer(let v) = items[1] else { throw ClientError("GETV: unexpected reply \(items)") }
                (value, version) = (n, v)
            case let other:
                throw ClientError("GETV: unexpected reply \(other)")
            }
            write.removeAll(keepingCapacity: true)
            RequestEncoder.encode([Array("PUT".utf8), namespace, key, Array(String(value + 1).utf8),
                                   Array("IFVERSION".utf8), Array(String(version).utf8)], into: &write)
            try client.send(write)
            switch try client.receive() {
            case .integer: return true
            case .null: return false
            case let other: throw ClientError("PUT IFVERSION: unexpected reply \(other)")
            }
        }

        /// One WATCH, GET → MULTI, SET, EXEC attempt; true if EXEC ran the transaction.
        private func redisAttempt(_ client: SocketClient, read: [UInt8], write: inout [UInt8]) throws(ClientError) -> Bool {
            if redisPipeline {
                try client.send(read)
                try expect(try client.receive(), .simple("OK"), "WATCH")
            } else {
                try expect(try client.call([Array("WATCH".utf8), key]), .simple("OK"), "WATCH")
                var get: [UInt8] = []
                RequestEncoder.encode([Array("GET".utf8), key], into: &get)
                try client.send(get)
            }
            let value: Int
            switch try client.receive() {
            case .null: value = 0
            case .bulk(let bytes):
                guard let n = Int(String(decoding: bytes, as: UTF8.self)) else { throw ClientError("GET: not a number: \(bytes)") }
                value = n
            case let other: throw ClientError("GET: unexpected reply \(other)")
            }
            let set: [[UInt8]] = [Array("SET".utf8), key, Array(String(value + 1).utf8)]
            let exec: Reply
            if redisPipeline {
                write.removeAll(keepingCapacity: true)
                RequestEncoder.encode([Array("MULTI".utf8)], into: &write)
                RequestEncoder.encode(set, into: &write)
                RequestEncoder.encode([Array("EXEC".utf8)], into: &write)
                try client.send(write)
                try expect(try client.receive(), .simple("OK"), "MULTI")
                try expect(try client.receive(), .simple("QUEUED"), "SET inside MULTI")
                exec = try client.receive()
            } else {
                try expect(try client.call([Array("MULTI".utf8)]), .simple("OK"), "MULTI")
                try expect(try client.call(set), .simple("QUEUED"), "SET inside MULTI")
                exec = try client.call([Array("EXEC".utf8)])
            }
            switch exec {
            case .array(let items) where items == [.simple("OK")]: return true
            case .null, .nullArray: return false   // *-1: a watched key changed
            case let other: throw ClientError("EXEC: unexpected reply \(other)")
            }
        }

        private func expect(_ reply: Reply, _ wanted: Reply, _ what: String) throws(ClientError) {
            guard reply == wanted else { throw ClientError("\(what): expected \(wanted), got \(reply)") }
        }
    }

    static func run(path: String, target: String, namespace: String, key: String, clients: Int,
                    updatesPerClient: Int, seconds: Double, redisPipeline: Bool) throws(ClientError) {
        guard let target = Target(rawValue: target) else { fail("--target: akv or redis") }
        guard clients > 0 else { fail("--clients must be at least 1") }
        guard (updatesPerClient > 0) != (seconds > 0) else { fail("give one of --updates-per-client M or --seconds S") }
        let ns = Array(namespace.utf8), keyBytes = Array(key.utf8)

        // Start from an absent counter.
        guard let control = SocketClient(path: path) else { throw ClientError("cannot connect to \(path)") }
        let deleted = try control.call(target == .akv ? [Array("DEL".utf8), ns, keyBytes] : [Array("DEL".utf8), keyBytes])
        guard case .integer = deleted else { throw ClientError("DEL: unexpected reply \(deleted)") }

        let barrier = UnsafeMutablePointer<pthread_barrier_t>.allocate(capacity: 1)
        defer { barrier.deallocate() }
        guard pthread_barrier_init(barrier, nil, UInt32(clients + 1)) == 0 else { fail("pthread_barrier_init: errno \(errno)") }
        defer { pthread_barrier_destroy(barrier) }

        let workers = (0..<clients).map { _ in
            Worker(path: path, target: target, namespace: ns, key: keyBytes, updates: updatesPerClient, seconds: seconds,
                   redisPipeline: redisPipeline, barrier: barrier)
        }
        let start = runClients(workers, barrier: barrier)
        let end = workers.map(\.finishedAt).max() ?? nowNanos()

        if let failed = workers.first(where: { $0.error != nil }) {
            throw ClientError("a client failed: \(failed.error ?? "")")
        }
        let successes = workers.reduce(0) { $0 + $1.successes }
        let retries = workers.reduce(0) { $0 + $1.retries }
        var latencies = Samples(capacity: successes)
        for worker in workers { for sample in worker.latencies.nanos { latencies.add(sample) } }
        let fewest = workers.map(\.successes).min() ?? 0, most = workers.map(\.successes).max() ?? 0

        // The correctness check: every acknowledged update is in the counter, and nothing else.
        let finalReply = try control.call(target == .akv ? [Array("GET".utf8), ns, keyBytes] : [Array("GET".utf8), keyBytes])
        let final: Int
        switch finalReply {
        case .null: final = 0
        case .bulk(let bytes):
            guard let n = Int(String(decoding: bytes, as: UTF8.self)) else { throw ClientError("final GET: not a number: \(bytes)") }
            final = n
        case let other: throw ClientError("final GET: unexpected reply \(other)")
        }

        let elapsed = Double(end - start) / 1e9
        let rate = elapsed > 0 ? Double(successes) / elapsed : 0
        let perSuccess = successes > 0 ? Double(retries) / Double(successes) : 0
        result("contended-update target=\(target.rawValue) clients=\(clients) successes=\(successes) seconds=\(secs(end - start)) "
            + "updates_per_s=\(Int(rate.rounded())) retries=\(retries) retries_per_success=\(fmt2(perSuccess)) final=\(final) "
            + "\(latencies.fields()) client_min=\(fewest) client_max=\(most)"
            + (target == .redis ? " redis_pipeline=\(redisPipeline ? "yes" : "no")" : ""))
        guard final == successes else {
            fail("contended-update: COUNTER MISMATCH on \(target.rawValue): the counter is \(final) after \(successes) acknowledged updates (updates lost or applied twice)")
        }
    }

    /// `sum-counters`: the number of keys starting with `prefix` and the sum of their values (each must
    /// be an integer), so run.sh can check that every INCR redis-benchmark sent was applied
    /// (redis-benchmark counts an error reply as a completed request).
    static func sumCounters(path: String, target: String, namespace: String, prefix: String) throws(ClientError) {
        guard let target = Target(rawValue: target) else { fail("--target: akv or redis") }
        guard let client = SocketClient(path: path) else { throw ClientError("cannot connect to \(path)") }
        var keys = 0, sum = 0
        var seen = Set<[UInt8]>()
        func add(_ value: Reply) throws(ClientError) {
            guard case .bulk(let bytes) = value, let n = Int(String(decoding: bytes, as: UTF8.self)) else {
                throw ClientError("not an integer value: \(value)")
            }
            keys += 1; sum += n
        }
        var cursor: [UInt8] = Array("0".utf8)
        repeat {
            let page: Reply
            switch target {
            case .akv:
                page = try client.call([Array("SCAN".utf8), Array(namespace.utf8), cursor, Array("PREFIX".utf8), Array(prefix.utf8),
                                        Array("COUNT".utf8), Array("10000".utf8)])
            case .redis:
                page = try client.call([Array("SCAN".utf8), cursor, Array("MATCH".utf8), Array((prefix + "*").utf8),
                                        Array("COUNT".utf8), Array("10000".utf8)])
            }
            guard case .array(let parts) = page, parts.count == 2, case .bulk(let next) = parts[0], case .array(let items) = parts[1] else {
                throw ClientError("SCAN: unexpected reply \(page)")
            }
            switch target {
            case .akv:
                guard items.count % 2 == 0 else { throw ClientError("SCAN: odd number of items") }
                for i in stride(from: 1, to: items.count, by: 2) { try add(items[i]) }
            case .redis:
                // Redis's SCAN may return a key twice (while its table is rehashed): count each once.
                var fresh: [[UInt8]] = []
                for item in items {
                    guard case .bulk(let k) = item else { throw ClientError("SCAN: a key that is not a bulk string: \(item)") }
                    if seen.insert(k).inserted { fresh.append(k) }
                }
                if !fresh.isEmpty {
                    let values = try client.call([Array("MGET".utf8)] + fresh)
                    guard case .array(let list) = values, list.count == fresh.count else { throw ClientError("MGET: unexpected reply \(values)") }
                    for value in list { try add(value) }
                }
            }
            cursor = next
        } while cursor != Array("0".utf8)
        result("counters target=\(target.rawValue) prefix=\(prefix) keys=\(keys) sum=\(sum)")
    }
}

/// Two decimals (retries per success is often below 1).
func fmt2(_ value: Double) -> String {
    let hundredths = Int((value * 100).rounded())
    let frac = hundredths % 100
    return "\(hundredths / 100)." + (frac < 10 ? "0" : "") + String(frac)
}
