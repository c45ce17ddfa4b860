@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// A rename cut by a power loss (protocol.md, "RENAME, RENAMENX"): at every point of what
/// ``Store/renameNamespace(_:to:replacing:)`` does to the disk, every state a power loss may
/// leave there (``CrashModel``) opens to the rename not begun (`jobs` and `done` as they were)
/// or done (`done` holding what `jobs` held, every key at one version after all of theirs,
/// `jobs` gone), and to done in every state once it has returned; nothing of it is left in the
/// data directory once the store has opened. The third namespace is whole throughout. A copy
/// (``Store/copyNamespace(_:to:replacing:)``, protocol.md "COPY") the same, but that `jobs`
/// stays as it was throughout.
@Suite("Power loss during a rename or a copy", .tags(.slow))
struct RenamePowerLossTests {
    /// How many crash states are opened, spread over the rename's trace.
    static let states = 300

    @Test("a namespace renamed (or copied) at the moment of a power loss is renamed wholly or not at all, and wholly in every state once the rename returned",
          arguments: [false, true])
    func wholeOrNot(copying: Bool) async throws {
        let directory = TemporaryDirectory(copying ? "pl-copy" : "pl-rename")
        let recorder = FileOperationRecorder()
        var before: [String: NamespaceState] = [:]
        let (start, end): (Int, Int)
        do {
            let store = try await openStore(directory.data, PowerLossWorkload.options(.always, recorder: recorder))
            var random = SeededGenerator(seed: 17)
            for step in 0..<45 {
                let namespace = try await store.namespace(["jobs", "done", "config"][step % 3])
                if step == 21 { try await namespace.compact() }
                try await namespace.put(Array("k\(step % 5)".utf8), PowerLossWorkload.value(step, &random))
            }
            for name in await store.namespaceNames() {
                let namespace = try #require(try await store.existingNamespace(name))
                before[name] = PowerLossWorkload.state(of: await namespace.entriesWithLifetimes().entries)
            }
            start = recorder.count
            if copying {
                #expect(try await store.copyNamespace("jobs", to: "done", replacing: true) == .copied)
            } else {
                #expect(try await store.renameNamespace("jobs", to: "done", replacing: true) == .renamed)
            }
            end = recorder.count
            _ = await store.close()
        }
        let highest = before.values.flatMap(\.values).map(\.version).max() ?? 0
        var renamed = 0
        let checked = try await CrashSweep.forEachState(root: directory.path, trace: recorder.operations, from: start, through: end,
                                                        states: Self.states, seed: 7) { root, point, context in
            if try await renamedOrNot(root + "/data", before, after: highest, copying: copying, mustBeRenamed: point == end, context) { renamed += 1 }
        }
        #expect(renamed > 0 && renamed < checked, "both outcomes were seen: \(renamed) of \(checked) states have the rename done")
    }

    /// Opens the data directory `path`: `config` as it was; `jobs` and `done` as they were, or
    /// (returns true) `done` holding `jobs`'s keys and values, each at one version after
    /// `after`, and `jobs` gone (`copying`: `jobs` as it was); no journal, staged or hidden
    /// directory left.
    private func renamedOrNot(_ path: String, _ before: [String: NamespaceState], after highest: UInt64, copying: Bool, mustBeRenamed: Bool,
                              _ context: String) async throws -> Bool {
        var options = StoreOptions(durability: .always, compaction: CompactionPolicy(interval: 0))
        options.log = { _ in }
        let store = try Store(directory: path, options: options)
        let unavailable = await store.openAll()
        #expect(unavailable.isEmpty, "\(unavailable): \(context)")
        var found: [String: NamespaceState] = [:]
        for name in await store.namespaceNames() {
            let namespace = try #require(try await store.existingNamespace(name))
            found[name] = PowerLossWorkload.state(of: await namespace.entriesWithLifetimes().entries)
        }
        _ = await store.close()
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: path)
            .filter { $0.hasPrefix(Store.removedPrefix) || $0.hasPrefix(RenameJournal.stagedPrefix) || $0 == RenameJournal.fileName }
        #expect(leftovers.isEmpty, "\(leftovers): \(context)")
        #expect(found["config"] == before["config"], "config: \(context)")
        if copying {
            #expect(found["jobs"] == before["jobs"], "the source of a copy is as it was: \(context)")
            if found["done"] == before["done"] {
                #expect(!mustBeRenamed, "the copy returned, yet done is as before: \(context)")
                return false
            }
        } else if found["jobs"] != nil {
            #expect(!mustBeRenamed, "the rename returned, yet jobs is there: \(context)")
            #expect(found["jobs"] == before["jobs"] && found["done"] == before["done"], "not renamed, but not as before: \(context)")
            return false
        }
        let done = found["done"] ?? [:]
        let versions = Set(done.values.map(\.version))
        #expect(versions.count == 1 && versions.first! > highest, "renamed: \(versions) after \(highest): \(context)")
        #expect(done.mapValues(\.value) == before["jobs"]!.mapValues(\.value), "renamed: done holds jobs's keys: \(context)")
        return true
    }
}
