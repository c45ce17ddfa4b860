@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// ``Store/renameNamespace(_:to:replacing:)``: the source's keys, values, lifetimes and own
/// deadline become the target's, each at one new version after every version either name had;
/// the source is gone and the target's old keys with it; followers of both are told as after a
/// removal; a namespace holding keys of a connection is refused; a rename cut short at the
/// store's start is finished. (RENAME over the wire: ActorKVServerTests' RenameServerTests; a
/// power loss at every step: RenamePowerLossTests.)
@Suite("Renaming a namespace")
struct NamespaceRenameTests {
    @Test("the source's keys, lifetimes and deadline become the target's, the target's own are dropped, each key at a version after every earlier one; it lasts a restart")
    func renames() async throws {
        let dir = TemporaryDirectory("rename")
        defer { dir.remove() }
        let deadline = WallClock.milliseconds() + 3_600_000
        var oldVersions: [UInt64] = []
        try await withStore(dir.data) { store in
            let a = try await store.namespace("a")
            try await a.put(b("k"), b("v"))
            try await a.put(b("n"), b("1"))
            #expect(await store.execute([.setTimeToLive(key: b("k"), milliseconds: 600_000)], inNamespace: "a").outcomes == [.integer(1)])
            #expect(await store.execute([.setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: deadline)))], inNamespace: "a").outcomes == [.integer(1)])
            let t = try await store.namespace("t")
            for i in 0..<6 { try await t.put(b("old\(i % 2)"), b("x\(i)")) }
            try await t.put(b("k"), b("target's"))
            oldVersions = [try #require(await a.versioned(b("k"))).version, try #require(await t.versioned(b("k"))).version]
            #expect(try await store.renameNamespace("a", to: "t", replacing: true) == .renamed)
            #expect(await store.namespaceNames() == ["t"])
            #expect(try await store.existingNamespace("a") == nil)
            try await expectRenamed(store, deadline: deadline, after: oldVersions)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data).sorted() == [".lock", SequenceFloor.fileName, "t"])
        }
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["t"], "the rename lasts")
            try await expectRenamed(store, deadline: deadline, after: oldVersions)
            let version = try #require(try await store.namespace("a").put(b("k"), b("new"), ifVersion: 0))
            #expect(version > oldVersions.max()!, "the source's name numbers on after it")
        }
    }

    /// `t` holds what `a` held: `k` (with its deadline) and `n`, and the namespace's deadline;
    /// every key at one version, after `earlier`; old versions guard nothing.
    private func expectRenamed(_ store: Store, deadline: UInt64, after earlier: [UInt64]) async throws {
        let t = try #require(try await store.existingNamespace("t"))
        let entries = await t.entriesWithLifetimes().entries
        #expect(entries.map { String(decoding: $0.key, as: UTF8.self) } == ["", "k", "n"], "the namespace's deadline, then its keys; t's own are gone")
        #expect(entries[0].lifetime.deadline == deadline)
        #expect(entries[1].value == b("v") && entries[1].lifetime.deadline != 0)
        #expect(entries[2].value == b("1") && entries[2].lifetime.isNone)
        let versions = Set(entries.dropFirst().map(\.version))
        #expect(versions.count == 1 && versions.first! > earlier.max()!, "\(versions) after \(earlier)")
        for old in earlier { #expect(try await t.put(b("k"), b("w"), ifVersion: old) == nil, "version \(old) guards nothing") }
    }

    @Test("RENAMENX (not replacing) leaves a target that holds a key; an emptied target, or none, is taken")
    func notReplacing() async throws {
        let dir = TemporaryDirectory("rename-nx")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
            #expect(try await store.renameNamespace("a", to: "t", replacing: false) == .targetExists)
            #expect(await store.namespaceNames() == ["a", "t"])
            #expect(try await store.namespace("a").get(b("k")) == b("v"), "nothing changed")
            #expect(try await store.namespace("t").get(b("x")) == b("1"))
            _ = try await store.namespace("t").delete([b("x")])
            #expect(try await store.renameNamespace("a", to: "t", replacing: false) == .renamed, "an emptied namespace holds no key")
            #expect(try await store.renameNamespace("t", to: "fresh", replacing: false) == .renamed)
            #expect(await store.namespaceNames() == ["fresh"])
            #expect(try await store.namespace("fresh").get(b("k")) == b("v"))
        }
    }

    @Test("a source that does not exist, holds no key, or whose keys all expired is no source; the same name twice changes nothing")
    func noSource() async throws {
        let dir = TemporaryDirectory("rename-none")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            #expect(try await store.renameNamespace("nosuch", to: "t", replacing: true) == .noSource)
            try await store.namespace("emptied").put(b("k"), b("v"))
            _ = try await store.namespace("emptied").delete([b("k")])
            #expect(try await store.renameNamespace("emptied", to: "t", replacing: true) == .noSource)
            try await store.namespace("passed").put(b("k"), b("v"))
            #expect(await store.execute([.setTimeToLive(key: b("k"), milliseconds: 1)], inNamespace: "passed").outcomes == [.integer(1)])
            try await Task.sleep(nanoseconds: 20_000_000)
            #expect(try await store.renameNamespace("passed", to: "t", replacing: true) == .noSource)
            try await store.namespace("same").put(b("k"), b("v"))
            #expect(try await store.renameNamespace("emptied", to: "same", replacing: false) == .noSource,
                    "the source is judged first, as Redis does, even when the target holds a key")
            #expect(try await store.renameNamespace("same", to: "same", replacing: true) == .renamed)
            #expect(try await store.renameNamespace("same", to: "same", replacing: false) == .targetExists)
            #expect(try await store.namespace("same").get(b("k")) == b("v"))
            #expect(await store.namespaceNames().contains("t") == false)
            #expect(await storeError { _ = try await store.renameNamespace("same", to: "../x", replacing: true) }?.code == .invalidNamespace)
        }
    }

    @Test("a namespace holding keys of a connection is refused, nothing changed, both names usable")
    func ephemeralRefused() async throws {
        let dir = TemporaryDirectory("rename-ephemeral")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let lock = LifetimePut(key: b("lock"), value: b("me"), owner: 7, ifVersion: 0)
            _ = await store.execute([.lifetimePut(lock)], inNamespace: "locks")
            #expect(try await store.namespace("locks").get(b("lock")) == b("me"))
            try await store.namespace("t").put(b("x"), b("1"))
            let error = await storeError { _ = try await store.renameNamespace("locks", to: "t", replacing: true) }
            #expect(error?.code == .invalidArgument && error?.message.contains("keys of a connection") == true, "\(String(describing: error))")
            #expect(try await store.namespace("locks").get(b("lock")) == b("me"))
            #expect(try await store.namespace("t").get(b("x")) == b("1"), "the target, detached first, opens again from its files")
            try await store.namespace("t").put(b("y"), b("2"))
            #expect(await store.namespaceNames() == ["locks", "t"])
        }
    }

    @Test("followers of both names get the change deleting their keys, then their streams end; resuming into the target's new life is COMPACTED")
    func followers() async throws {
        let dir = TemporaryDirectory("rename-follow")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.everysec)) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
            try await store.namespace("t").put(b("y"), b("2"))
            let source = try await store.follow("a", from: .now), target = try await store.follow("t", from: .now)
            let waiting = try await store.follow("fresh", from: .now)
            #expect(try await store.renameNamespace("a", to: "t", replacing: true) == .renamed)
            for (start, deleted, name) in [(source, ["k"], "a"), (target, ["x", "y"], "t")] {
                let feed = try #require(start.feed as? ChangeFeed)
                guard case .changes(let changes) = feed.read(after: start.sequence, limit: 10) else {
                    Issue.record("\(name): no change for the rename")
                    continue
                }
                #expect(changes.count == 1 && changes[0].mutations == deleted.map { .delete(key: b($0)) }, "\(name): \(changes)")
                #expect(feed.endSequence == changes.last?.sequence, "\(name)")
                #expect(feed.endReason == (name == "a" ? .renamed(to: "t") : .replacedByRename(of: "a")), "\(name): \(String(describing: feed.endReason))")
                feed.removeFollower()
                let resumeFrom = changes[0].sequence
                let error = await storeError { _ = try await store.follow(name, from: .sequence(resumeFrom)) }
                #expect(error?.code == .compacted, "\(name): resuming after the rename's change: \(String(describing: error))")
            }
            #expect(try await store.renameNamespace("t", to: "fresh", replacing: true) == .renamed)
            let ended = try #require(waiting.feed as? ChangeFeed)
            #expect(ended.endSequence != nil, "a follower of a name that did not exist ends too")
            let error = await storeError { _ = try await store.follow("fresh", from: .sequence(ended.endSequence!)) }
            #expect(error?.code == .compacted, "and resuming it is COMPACTED: \(String(describing: error))")
            let snapshot = try await store.follow("fresh", from: .snapshot)
            #expect(snapshot.snapshot?.map.count == 1, "a SNAPSHOT of the new life holds its key")
        }
    }

    @Test("renames crossing each other (a to b while b to a) both finish, one after the other")
    func crossing() async throws {
        let dir = TemporaryDirectory("rename-cross")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("k"), b("A"))
            try await store.namespace("b").put(b("k"), b("B"))
            async let one = store.renameNamespace("a", to: "b", replacing: true)
            async let two = store.renameNamespace("b", to: "a", replacing: true)
            let outcomes = try await [one, two]
            #expect(outcomes.contains(.renamed), "\(outcomes)")
            let names = await store.namespaceNames()
            #expect(names.count == 1, "\(names): the second moved the first's result, or found its source gone")
            let left = try #require(names.first)
            #expect(try await store.namespace(left).count() == 1)
        }
    }

    @Test("a rename cut short after its journal is finished at the next start (and --check sees it finished); staged files without a journal are deleted; a journal that does not read is reported")
    func journal() async throws {
        let dir = TemporaryDirectory("rename-journal")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
        }
        // As a server stopped after the journal: the staged directory is a's files under the new name.
        let staged = RenameJournal.stagedPrefix + "t-1"
        try FileManager.default.copyItem(atPath: dir.data + "/a", toPath: dir.data + "/" + staged)
        try FileManager.default.createDirectory(atPath: dir.data + "/" + RenameJournal.stagedPrefix + "t-2", withIntermediateDirectories: false)
        try RenameJournal(source: "a", target: "t", staged: staged).write(directory: dir.data, system: .plain)
        // actorkvd --check sees the rename as the next start will have finished it, and changes nothing.
        let checked = try Store.check(directory: dir.data)
        #expect(checked.map(\.name) == ["t"] && checked.first?.keys == 1 && checked.first?.isReadable == true, "\(checked.map(\.summary))")
        #expect(FileManager.default.fileExists(atPath: dir.data + "/" + RenameJournal.fileName) && FileManager.default.fileExists(atPath: dir.data + "/a"))
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["t"])
            let t = try await store.namespace("t")
            #expect(await t.get(b("k")) == b("v"))
            #expect(await t.get(b("x")) == nil)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data).sorted() == [".lock", "t"], "journal, staged and hidden directories gone")
        try "actorkv renames namespace a to\n".write(toFile: dir.data + "/" + RenameJournal.fileName, atomically: false, encoding: .utf8)
        let error = storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }
        #expect(error?.code == .corrupt && error?.message.contains(RenameJournal.fileName) == true, "\(String(describing: error))")
    }

    @Test("the journal's text reads back, and nothing else does")
    func journalText() {
        let journal = RenameJournal(source: "jobs:1", target: "jobs", staged: ".renaming-jobs-1f")
        #expect(journal.text == "actorkv renames namespace jobs:1 to jobs from .renaming-jobs-1f\n")
        #expect(RenameJournal.parse(Array(journal.text.utf8)) == journal)
        for bad in ["", "actorkv renames namespace a to b from .renaming-b-1", "actorkv renames namespace a to a from .renaming-a-1\n",
                    "actorkv renames namespace a to b from b\n", "actorkv renames namespace a to ../b from .renaming-b-1\n",
                    "actorkv renames namespace a to b from .renaming-b/1\n", "actorkv renames namespace a  to b from .renaming-b-1\n"] {
            #expect(RenameJournal.parse(Array(bad.utf8)) == nil, "\(bad.debugDescription)")
        }
    }
}
