#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVStore

// actorkv-bench: the Swift half of Benchmarks/run.sh. Each subcommand prints one result line of
// `kind key=value …` on stdout (progress and errors on stderr); run.sh parses and tabulates them.

let usage = """
usage: actorkv-bench SUBCOMMAND [options]

  embedded-latency   --dir D --keys N --puts M [--fsync everysec|always|no]
                                                  Namespace.put p50/p99 at N keys
  compaction-latency --dir D --keys N --puts M    put latency while compact() runs vs. without
  map-latency        --keys N --puts M          OrderedMap.updateValue alone (no actor, no log)
  map-lookups        --keys N [--lookups M] [--group G]  map[key] one at a time against values(forKeys:) in groups
  seed-latency       --dir D --items N --saves M  the seed LocalRepository's save at N items
  socket-latency     --socket S --ns NS --keys N --puts M
                                                  sequential PUTs to a running actorkvd at N keys
  wait-ping          --socket S [--since-ns T] [--timeout SECS] [--interval-us U]
                                                  ms from T (CLOCK_REALTIME ns) to the first +PONG
  contended-update   --socket S --target akv|redis --clients C (--updates-per-client M | --seconds SECS)
                     [--ns NS] [--key K] [--redis-pipeline yes|no]
                                                  C threads, each with its own connection, increment one
                                                  key by read, then conditional write, retrying on
                                                  conflict (ActorKV GETV + PUT IFVERSION; Redis WATCH, GET,
                                                  MULTI, SET, EXEC); fails if the final value is not the
                                                  number of successes
  sum-counters       --socket S --target akv|redis --prefix P [--ns NS]
                                                  keys starting with P and the sum of their integer values
  fanout             --socket S --target akv|redis --watchers W --messages N [--payload B] [--readers R]
                     [--ns NS] [--seconds SECS] [--rate WRITES_PER_S]
                                                  one writer, W watchers: ActorKV PUT + CHANGES against Redis
                                                  PUBLISH + SUBSCRIBE; delivered messages/s and delivery
                                                  latency (acknowledged -> read); --rate paces the writer (to
                                                  compare latency at one load; default: as fast as it can);
                                                  --messages 0 only holds the watchers for SECS, draining
  lock               --socket S --target akv|redis --clients C --seconds SECS [--shared yes|no]
                     [--wait spin|changes] [--ns NS] [--key K]
                                                  lock acquire + release round trips: ActorKV PUT IFVERSION 0
                                                  EPHEMERAL + guarded BATCH DEL against Redis SET NX PX + DEL;
                                                  a refused acquire retries at once (spin) or after the
                                                  key's delete on a change feed (changes, ActorKV only);
                                                  fails if two clients ever held one lock together
  gen-resp           --target akv|redis --keys N --out FILE [--prefix P] [--px-spread MS]
                                                  RESP file of N puts of random 100-byte values
                                                  (keys P000000000000…, default P key:; with
                                                  --px-spread each gets PX 1..MS)
                                                  (redis-cli --pipe adds its own ECHO)
"""

struct Options {
    private var values: [String: String] = [:]

    init(_ arguments: ArraySlice<String>) {
        var rest = arguments
        while let flag = rest.popFirst() {
            guard flag.hasPrefix("--"), let value = rest.popFirst() else { fail("bad argument '\(flag)'\n\(usage)") }
            values[String(flag.dropFirst(2))] = value
        }
    }

    func string(_ name: String, _ fallback: String? = nil) -> String {
        guard let value = values[name] ?? fallback else { fail("--\(name) is required\n\(usage)") }
        return value
    }

    func int(_ name: String, _ fallback: Int? = nil) -> Int {
        guard let text = values[name] else {
            guard let fallback else { fail("--\(name) is required\n\(usage)") }
            return fallback
        }
        guard let value = Int(text), value >= 0 else { fail("--\(name) needs a number, not '\(text)'") }
        return value
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 2 else { fail(usage) }
let options = Options(arguments.dropFirst(2))

do {
    switch arguments[1] {
    case "embedded-latency":
        guard let durability = DurabilityPolicy(rawValue: options.string("fsync", "everysec")) else { fail("--fsync: always, everysec or no") }
        try await Embedded.putLatency(directory: options.string("dir"), keys: options.int("keys"), puts: options.int("puts", 2000),
                                      durability: durability)
    case "compaction-latency":
        try await Embedded.compactionLatency(directory: options.string("dir"), keys: options.int("keys"), minimumPuts: options.int("puts", 2000))
    case "map-latency":
        MapBench.updateLatency(keys: options.int("keys"), puts: options.int("puts", 2000))
    case "map-lookups":
        MapBench.lookupCost(keys: options.int("keys"), lookups: options.int("lookups", 1_000_000), group: options.int("group", 16))
    case "seed-latency":
        try await SeedBench.saveLatency(directory: options.string("dir"), items: options.int("items"), saves: options.int("saves"))
    case "socket-latency":
        try SocketBench.putLatency(path: options.string("socket"), namespace: options.string("ns", "latency"),
                                   keys: options.int("keys"), puts: options.int("puts", 2000))
    case "wait-ping":
        SocketBench.waitPing(path: options.string("socket"), sinceNanos: UInt64(options.int("since-ns", 0)),
                             timeoutSeconds: Double(options.int("timeout", 120)), intervalMicros: UInt32(options.int("interval-us", 500)))
    case "contended-update":
        let pipeline = options.string("redis-pipeline", "yes")
        guard pipeline == "yes" || pipeline == "no" else { fail("--redis-pipeline: yes or no") }
        try ContendedUpdate.run(path: options.string("socket"), target: options.string("target"),
                                namespace: options.string("ns", "bench"), key: options.string("key", "counter"),
                                clients: options.int("clients", 50), updatesPerClient: options.int("updates-per-client", 0),
                                seconds: Double(options.int("seconds", 0)), redisPipeline: pipeline == "yes")
    case "sum-counters":
        try ContendedUpdate.sumCounters(path: options.string("socket"), target: options.string("target"),
                                        namespace: options.string("ns", "bench"), prefix: options.string("prefix"))
    case "fanout":
        try FanOut.run(path: options.string("socket"), target: options.string("target"), watchers: options.int("watchers"),
                       messages: options.int("messages"), payload: options.int("payload", 100), readers: max(1, options.int("readers", 2)),
                       seconds: options.int("seconds", 0), namespace: options.string("ns", "fanout"), rate: options.int("rate", 0))
    case "lock":
        let shared = options.string("shared", "yes")
        guard shared == "yes" || shared == "no" else { fail("--shared: yes or no") }
        try LockBench.run(path: options.string("socket"), target: options.string("target"), wait: options.string("wait", "spin"),
                          namespace: options.string("ns", "locks"), key: options.string("key", "job"),
                          clients: options.int("clients", 1), shared: shared == "yes", seconds: Double(options.int("seconds", 5)))
    case "gen-resp":
        try RESPFile.generate(target: options.string("target"), keys: options.int("keys"), path: options.string("out"),
                              prefix: options.string("prefix", "key:"), pxSpread: options.int("px-spread", 0))
    case "-h", "--help", "help":
        print(usage)
    default:
        fail("unknown subcommand '\(arguments[1])'\n\(usage)")
    }
} catch {
    fail("\(arguments[1]): \(error)")
}
