@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// A backup cut short by a power loss (protocol.md, "BACKUP": "`path` never holds part of a
/// backup"): at every point of what ``Store/backup(to:)`` does to the disk, every state a power
/// loss may leave there (``CrashModel``) holds either no backup at the target or the whole of it,
/// which opens to exactly the namespaces as they were copied; and once `backup` has returned,
/// the whole of it in every state.
@Suite("Power loss during a backup", .tags(.slow))
struct BackupPowerLossTests {
    /// How many crash states are opened, spread over the backup's trace.
    static let states = 400

    @Test("a backup cut by a power loss at any point is absent or whole, and whole in every state once it has returned")
    func absentOrWhole() async throws {
        let directory = TemporaryDirectory("pl-backup")
        let recorder = FileOperationRecorder()
        let target = directory.path + "/copy"
        var expected: [String: (sequence: UInt64, state: NamespaceState)] = [:]
        let (start, end): (Int, Int)
        do {
            let store = try await openStore(directory.data, PowerLossWorkload.options(.always, recorder: recorder))
            var random = SeededGenerator(seed: 42)
            for step in 0..<60 {
                let namespace = try await store.namespace(["config", "jobs", "big"][step % 3])
                let key = Array("k\(step % 11)".utf8), value = PowerLossWorkload.value(step, &random)
                if step == 30 { try await namespace.compact() }
                switch step % 4 {
                case 0: try await PowerLossWorkload.acknowledge(namespace.execute([.lifetimePut(LifetimePut(key: key, value: value, milliseconds: 3_600_000))]))
                case 1: _ = try await namespace.increment(Array("n".utf8), by: 3)
                default: try await namespace.put(key, value)
                }
            }
            for name in await store.namespaceNames() {
                let shown = try await #require(try await store.existingNamespace(name)).entriesWithLifetimes()
                expected[name] = (shown.sequence, PowerLossWorkload.state(of: shown.entries))
            }
            start = recorder.count
            let summary = try await store.backup(to: target)
            end = recorder.count
            #expect(summary.namespaces.map(\.name) == expected.keys.sorted())
            _ = await store.close()
        }
        var whole = 0
        let checked = try await CrashSweep.forEachState(root: directory.path, trace: recorder.operations, from: start, through: end,
                                                        states: Self.states, seed: 7) { root, point, context in
            guard FileManager.default.fileExists(atPath: root + "/copy") else {
                #expect(point < end, "the backup had returned, yet it is gone: \(context)")
                return
            }
            whole += 1
            try await expectWhole(root + "/copy", expected, context)
        }
        #expect(whole > 0 && whole < checked, "both outcomes were seen: \(whole) of \(checked) states hold the backup")
    }

    /// The backup at `path` opens to exactly `expected`: the same namespaces, each at its sequence
    /// with the same keys, values, versions and deadlines.
    private func expectWhole(_ path: String, _ expected: [String: (sequence: UInt64, state: NamespaceState)], _ context: String) async throws {
        var options = StoreOptions(durability: .always, compaction: CompactionPolicy(interval: 0))
        options.log = { _ in }
        let store = try Store(directory: path, options: options)
        let unavailable = await store.openAll()
        #expect(unavailable.isEmpty, "\(unavailable): \(context)")
        #expect(await store.namespaceNames() == expected.keys.sorted(), "\(context)")
        for (name, wanted) in expected {
            guard let namespace = try await store.existingNamespace(name) else { continue }
            let found = await namespace.entriesWithLifetimes()
            #expect(found.sequence == wanted.sequence, "\(name): \(context)")
            let state = PowerLossWorkload.state(of: found.entries)
            #expect(state == wanted.state, "\(name): \(CrashCheck.difference(expected: wanted.state, found: state)); \(context)")
        }
        _ = await store.close()
    }
}
