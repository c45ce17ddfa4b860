// actorkv-stress: drives the storage engine in a child process for kill -9 and failpoint crash tests.
//
//     actorkv-stress write --dir D --ack-file F [--fsync always|everysec|no] [--seed S] [--first-id N]
//                          [--ready-file R]
//         Opens the store and loops forever doing random puts, multi-key deletes and batches in
//         namespace "crash" (creating R, if given, once the namespace is open, so that a parent can
//         time its kill from the first write rather than from a start that load may slow down).
//         Before each operation it appends an intent line, after the engine
//         acknowledged it an ack line:
//             I <id> <kind> <mutation>;<mutation>;...     (mutation: +key=value or -key)
//             A <id>
//         Each line goes out with one write(2) on an O_APPEND descriptor, without buffering, so
//         that whatever the parent reads after kill -9 was really acknowledged.
//
//     actorkv-stress compact-crash --dir D [--ack-file F] [--failpoint NAME] [--count N] [--first-id N]
//         Writes N known keys under `always` (plus overwrites, a multi-key delete and a batch),
//         logging them like `write`, then calls compact(). Run with ACTORKV_FAILPOINT=NAME the
//         process ends with _exit(86) at that step; --failpoint NAME arms the same failpoint from
//         inside when the environment variable is not set. Exits 0 (after printing "compacted")
//         if no failpoint stopped it.
//
// Exit status: 0 done, 2 usage, 1 any engine error (message on stderr), 86 failpoint.

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVStore

struct Failure: Error, CustomStringConvertible {
    let description: String
}

func fail(_ message: String, status: Int32 = 1) -> Never {
    let line = "actorkv-stress: \(message)\n"
    _ = line.withCString { write(2, $0, strlen($0)) }
    exit(status)
}

/// The options after the subcommand, as `--name value` pairs.
func parseOptions(_ arguments: ArraySlice<String>) -> [String: String] {
    var options: [String: String] = [:]
    var rest = arguments
    while let flag = rest.popFirst() {
        guard flag.hasPrefix("--"), let value = rest.popFirst() else { fail("bad argument \(flag)", status: 2) }
        options[String(flag.dropFirst(2))] = value
    }
    return options
}

/// SplitMix64: small, seedable, good enough to pick operations.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The ack file: one unbuffered write(2) per line on an O_APPEND descriptor.
struct AckFile {
    let fd: Int32

    init(path: String) {
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 { fail("cannot open ack file \(path): \(String(cString: strerror(errno)))") }
    }

    func append(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeMutableBytes { raw in write(fd, raw.baseAddress! + done, raw.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                fail("writing the ack file: \(String(cString: strerror(errno)))")
            }
            done += n
        }
        bytes.removeAll()
    }

    func intent(_ id: UInt64, _ kind: String, _ mutations: [Mutation]) {
        let text = mutations.map { m -> String in
            switch m {
            case .put(let key, let value): return "+" + String(decoding: key, as: UTF8.self) + "=" + String(decoding: value, as: UTF8.self)
            case .delete(let key): return "-" + String(decoding: key, as: UTF8.self)
            case .lifetime(let key, let lifetime): return "~" + String(decoding: key, as: UTF8.self) + "@\(lifetime.deadline)"
            }
        }.joined(separator: ";")
        append("I \(id) \(kind) \(text)")
    }

    func ack(_ id: UInt64) { append("A \(id)") }
}

func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Opens the store, waiting a little if the parent still holds the directory lock.
func openStore(_ directory: String, _ options: StoreOptions) async -> Store {
    var attempts = 0
    while true {
        do throws(StoreError) {
            return try Store(directory: directory, options: options)
        } catch where error.code == .locked && attempts < 200 {
            attempts += 1
            try? await Task.sleep(nanoseconds: 25_000_000)
        } catch {
            fail("opening the store: \(error)")
        }
    }
}

/// Runs one logged operation: intent line, the write, ack line.
func run(_ ns: Namespace, _ log: AckFile, id: UInt64, kind: String, _ mutations: [Mutation]) async {
    log.intent(id, kind, mutations)
    do {
        switch kind {
        case "put":
            guard case .put(let key, let value) = mutations[0] else { fail("internal: put without a put") }
            try await ns.put(key, value)
        case "del":
            try await ns.delete(mutations.map { m -> [UInt8] in
                guard case .delete(let key) = m else { fail("internal: del with a put") }
                return key
            })
        default:
            try await ns.apply(mutations)
        }
    } catch {
        fail("operation \(id) (\(kind)) failed: \(error)")
    }
    log.ack(id)
}

func filler(_ rng: inout SplitMix64) -> String {
    let length = Int.random(in: 0..<20, using: &rng) == 0 ? Int.random(in: 1000...6000, using: &rng)
        : Int.random(in: 0...64, using: &rng)
    let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(length)
    for _ in 0..<length { out.append(alphabet[Int.random(in: 0..<alphabet.count, using: &rng)]) }
    return String(decoding: out, as: UTF8.self)
}

