#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Monotonic nanoseconds (CLOCK_MONOTONIC).
func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Wall-clock nanoseconds (CLOCK_REALTIME), comparable with `date +%s%N` in the shell.
func wallNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Latency samples in nanoseconds, summarised as percentiles in microseconds.
struct Samples {
    private(set) var nanos: [UInt64] = []

    init(capacity: Int = 0) { nanos.reserveCapacity(capacity) }

    mutating func add(_ value: UInt64) { nanos.append(value) }

    var count: Int { nanos.count }

    /// Nearest-rank percentile in microseconds (0 when empty).
    func percentile(_ p: Double) -> Double {
        guard !nanos.isEmpty else { return 0 }
        let sorted = nanos.sorted()
        let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
        return Double(sorted[min(max(rank, 1), sorted.count) - 1]) / 1000
    }

    var maxMicros: Double { Double(nanos.max() ?? 0) / 1000 }

    var meanMicros: Double {
        guard !nanos.isEmpty else { return 0 }
        return Double(nanos.reduce(0, +)) / Double(nanos.count) / 1000
    }

    /// `prefix_p50_us=… prefix_p99_us=… prefix_max_us=…` for the result line.
    func fields(_ prefix: String = "") -> String {
        "\(prefix)n=\(count) \(prefix)p50_us=\(fmt(percentile(50))) \(prefix)p99_us=\(fmt(percentile(99))) \(prefix)max_us=\(fmt(maxMicros)) \(prefix)mean_us=\(fmt(meanMicros))"
    }
}

/// A number with at most one decimal, without Foundation's formatters.
func fmt(_ value: Double) -> String {
    if value >= 100 { return String(Int(value.rounded())) }
    let tenths = Int((value * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

/// Seconds with three decimals.
func secs(_ nanos: UInt64) -> String {
    let ms = Int((Double(nanos) / 1e6).rounded())
    let frac = String(ms % 1000)
    return "\(ms / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
}

/// Deterministic pseudo-random numbers (SplitMix64), so every run times the same key sequence.
struct SplitMix: RandomNumberGenerator {
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

/// Bench keys: `key:` and a 12-digit zero-padded number (the format of redis-benchmark's
/// `__rand_int__`), so byte order equals numeric order.
func benchKey(_ n: Int) -> [UInt8] {
    var key: [UInt8] = Array("key:".utf8)
    var digits = [UInt8](repeating: UInt8(ascii: "0"), count: 12)
    var v = n
    var i = 11
    while v > 0 && i >= 0 {
        digits[i] = UInt8(ascii: "0") + UInt8(v % 10)
        v /= 10
        i -= 1
    }
    key.append(contentsOf: digits)
    return key
}

/// The 100-byte value every benchmark writes (the same bytes run.sh hands redis-benchmark).
let benchValue: [UInt8] = Array(String(repeating: "v", count: 100).utf8)

/// The key timed puts use: even numbers exist after the fill (keys 0, 2, …, 2(n-1)); `fresh`
/// picks a random odd number, a new key landing at a random position in key order; otherwise a
/// random existing key is overwritten. New and overwritten keys alternate.
func timedKey(_ i: Int, existing n: Int, rng: inout SplitMix) -> (key: [UInt8], fresh: Bool) {
    let j = Int(rng.next() % UInt64(max(n, 1)))
    if i % 2 == 0 { return (benchKey(2 * j + 1), true) }
    return (benchKey(2 * j), false)
}

/// Fails the benchmark with a message on stderr and exit status 1.
func fail(_ message: String) -> Never {
    var text = "actorkv-bench: \(message)\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(1)
}

/// Prints one result line and flushes, so run.sh sees it even if a later step is killed.
func result(_ line: String) {
    print(line)
    fflush(nil)
}

/// Progress on stderr.
func note(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

/// A benchmark client that runs on a thread of its own.
protocol ClientThread: AnyObject {
    /// The client's whole run; it waits at the shared barrier first.
    func run()
}

/// Starts `run()` of each client on a thread of its own, waits at `barrier` (initialised for the
/// clients and the caller) until all are there, and joins them. Returns the monotonic time at
/// which they were released.
func runClients(_ clients: [any ClientThread], barrier: UnsafeMutablePointer<pthread_barrier_t>) -> UInt64 {
    final class Box { let client: any ClientThread; init(_ client: any ClientThread) { self.client = client } }
    var threads: [pthread_t] = []
    for client in clients {
        var thread = pthread_t()
        let status = pthread_create(&thread, nil, { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().client.run()
            return nil
        }, Unmanaged.passRetained(Box(client)).toOpaque())
        guard status == 0 else { fail("pthread_create: error \(status)") }
        threads.append(thread)
    }
    pthread_barrier_wait(barrier)
    let start = nowNanos()
    for thread in threads { pthread_join(thread, nil) }
    return start
}
