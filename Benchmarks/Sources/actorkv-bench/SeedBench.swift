import Foundation

/// The item the seed baseline stores: an id like ActorKV's bench keys and a 100-byte value.
struct BenchItem: Codable, Identifiable, Sendable {
    var id: String
    var value: String
}

enum SeedBench {
    /// `seed-latency`: a `SeedLocalRepository` holding `items` items (its file written directly,
    /// then loaded by the repository's own init), then `saves` timed saves alternating new and
    /// overwritten items.
    static func saveLatency(directory: String, items n: Int, saves: Int) async throws {
        let dir = URL(fileURLWithPath: directory, isDirectory: true)
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let value = String(decoding: benchValue, as: UTF8.self)
        func id(_ k: Int) -> String { String(decoding: benchKey(k), as: UTF8.self) }

        // The file as n saves would have left it (saving n items one by one would cost O(n²)).
        let t0 = nowNanos()
        let initial = (0..<n).map { BenchItem(id: id(2 * $0), value: value) }
        try JSONEncoder().encode(initial).write(to: dir.appendingPathComponent("data.json"), options: .atomic)
        let t1 = nowNanos()
        let repo = SeedLocalRepository<BenchItem>(directory: dir)
        let t2 = nowNanos()
        let loaded = await repo.loadAll().count
        guard loaded == n else { fail("seed: loaded \(loaded) items, expected \(n)") }

        var rng = SplitMix(seed: 42)
        var all = Samples(capacity: saves)
        for i in 0..<saves {
            let (key, _) = timedKey(i, existing: n, rng: &rng)
            let item = BenchItem(id: String(decoding: key, as: UTF8.self), value: value)
            let s = nowNanos()
            try await repo.save(item)
            all.add(nowNanos() - s)
        }
        var st = stat()
        let size = stat(dir.appendingPathComponent("data.json").path, &st) == 0 ? Int(st.st_size) : -1
        result("seed items=\(n) \(all.fields()) file_bytes=\(size) write_initial_s=\(secs(t1 - t0)) load_s=\(secs(t2 - t1))")
    }
}