func writeLoop(_ o: [String: String]) async {
    guard let dir = o["dir"], let ackPath = o["ack-file"] else { fail("write needs --dir and --ack-file", status: 2) }
    guard let durability = DurabilityPolicy(rawValue: o["fsync"] ?? "always") else { fail("bad --fsync", status: 2) }
    var rng = SplitMix64(seed: UInt64(o["seed"] ?? "1") ?? 1)
    var id = UInt64(o["first-id"] ?? "1") ?? 1
    let options = StoreOptions(
        durability: durability,
        // Small thresholds so that compactions (rotate, snapshot, log drop) happen while we get killed.
        compaction: CompactionPolicy(logToLiveRatio: 2, minimumLogBytes: 48 << 10, interval: 0))
    let store = await openStore(dir, options)
    let ns: Namespace
    do { ns = try await store.namespace("crash") } catch { fail("opening namespace: \(error)") }
    let log = AckFile(path: ackPath)
    if let ready = o["ready-file"] {
        let fd = open(ready, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        if fd < 0 { fail("cannot create the ready file \(ready): \(String(cString: strerror(errno)))") }
        close(fd)
    }
    var batches: [UInt64] = []
    while true {
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < 50 {
            let key = "k\(Int.random(in: 0..<64, using: &rng))"
            await run(ns, log, id: id, kind: "put", [.put(key: bytes(key), value: bytes("v\(id).\(filler(&rng))"))])
        } else if roll < 70 {
            let n = Int.random(in: 1...4, using: &rng)
            let keys = Set((0..<n).map { _ in "k\(Int.random(in: 0..<64, using: &rng))" }).sorted()
            await run(ns, log, id: id, kind: "del", keys.map { .delete(key: bytes($0)) })
        } else {
            // A batch: the same batch id into five keys, sometimes with the atomic removal of an
            // earlier batch and a pool key change, all as one record.
            var mutations: [Mutation] = (0..<5).map { .put(key: bytes("b:\(id):\($0)"), value: bytes("\(id)")) }
            if !batches.isEmpty, Bool.random(using: &rng) {
                let old = batches.remove(at: Int.random(in: 0..<batches.count, using: &rng))
                mutations += (0..<5).map { .delete(key: bytes("b:\(old):\($0)")) }
            }
            if roll >= 95 {
                mutations.append(.put(key: bytes("k\(Int.random(in: 0..<64, using: &rng))"), value: bytes("v\(id).\(filler(&rng))")))
                mutations.append(.delete(key: bytes("k\(Int.random(in: 0..<64, using: &rng))")))
            }
            await run(ns, log, id: id, kind: "batch", mutations)
            batches.append(id)
        }
        id += 1
    }
}

func compactCrash(_ o: [String: String]) async {
    guard let dir = o["dir"] else { fail("compact-crash needs --dir", status: 2) }
    let ackPath = o["ack-file"] ?? "/dev/null"
    let count = Int(o["count"] ?? "100") ?? 100
    var id = UInt64(o["first-id"] ?? "1") ?? 1
    let faults = FaultInjector()
    var options = StoreOptions(durability: .always, compaction: CompactionPolicy(interval: 0), faults: faults)
    // Every step of a compaction, the log drop included: by default no segment is kept as change
    // history, so each compaction seals the active segment; `--history N` keeps N changes, and a
    // compaction leaves the active segment in place while history needs all it holds.
    options.changesHistory = Int(o["history"] ?? "0") ?? 0
    let store = await openStore(dir, options)
    let ns: Namespace
    do { ns = try await store.namespace("crash") } catch { fail("opening namespace: \(error)") }
    let log = AckFile(path: ackPath)
    for i in 0..<count {
        await run(ns, log, id: id, kind: "put", [.put(key: bytes("c\(i)"), value: bytes("v\(id)"))])
        id += 1
    }
    for i in stride(from: 0, to: count, by: 7) {
        await run(ns, log, id: id, kind: "put", [.put(key: bytes("c\(i)"), value: bytes("over\(id)"))])
        id += 1
    }
    await run(ns, log, id: id, kind: "del", [.delete(key: bytes("c1")), .delete(key: bytes("c2")), .delete(key: bytes("absent"))])
    id += 1
    await run(ns, log, id: id, kind: "batch", (0..<5).map { .put(key: bytes("b:\(id):\($0)"), value: bytes("\(id)")) }
                + [.delete(key: bytes("c3"))])
    id += 1
    if let name = o["failpoint"], getenv("ACTORKV_FAILPOINT") == nil {
        faults.arm(failpoint: name, .exit(86))
    }
    do { try await ns.compact() } catch { fail("compact failed: \(error)") }
    print("compacted")
    await store.close()
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else { fail("usage: actorkv-stress write|compact-crash --dir D --ack-file F ...", status: 2) }
let options = parseOptions(arguments.dropFirst(2))
switch arguments[1] {
case "write": await writeLoop(options)
case "compact-crash": await compactCrash(options)
default: fail("unknown command \(arguments[1])", status: 2)
}
