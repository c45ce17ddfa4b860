@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// ``Store/copyNamespace(_:to:replacing:)``: the target holds the source's keys, values,
/// lifetimes and own deadline as of one moment, each at one new version after every version
/// the target had; the source is unchanged; the target's old keys are dropped and its
/// followers told as after a removal; a namespace holding keys of a connection is refused; a
/// copy cut short at the store's start is finished. (COPY over the wire: ActorKVServerTests'
/// CopyServerTests; a power loss at every step: RenamePowerLossTests.)
@Suite("Copying a namespace")
struct NamespaceCopyTests {
    @Test("the target holds the source's keys, lifetimes and deadline, its own dropped, each key at a version after its earlier ones; the source is unchanged; the two go their own ways; it lasts a restart")
    func copies() async throws {
        let dir = TemporaryDirectory("copy")
        defer { dir.remove() }
        let deadline = WallClock.milliseconds() + 3_600_000
        var sourceVersions: [UInt64] = [], targetVersion: UInt64 = 0
        try await withStore(dir.data) { store in
            let a = try await store.namespace("a")
            try await a.put(b("k"), b("v"))
            try await a.put(b("n"), b("1"))
            #expect(await store.execute([.setTimeToLive(key: b("k"), milliseconds: 600_000)], inNamespace: "a").outcomes == [.integer(1)])
            #expect(await store.execute([.setNamespaceDeadline(NamespaceDeadline(.at(milliseconds: deadline)))], inNamespace: "a").outcomes == [.integer(1)])
            let t = try await store.namespace("t")
            for i in 0..<6 { try await t.put(b("old\(i % 2)"), b("x\(i)")) }
            targetVersion = try #require(await t.versioned(b("old1"))).version
            sourceVersions = [try #require(await a.versioned(b("k"))).version, try #require(await a.versioned(b("n"))).version]
            #expect(try await store.copyNamespace("a", to: "t", replacing: true) == .copied)
            #expect(await store.namespaceNames() == ["a", "t"])
            try await expectCopied(store, deadline: deadline, after: targetVersion, sourceVersions: sourceVersions)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data).sorted() == [".lock", SequenceFloor.fileName, "a", "t"])
        }
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["a", "t"], "the copy lasts")
            try await expectCopied(store, deadline: deadline, after: targetVersion, sourceVersions: sourceVersions)
            // Copy-on-write: a write to either is not the other's.
            try await store.namespace("a").put(b("n"), b("2"))
            try await store.namespace("t").put(b("k"), b("t's"))
            #expect(try await store.namespace("t").get(b("n")) == b("1"))
            #expect(try await store.namespace("a").get(b("k")) == b("v"))
        }
    }

    /// `t` holds what `a` holds: `k` (with its deadline) and `n`, and the namespace's deadline;
    /// every key at one version, after `earlier`, which guards nothing; `a` as it was.
    private func expectCopied(_ store: Store, deadline: UInt64, after earlier: UInt64, sourceVersions: [UInt64]) async throws {
        let t = try #require(try await store.existingNamespace("t"))
        let entries = await t.entriesWithLifetimes().entries
        #expect(entries.map { String(decoding: $0.key, as: UTF8.self) } == ["", "k", "n"], "the namespace's deadline, then its keys; t's own are gone")
        #expect(entries[0].lifetime.deadline == deadline)
        #expect(entries[1].value == b("v") && entries[1].lifetime.deadline != 0)
        #expect(entries[2].value == b("1") && entries[2].lifetime.isNone)
        let versions = Set(entries.dropFirst().map(\.version))
        #expect(versions.count == 1 && versions.first! > earlier, "\(versions) after \(earlier)")
        let a = try #require(try await store.existingNamespace("a"))
        let source = await a.entriesWithLifetimes().entries
        #expect(source.map { String(decoding: $0.key, as: UTF8.self) } == ["", "k", "n"] && source[0].lifetime.deadline == deadline,
                "the source keeps its keys and deadline")
        #expect(source.dropFirst().map(\.version) == sourceVersions, "and its versions")
        #expect(try await t.put(b("n"), b("w"), ifVersion: earlier) == nil, "the target's old version guards nothing")
    }

    @Test("without replacing, a target that holds a key is left as it is; an emptied target, or none, is taken")
    func notReplacing() async throws {
        let dir = TemporaryDirectory("copy-nx")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
            #expect(try await store.copyNamespace("a", to: "t", replacing: false) == .targetExists)
            #expect(try await store.namespace("t").get(b("x")) == b("1"), "nothing changed")
            #expect(try await store.namespace("t").get(b("k")) == nil)
            _ = try await store.namespace("t").delete([b("x")])
            #expect(try await store.copyNamespace("a", to: "t", replacing: false) == .copied, "an emptied namespace holds no key")
            #expect(try await store.copyNamespace("a", to: "fresh", replacing: false) == .copied)
            #expect(await store.namespaceNames() == ["a", "fresh", "t"])
            for name in ["a", "fresh", "t"] { #expect(try await store.namespace(name).get(b("k")) == b("v"), "\(name)") }
        }
    }

    @Test("a source that does not exist, holds no key, or whose keys all expired is no source; one name twice is refused whatever it holds")
    func noSource() async throws {
        let dir = TemporaryDirectory("copy-none")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            #expect(try await store.copyNamespace("nosuch", to: "t", replacing: true) == .noSource)
            try await store.namespace("emptied").put(b("k"), b("v"))
            _ = try await store.namespace("emptied").delete([b("k")])
            #expect(try await store.copyNamespace("emptied", to: "t", replacing: true) == .noSource)
            try await store.namespace("passed").put(b("k"), b("v"))
            #expect(await store.execute([.setTimeToLive(key: b("k"), milliseconds: 1)], inNamespace: "passed").outcomes == [.integer(1)])
            try await Task.sleep(nanoseconds: 20_000_000)
            #expect(try await store.copyNamespace("passed", to: "t", replacing: true) == .noSource)
            #expect(await store.namespaceNames().contains("t") == false)
            try await store.namespace("same").put(b("k"), b("v"))
            for name in ["same", "nosuch"] {
                let error = await storeError { _ = try await store.copyNamespace(name, to: name, replacing: true) }
                #expect(error?.code == .invalidArgument && error?.message.hasPrefix("source and destination objects are the same") == true, "\(String(describing: error))")
            }
            #expect(try await store.namespace("same").get(b("k")) == b("v"))
            #expect(await storeError { _ = try await store.copyNamespace("same", to: "../x", replacing: true) }?.code == .invalidNamespace)
        }
    }

    @Test("a namespace holding keys of a connection is refused, nothing changed, both names usable")
    func ephemeralRefused() async throws {
        let dir = TemporaryDirectory("copy-ephemeral")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let lock = LifetimePut(key: b("lock"), value: b("me"), owner: 7, ifVersion: 0)
            _ = await store.execute([.lifetimePut(lock)], inNamespace: "locks")
            try await store.namespace("t").put(b("x"), b("1"))
            let error = await storeError { _ = try await store.copyNamespace("locks", to: "t", replacing: true) }
            #expect(error?.code == .invalidArgument && error?.message.contains("keys of a connection") == true, "\(String(describing: error))")
            #expect(try await store.namespace("locks").get(b("lock")) == b("me"))
            #expect(try await store.namespace("t").get(b("x")) == b("1"), "the target was not touched")
            #expect(await store.namespaceNames() == ["locks", "t"])
        }
    }

    @Test("a copy to a new name counts against the limit: refused at it, or room made by an empty namespace when the store may")
    func limit() async throws {
        for makesRoom in [false, true] {
            let dir = TemporaryDirectory("copy-limit")
            defer { dir.remove() }
            var options = testOptions()
            options.maxNamespaces = 2
            options.removesEmptyNamespacesForRoom = makesRoom
            try await withStore(dir.data, options) { store in
                try await store.namespace("a").put(b("k"), b("v"))
                let emptied = try await store.namespace("b")
                try await emptied.put(b("k"), b("v"))
                _ = try await emptied.delete([b("k")])
                guard makesRoom else {
                    #expect(await storeError { _ = try await store.copyNamespace("a", to: "c", replacing: false) }?.code == .tooManyNamespaces)
                    #expect(await store.namespaceNames() == ["a", "b"])
                    #expect(try await store.copyNamespace("a", to: "b", replacing: false) == .copied, "an existing name takes no room")
                    return
                }
                #expect(try await store.copyNamespace("a", to: "c", replacing: false) == .copied)
                #expect(await store.namespaceNames() == ["a", "c"])
            }
        }
    }

    @Test("a copy taken while another task writes the source holds the writes of one moment: a prefix of them")
    func oneMoment() async throws {
        let dir = TemporaryDirectory("copy-moment")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.no)) { store in
            let a = try await store.namespace("a")
            try await a.put(b("k0000"), b("0"))
            let writes = 2000
            let writer = Task {
                for i in 1..<writes { try await a.put(b(String(format: "k%04d", i)), b("\(i)")) }
            }
            var copies = 0
            while copies < 20 {
                #expect(try await store.copyNamespace("a", to: "c\(copies % 3)", replacing: true) == .copied)
                let copied = await contents(try await store.namespace("c\(copies % 3)"))
                let expected = (0..<copied.count).map { b(String(format: "k%04d", $0)) }
                #expect(Set(copied.keys) == Set(expected), "copy \(copies): \(copied.count) keys, not the first \(copied.count) written")
                copies += 1
            }
            try await writer.value
            #expect(await a.count() == writes)
        }
    }

    @Test("followers of the target get the change deleting its keys, then their streams end, and resuming is COMPACTED; the source's followers see nothing")
    func followers() async throws {
        let dir = TemporaryDirectory("copy-follow")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.everysec)) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
            try await store.namespace("t").put(b("y"), b("2"))
            let source = try await store.follow("a", from: .now), target = try await store.follow("t", from: .now)
            let waiting = try await store.follow("fresh", from: .now)
            #expect(try await store.copyNamespace("a", to: "t", replacing: true) == .copied)
            let feed = try #require(target.feed as? ChangeFeed)
            guard case .changes(let changes) = feed.read(after: target.sequence, limit: 10) else {
                Issue.record("no change for the copy")
                return
            }
            #expect(changes.count == 1 && changes[0].mutations == [.delete(key: b("x")), .delete(key: b("y"))], "\(changes)")
            #expect(feed.endSequence == changes.last?.sequence)
            #expect(feed.endReason == .replacedByCopy(of: "a"), "its followers are told why: \(String(describing: feed.endReason))")
            feed.removeFollower()
            let error = await storeError { _ = try await store.follow("t", from: .sequence(changes[0].sequence)) }
            #expect(error?.code == .compacted, "resuming after the copy's change: \(String(describing: error))")
            let sourceFeed = try #require(source.feed as? ChangeFeed)
            #expect(sourceFeed.endSequence == nil, "the source's stream goes on")
            try await store.namespace("a").put(b("k2"), b("w"))
            guard case .changes(let sourceChanges) = sourceFeed.read(after: source.sequence, limit: 10) else {
                Issue.record("the source's follower got nothing")
                return
            }
            #expect(sourceChanges.map(\.mutations) == [[.put(key: b("k2"), value: b("w"))]], "only the write after the copy")
            #expect(try await store.copyNamespace("a", to: "fresh", replacing: true) == .copied)
            let ended = try #require(waiting.feed as? ChangeFeed)
            #expect(ended.endSequence != nil && ended.endReason == .replacedByCopy(of: "a"), "a follower of a name that did not exist ends too")
            let snapshot = try await store.follow("fresh", from: .snapshot)
            #expect(snapshot.snapshot?.map.count == 2, "a SNAPSHOT of the new name holds the copied keys")
        }
    }

    @Test("a copy or rename whose staged files or journal cannot be written changes nothing: both names open from their files, nothing is left over, and it succeeds once the disk does",
          arguments: [(FaultInjector.Operation.mkdir, RenameJournal.stagedPrefix), (.write, RenameJournal.stagedPrefix), (.fsync, RenameJournal.stagedPrefix),
                      (.rename, "snapshot"), (.write, RenameJournal.fileName), (.rename, RenameJournal.fileName)])
    func failureBeforeTheJournal(_ operation: FaultInjector.Operation, _ path: String) async throws {
        for copying in [true, false] {
            let dir = TemporaryDirectory("copy-fail")
            defer { dir.remove() }
            let faults = FaultInjector()
            try await withStore(dir.data, testOptions(faults: faults)) { store in
                try await store.namespace("a").put(b("k"), b("v"))
                try await store.namespace("t").put(b("x"), b("1"))
                faults.failSyscall(operation, pathContains: path, errno: EIO)
                let error = await storeError {
                    _ = copying ? try await store.copyNamespace("a", to: "t", replacing: true) == .copied
                        : try await store.renameNamespace("a", to: "t", replacing: true) == .renamed
                }
                #expect(error?.code == .io, "\(operation) of \(path), copying \(copying): \(String(describing: error))")
                faults.reset()
                #expect(await store.namespaceNames() == ["a", "t"])
                let t = try await store.namespace("t"), a = try await store.namespace("a")
                #expect(await t.get(b("x")) == b("1"), "both as they were")
                #expect(await a.get(b("k")) == b("v"))
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.data).filter { $0.hasPrefix(RenameJournal.stagedPrefix) || $0 == RenameJournal.fileName }
                #expect(leftovers.isEmpty, "\(leftovers)")
                if copying {
                    #expect(try await store.copyNamespace("a", to: "t", replacing: true) == .copied)
                } else {
                    #expect(try await store.renameNamespace("a", to: "t", replacing: true) == .renamed)
                }
                #expect(try await store.namespace("t").get(b("k")) == b("v"))
            }
        }
    }

    @Test("a copy whose steps fail after its journal was written has happened: the target is unavailable until the next start finishes it")
    func failureAfterTheJournal() async throws {
        let dir = TemporaryDirectory("copy-fail-after")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
            // The first step renames the target's old directory away.
            faults.failSyscall(.rename, pathContains: "data/t", errno: EIO)
            #expect(await storeError { _ = try await store.copyNamespace("a", to: "t", replacing: true) }?.code == .io)
            faults.reset()
            #expect(await storeError { _ = try await store.namespace("t") }?.code == .io, "the target waits for the next start")
            #expect(try await store.namespace("a").get(b("k")) == b("v"), "the source goes on")
        }
        try await withStore(dir.data) { store in
            let t = try await store.namespace("t"), a = try await store.namespace("a")
            #expect(await t.get(b("k")) == b("v"), "the start finished the copy")
            #expect(await t.get(b("x")) == nil)
            #expect(await a.get(b("k")) == b("v"))
        }
    }

    @Test("a copy cut short after its journal is finished at the next start, the source kept (and --check sees it so)")
    func journal() async throws {
        let dir = TemporaryDirectory("copy-journal")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("t").put(b("x"), b("1"))
        }
        let staged = RenameJournal.stagedPrefix + "t-1"
        try FileManager.default.copyItem(atPath: dir.data + "/a", toPath: dir.data + "/" + staged)
        let journal = RenameJournal(source: "a", target: "t", staged: staged, keepsSource: true)
        try journal.write(directory: dir.data, system: .plain)
        #expect(RenameJournal.parse(Array(journal.text.utf8)) == journal)
        #expect(journal.text == "actorkv copies namespace a to t from \(staged)\n")
        let checked = try Store.check(directory: dir.data)
        #expect(checked.map(\.name) == ["a", "t"] && checked.allSatisfy { $0.keys == 1 && $0.isReadable }, "\(checked.map(\.summary))")
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["a", "t"])
            let t = try await store.namespace("t"), a = try await store.namespace("a")
            #expect(await t.get(b("k")) == b("v"))
            #expect(await t.get(b("x")) == nil)
            #expect(await a.get(b("k")) == b("v"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data).sorted() == [".lock", "a", "t"], "journal, staged and hidden directories gone")
    }
}
