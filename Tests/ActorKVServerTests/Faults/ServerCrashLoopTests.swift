import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// kill -9 the server at random moments while clients write; every restart must show every
/// acknowledged write, no acknowledged delete, and no half-applied batch — guarded batches,
/// conditional puts, INCRs, MULTI/EXEC transactions (a deadline they give included),
/// multi-field HSETs and puts with a deadline included.
///
/// Cycles: $ACTORKV_CRASH_CYCLES (default 30; the soak mode runs 500).
@Suite(.serialized, .tags(.slow), .skippedWhenQuick) struct ServerCrashLoopTests {
    static var cycles: Int { Int(ProcessInfo.processInfo.environment["ACTORKV_CRASH_CYCLES"] ?? "") ?? 30 }

    @Test func killNineLoopUnderFsyncAlwaysLosesNothingAcknowledged() async throws {
        try await onOwnThread {
            try crashLoop(policy: "always", cycles: Self.cycles)
        }
    }

    @Test func killNineLoopUnderEverysecLosesNothingAcknowledgedEither() async throws {
        try await onOwnThread {
            // kill -9 does not lose the page cache: under everysec a write is handed to the kernel before
            // it is acknowledged, so only power loss can take the last second.
            try crashLoop(policy: "everysec", cycles: max(5, Self.cycles / 5))
        }
    }

    func crashLoop(policy: String, cycles: Int) throws {
        let dir = TemporaryDirectory()
        let model = Model()
        var generator = SystemRandomNumberGenerator()
        for cycle in 0..<cycles {
            let server = try ServerProcess(directory: dir, arguments: ["--fsync", policy])
            do { try verify(model, against: server, cycle: cycle) } catch {
                let running = server.process.isRunning
                server.stop(signal: SIGKILL)  // not left behind by a failing run
                throw TestFailure("cycle \(cycle): \(error); server running: \(running); its log:\n\(server.log)")
            }
            let writers = (0..<3).map { w in WriterThread(id: "\(cycle)-\(w)", socket: server.socketPath, model: model) }
            for writer in writers { writer.start() }
            usleep(UInt32.random(in: 30_000...250_000, using: &generator))
            server.stop(signal: SIGKILL)
            for writer in writers { writer.join() }
        }
        let last = try ServerProcess(directory: dir, arguments: ["--fsync", policy])
        defer { last.stop() }
        try verify(model, against: last, cycle: cycles)
        let summary = model.summary
        print("crash loop (\(policy)): \(cycles) kill -9 cycles, \(summary.acked) acknowledged operations checked, \(summary.keys) keys, nothing lost")
        #expect(summary.acked > cycles, "the writers made progress")
    }

    func verify(_ model: Model, against server: ServerProcess, cycle: Int) throws {
        let expectations = model.expectations()
        guard !expectations.isEmpty else { return }
        let c = try RawConnection(path: server.socketPath, timeoutSeconds: 30)
        // Pipelines of 1,000 GETs: a client that writes a whole long pipeline before reading any
        // reply meets the server's backpressure (it stops reading a client whose unread replies
        // pass --max-output-bytes) and blocks in its own send, as protocol.md says.
        func pipelined(_ requests: [[String]], _ check: (Int, Reply) -> Void) throws {
            for start in stride(from: 0, to: requests.count, by: 1_000) {
                let part = start..<min(start + 1_000, requests.count)
                var request: [UInt8] = []
                for i in part { RequestEncoder.encode(requests[i], into: &request) }
                try c.send(request)
                for i in part { check(i, try c.reply()) }
            }
        }
        var withDeadline: [String] = []  // keys put with PX that are there: their deadline must be too
        try pipelined(expectations.map { ["GET", "crash", $0.key] }) { i, reply in
            let e = expectations[i]
            let actual: String? = { if case .bulk(let b) = reply { return String(decoding: b, as: UTF8.self) }; return nil }()
            #expect(e.allowed.contains(actual), "cycle \(cycle): key \(e.key) is \(actual ?? "absent"), allowed \(e.allowed)")
            if actual != nil && e.key.hasPrefix("x") { withDeadline.append(e.key) }
        }
        try pipelined(withDeadline.map { ["PTTL", "crash", $0] }) { i, reply in
            let kept: Bool = { if case .integer(let ms) = reply { return ms > 0 }; return false }()
            #expect(kept, "cycle \(cycle): key \(withDeadline[i]), put with PX, has PTTL \(reply)")
        }
        // Every batch key's GET in one pipeline, then the PTTLs of applied transactions' keys
        // with a deadline: one round trip per key had been most of this test's time.
        let batches = model.batches()
        let batchKeys = batches.flatMap(\.keys)
        var presentKeys = Set<String>()
        try pipelined(batchKeys.map { ["GET", "crash", $0] }) { i, reply in
            if case .bulk = reply { presentKeys.insert(batchKeys[i]) }
        }
        var transactionKeys: [(batch: String, key: String)] = []
        for batch in batches {
            let present = batch.keys.filter(presentKeys.contains).count
            #expect(present == 0 || present == batch.keys.count, "cycle \(cycle): batch \(batch.id) half-applied (\(present)/\(batch.keys.count))")
            // A transaction's deadlines are in its record with its values.
            if present > 0 && batch.id.hasPrefix("t") { transactionKeys += batch.keys[1...2].map { (batch.id, $0) } }
            if batch.acknowledged { #expect(present == batch.keys.count, "cycle \(cycle): acknowledged batch \(batch.id) missing") }
        }
        try pipelined(transactionKeys.map { ["PTTL", "crash", $0.key] }) { i, reply in
            let kept: Bool = { if case .integer(let ms) = reply { return ms > 0 }; return false }()
            let (batch, key) = transactionKeys[i]
            #expect(kept, "cycle \(cycle): transaction \(batch) applied without the deadline of \(key): PTTL \(reply)")
        }
    }
}

/// What the clients were told: per key, the values a restarted server may hold.
final class Model: Sendable {
    struct KeyState {
        var acknowledged: String?
        var inFlight: [String?] = []
    }

    struct Batch {
        let id: String
        let keys: [String]
        var acknowledged: Bool
    }

    private struct State {
        var keys: [String: KeyState] = [:]
        var batches: [String: Batch] = [:]
        var acked = 0
    }

    private let state = Mutex(State())

    func begin(_ key: String, _ value: String?) {
        state.withLock { $0.keys[key, default: KeyState()].inFlight.append(value) }
    }

    func acknowledge(_ key: String, _ value: String?) {
        state.withLock {
            $0.keys[key, default: KeyState()] = KeyState(acknowledged: value)
            $0.acked += 1
        }
    }

    func beginBatch(_ id: String, _ keys: [String]) {
        state.withLock { $0.batches[id] = Batch(id: id, keys: keys, acknowledged: false) }
    }

    func acknowledgeBatch(_ id: String) {
        state.withLock {
            $0.batches[id]?.acknowledged = true
            $0.acked += 1
        }
    }

    func expectations() -> [(key: String, allowed: [String?])] {
        state.withLock { s in
            s.keys.map { (key: $0.key, allowed: [$0.value.acknowledged] + $0.value.inFlight) }
        }
    }

    func batches() -> [Batch] { state.withLock { Array($0.batches.values) } }

    /// Operations acknowledged and keys touched so far.
    var summary: (acked: Int, keys: Int) { state.withLock { ($0.acked, $0.keys.count) } }
}

/// A client thread doing puts, deletes and batches until the server dies under it.
final class WriterThread: @unchecked Sendable {
    let id: String
    let socket: String
    let model: Model
    private var thread: Thread?
    private let done = DispatchSemaphore(value: 0)

    init(id: String, socket: String, model: Model) {
        self.id = id
        self.socket = socket
        self.model = model
    }

    func start() {
        let t = Thread { [self] in
            run()
            done.signal()
        }
        thread = t
        t.start()
    }

    func join() { done.wait() }

    private func run() {
        guard let c = try? RawConnection(path: socket, timeoutSeconds: 5) else { return }
        var n = 0
        var written: [String] = []
        var count = 0  // this writer's counter, INCR'd: only it writes the key
        while true {
            n += 1
            let choice = Int.random(in: 0..<16)
            do {
                if choice == 10 {
                    let key = "c\(id)"
                    model.begin(key, String(count + 1))
                    guard try c.command(["INCR", "crash", key]) == .integer(Int64(count + 1)) else { return }
                    count += 1
                    model.acknowledge(key, String(count))
                } else if choice == 11 {
                    // A conditional put of a new key: 0 holds.
                    let key = "i\(id)-\(n)", value = "v\(id)-\(n)"
                    model.begin(key, value)
                    guard case .integer = try c.command(["PUT", "crash", key, value, "IFVERSION", "0"]) else { return }
                    model.acknowledge(key, value)
                } else if choice == 12 {
                    // A guarded batch: read the guard key's version, then write it and three new
                    // keys only if it is unchanged (only this writer writes it, so it is).
                    let guardKey = "g\(id)", batch = "gb\(id)-\(n)"
                    let version: String
                    switch try c.command(["GETV", "crash", guardKey]) {
                    case .null: version = "0"
                    case .array(let parts) where parts.count == 2:
                        guard case .integer(let v) = parts[1] else { return }
                        version = String(v)
                    default: return
                    }
                    let keys = (0..<3).map { "\(batch)-\($0)" }
                    model.beginBatch(batch, keys)
                    model.begin(guardKey, batch)
                    var args = ["BATCH", "crash", "IFVERSION", guardKey, version, "PUT", guardKey, batch]
                    for key in keys { args += ["PUT", key, batch] }
                    guard case .array = try c.command(args) else { return }
                    model.acknowledgeBatch(batch)
                    model.acknowledge(guardKey, batch)
                } else if choice == 13 {
                    // A transaction: EXEC applies its queue as one log record (protocol.md
                    // "Transactions"), so after a kill -9 all of it is there or none, the
                    // deadline it gives two of its keys (a day away) included.
                    let batch = "t\(id)-\(n)"
                    let keys = (0..<4).map { "\(batch)-\($0)" }
                    model.beginBatch(batch, keys)
                    guard try c.command(["MULTI"]) == .simple("OK"),
                          try c.command(["HSET", "crash", keys[0], batch, keys[1], batch]) == .simple("QUEUED"),
                          try c.command(["HSET", "crash", keys[2], batch]) == .simple("QUEUED"),
                          try c.command(["HPEXPIRE", "crash", "86400000", "FIELDS", "2", keys[1], keys[2]]) == .simple("QUEUED"),
                          try c.command(["PUT", "crash", keys[3], batch]) == .simple("QUEUED"),
                          case .array = try c.command(["EXEC"]) else { return }
                    model.acknowledgeBatch(batch)
                } else if choice == 14 {
                    // A multi-field HSET is one log record too.
                    let batch = "h\(id)-\(n)"
                    let keys = (0..<3).map { "\(batch)-\($0)" }
                    model.beginBatch(batch, keys)
                    guard try c.command(["HSET", "crash"] + keys.flatMap { [$0, batch] }) == .integer(3) else { return }
                    model.acknowledgeBatch(batch)
                } else if choice == 15 {
                    // A put with a deadline (a day away: it must not expire during the test).
                    let key = "x\(id)-\(n)", value = "v\(id)-\(n)"
                    model.begin(key, value)
                    guard try c.command(["PUT", "crash", key, value, "PX", "86400000"]) == .simple("OK") else { return }
                    model.acknowledge(key, value)
                } else if choice < 6 || written.isEmpty {
                    let key = "w\(id)-\(n)", value = "v\(id)-\(n)"
                    model.begin(key, value)
                    guard try c.command(["PUT", "crash", key, value]) == .simple("OK") else { return }
                    model.acknowledge(key, value)
                    written.append(key)
                } else if choice < 8 {
                    let key = written.remove(at: Int.random(in: 0..<written.count))
                    model.begin(key, nil)
                    guard case .integer = try c.command(["DEL", "crash", key]) else { return }
                    model.acknowledge(key, nil)
                } else {
                    let batch = "b\(id)-\(n)"
                    let keys = (0..<4).map { "\(batch)-\($0)" }
                    model.beginBatch(batch, keys)
                    var args = ["BATCH", "crash"]
                    for key in keys { args += ["PUT", key, batch] }
                    guard case .array = try c.command(args) else { return }
                    model.acknowledgeBatch(batch)
                }
            } catch {
                return
            }
        }
    }
}
