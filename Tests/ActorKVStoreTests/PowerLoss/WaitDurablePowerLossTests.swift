@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// WAITAOF's store call (``Store/writtenIsDurable(waiting:)``) under `--fsync no`, where nothing
/// else fsyncs a write: before its fsyncs a power loss may take acknowledged writes (the sweep
/// finds such a state, or this test would prove nothing), and once it has returned true every
/// state a power loss may leave (``CrashModel``) holds every write of both namespaces.
@Suite("Power loss around WAITAOF", .tags(.slow))
struct WaitDurablePowerLossTests {
    @Test("every write acknowledged before WAITAOF survives a power loss after it, under --fsync no")
    func durableOnceItReturns() async throws {
        let directory = TemporaryDirectory("pl-waitaof")
        let recorder = FileOperationRecorder()
        var expected: [String: NamespaceState] = [:]
        let (before, after): (Int, Int)
        do {
            let store = try await openStore(directory.data, PowerLossWorkload.options(.no, recorder: recorder))
            var random = SeededGenerator(seed: 3)
            for step in 0..<30 {
                let namespace = try await store.namespace(["jobs", "config"][step % 2])
                try await namespace.put(Array("k\(step % 9)".utf8), PowerLossWorkload.value(step, &random))
            }
            #expect(try await store.writtenIsDurable(waiting: false) == false, "nothing fsync'd the writes yet")
            before = recorder.count
            #expect(try await store.writtenIsDurable(waiting: true))
            after = recorder.count
            #expect(try await store.writtenIsDurable(waiting: false), "durable once it returned")
            for name in ["jobs", "config"] {
                let namespace = try #require(try await store.existingNamespace(name))
                expected[name] = PowerLossWorkload.state(of: await namespace.entriesWithLifetimes().entries)
            }
            _ = await store.close()
        }
        #expect(after > before, "it fsync'd")
        var lost = 0
        let checked = try await CrashSweep.forEachState(root: directory.path, trace: recorder.operations, from: before, through: after,
                                                        states: 200, seed: 9) { root, point, context in
            if try await !holdsEverything(root + "/data", expected, mustHold: point == after, context) { lost += 1 }
        }
        #expect(lost > 0, "of \(checked) states before WAITAOF's fsyncs were done, none lost a write: the sweep cannot tell")
    }

    /// Opens the data directory `path` and says whether every namespace holds what `expected`
    /// says; with `mustHold`, expects it to.
    private func holdsEverything(_ path: String, _ expected: [String: NamespaceState], mustHold: Bool, _ context: String) async throws -> Bool {
        var options = StoreOptions(durability: .always, compaction: CompactionPolicy(interval: 0))
        options.log = { _ in }
        let store = try Store(directory: path, options: options)
        let unavailable = await store.openAll()
        #expect(!mustHold || unavailable.isEmpty, "\(unavailable): \(context)")
        var whole = unavailable.isEmpty
        for (name, state) in expected.sorted(by: { $0.key < $1.key }) where whole {
            let found = PowerLossWorkload.state(of: try await store.existingNamespace(name)?.entriesWithLifetimes().entries ?? [])
            if found != state {
                whole = false
                #expect(!mustHold, "\(name): \(CrashCheck.difference(expected: state, found: found)); \(context)")
            }
        }
        _ = await store.close()
        return whole
    }
}
