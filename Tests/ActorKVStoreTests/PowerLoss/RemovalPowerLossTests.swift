@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

/// A removal cut short by a power loss (protocol.md, "UNLINK"): at every point of what
/// ``Store/removeNamespace(_:)`` does to the disk, every state a power loss may leave there
/// (``CrashModel``) holds the namespace whole, as it was, or not at all; from the moment its
/// followers are sent the change deleting its keys (the store logs the removal then), and so
/// once the removal has returned, not at all. When it is gone, the name used again numbers its writes after every
/// version of its earlier life, and nothing of it is left in the data directory once the store
/// has opened. The other namespace is whole throughout.
@Suite("Power loss during a removal", .tags(.slow))
struct RemovalPowerLossTests {
    /// How many crash states are opened, spread over the removal's trace.
    static let states = 300

    @Test("a namespace removed at the moment of a power loss is whole or gone, and gone in every state once the removal returned; its name numbers on after it")
    func wholeOrGone() async throws {
        let directory = TemporaryDirectory("pl-remove")
        let recorder = FileOperationRecorder()
        var expected: [String: (sequence: UInt64, state: NamespaceState)] = [:]
        let (start, end): (Int, Int)
        let told = Mutex<Int?>(nil)
        do {
            var options = PowerLossWorkload.options(.always, recorder: recorder)
            let log = options.log
            options.log = { line in
                if line.hasPrefix("namespace jobs: removed") { told.withLock { $0 = recorder.count } }
                log(line)
            }
            let store = try await openStore(directory.data, options)
            var random = SeededGenerator(seed: 11)
            for step in 0..<40 {
                let namespace = try await store.namespace(["jobs", "config"][step % 2])
                let key = Array("k\(step % 7)".utf8), value = PowerLossWorkload.value(step, &random)
                if step == 20 { try await namespace.compact() }
                if step % 5 == 0 { _ = try await namespace.increment(Array("n".utf8), by: 2) } else { try await namespace.put(key, value) }
            }
            for name in await store.namespaceNames() {
                let shown = try await #require(try await store.existingNamespace(name)).entriesWithLifetimes()
                expected[name] = (shown.sequence, PowerLossWorkload.state(of: shown.entries))
            }
            start = recorder.count
            #expect(try await store.removeNamespace("jobs"))
            end = recorder.count
            _ = await store.close()
        }
        let toldAt = try #require(told.withLock { $0 }, "the removal was logged")
        var gone = 0
        let checked = try await CrashSweep.forEachState(root: directory.path, trace: recorder.operations, from: start, through: end,
                                                        states: Self.states, seed: 5) { root, point, context in
            if try await expectWholeOrGone(root + "/data", expected, context) {
                gone += 1
            } else {
                #expect(point < toldAt, "followers were told of the removal at trace point \(toldAt), yet the namespace is back: \(context)")
            }
        }
        #expect(gone > 0 && gone < checked, "both outcomes were seen: \(gone) of \(checked) states have the namespace gone")
    }

    /// Opens the data directory `path`: `config` is as expected; `jobs` is too, or is gone
    /// (returns true then), without a trace in the directory, and a write to the name gets a
    /// version after every one it had.
    private func expectWholeOrGone(_ path: String, _ expected: [String: (sequence: UInt64, state: NamespaceState)],
                                   _ context: String) async throws -> Bool {
        var options = StoreOptions(durability: .always, compaction: CompactionPolicy(interval: 0))
        options.log = { _ in }
        let store = try Store(directory: path, options: options)
        let unavailable = await store.openAll()
        #expect(unavailable.isEmpty, "\(unavailable): \(context)")
        let names = await store.namespaceNames()
        #expect(names == ["config", "jobs"] || names == ["config"], "\(names): \(context)")
        for name in names {
            let found = try await #require(try await store.existingNamespace(name)).entriesWithLifetimes()
            #expect(found.sequence == expected[name]!.sequence, "\(name): \(context)")
            let state = PowerLossWorkload.state(of: found.entries)
            #expect(state == expected[name]!.state, "\(name): \(CrashCheck.difference(expected: expected[name]!.state, found: state)); \(context)")
        }
        let isGone = !names.contains("jobs")
        if isGone {
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: path).filter { $0.hasPrefix(Store.removedPrefix) || $0.hasSuffix(".tmp") }
            #expect(leftovers.isEmpty, "\(leftovers): \(context)")
            let version = try await store.namespace("jobs").put(Array("k0".utf8), Array("again".utf8), ifVersion: 0)
            #expect(version.map { $0 > expected["jobs"]!.sequence } == true, "\(String(describing: version)): \(context)")
        }
        _ = await store.close()
        return isGone
    }
}
