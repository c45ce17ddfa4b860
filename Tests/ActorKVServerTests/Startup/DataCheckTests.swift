import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// `actorkvd --check`: the command line that asks for it and the report it prints (the binary's
/// exit codes and output on real files are in Tests/interop/test_server_cli.sh).
@Suite("Offline data check")
struct DataCheckTests {
    @Test("--check with --data-dir in either order asks for a check of that directory; other flags still parse")
    func parsesCheck() throws {
        for arguments in [["--check", "--data-dir", "d1"], ["--data-dir", "d1", "--check"], ["--check", "--fsync", "always", "--data-dir", "d1"]] {
            guard case .check(let configuration) = try ServerConfiguration.parse(arguments) else {
                Issue.record("\(arguments) did not ask for a check")
                continue
            }
            #expect(configuration.dataDirectory == "d1")
        }
        guard case .run = try ServerConfiguration.parse(["--data-dir", "d1"]) else {
            Issue.record("without --check the server runs")
            return
        }
        #expect(throws: UsageError.self) { try ServerConfiguration.parse(["--check", "--fsync", "sometimes"]) }
    }

    @Test("the report: a line per namespace, the verdict last, exit 0 only when every namespace would open")
    func report() async throws {
        let dir = TemporaryDirectory()
        let data = dir.path + "/data"
        let empty = DataCheck.run(directory: dir.path)
        #expect(empty.lines == ["no namespaces in \(dir.path)"] && empty.error == nil && empty.status == 0)

        let busy = try await Self.fill(data)
        #expect(busy.status == 1 && busy.lines.isEmpty)
        #expect(busy.error?.hasPrefix("actorkvd: cannot check: data directory \(data) is in use by process") == true, "\(busy)")

        // The store is closed, its lock released; but a process another test forks meanwhile
        // holds the lock's open file until it execs (a moment, longer on a loaded machine).
        var healthy = DataCheck.run(directory: data)
        for _ in 0..<50 where healthy.error?.contains("is in use by") == true {
            try await Task.sleep(for: .milliseconds(100))
            healthy = DataCheck.run(directory: data)
        }
        #expect(healthy.status == 0 && healthy.error == nil, "\(healthy)")
        #expect(healthy.lines.count == 3)
        #expect(healthy.lines.first?.hasPrefix("namespace a: ok: 2 keys, last sequence 2") == true, "\(healthy.lines)")
        #expect(healthy.lines.dropFirst().first?.hasPrefix("namespace b: ok: 1 keys") == true, "\(healthy.lines)")
        #expect(healthy.lines.last == "2 namespace(s) in \(data): all would open")

        // A byte changed in the first of namespace a's two records.
        let log = data + "/a/000001.log"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: log))
        bytes[LogSegmentHeader.length + 12] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: log))
        let damaged = DataCheck.run(directory: data)
        #expect(damaged.status == 1 && damaged.error == nil)
        #expect(damaged.lines.first?.hasPrefix("namespace a: UNAVAILABLE: \(log) is corrupt at byte offset 8") == true, "\(damaged.lines)")
        #expect(damaged.lines.last == "2 namespace(s) in \(data): 1 would be refused")
    }

    @Test("a log segment removed from between two kept ones: the report names the gap and exits 1, as README shows")
    func gapInTheLog() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let data = dir.path + "/data"
        var options = StoreOptions()
        options.segmentSealBytes = 0   // a segment per compaction
        let store = try Store(directory: data, options: options)
        let orders = try await store.namespace("orders")
        for i in 1...6 {
            try await orders.put(Array("k".utf8), Array("\(i)".utf8))
            if i % 2 == 0 { try await orders.compact() }   // segments of changes 1-2, 3-4, 5-6, and the empty active one
        }
        await store.close()
        let intact = DataCheck.run(directory: data)
        #expect(intact.status == 0, "\(intact.lines) \(String(describing: intact.error))")
        try FileManager.default.removeItem(atPath: data + "/orders/000002.log")
        let report = DataCheck.run(directory: data)
        #expect(report.status == 1 && report.error == nil)
        let ns = data + "/orders"
        #expect(report.lines == [
            "namespace orders: UNAVAILABLE: \(ns): the log has a gap between \(ns)/000001.log (its last change is sequence 2) and \(ns)/000003.log (its first is sequence 5): log segment 000002.log is missing, and changes 3 through 4 with it; the snapshot (through sequence 6) holds what the missing changes did, so the data is whole, but CHANGES … FROM cannot be served across the gap; the files were left untouched (restore what is missing, or, to give up the history before the gap, remove \(ns)/000001.log and the log segments before it)",
            "1 namespace(s) in \(data): 1 would be refused",
        ])
    }

    /// Writes two namespaces through a store and returns the report of a check made while the
    /// store holds the directory. The store (and its lock) is gone when this returns.
    private static func fill(_ data: String) async throws -> DataCheck.Report {
        let store = try Store(directory: data)
        try await store.namespace("b").put(Array("k".utf8), Array("v".utf8))
        try await store.namespace("a").put(Array("k".utf8), Array("v".utf8))
        try await store.namespace("a").put(Array("k2".utf8), Array("v".utf8))
        let report = DataCheck.run(directory: data)
        await store.close()
        return report
    }
}
