@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// ``Store/removeNamespace(_:)``: a namespace removed is gone with its files and its place among
/// the namespaces, and its name, used again, never hands out a version or change number of its
/// earlier life. (UNLINK over the wire, with followers on real connections, is tested in
/// ActorKVServerTests' UnlinkServerTests; a power loss at every step, in RemovalPowerLossTests.)
@Suite("Removing a namespace")
struct NamespaceRemovalTests {
    @Test("a removed namespace is gone: not listed, its directory deleted, its keys absent, and it counts no more against the limit")
    func gone() async throws {
        let dir = TemporaryDirectory("remove")
        defer { dir.remove() }
        var options = testOptions()
        options.maxNamespaces = 2
        try await withStore(dir.data, options) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("b").put(b("k"), b("v"))
            #expect(await storeError { _ = try await store.namespace("c") }?.code == .tooManyNamespaces)
            #expect(try await store.removeNamespace("a"))
            #expect(await store.namespaceNames() == ["b"])
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data).sorted() == [".lock", SequenceFloor.fileName, "b"])
            #expect(try await store.existingNamespace("a") == nil)
            let reads: [ActorKVStore.Operation] = [.get(b("k")[...]), .count]
            #expect(await store.execute(reads, inNamespace: "a").outcomes == [.value(nil), .integer(0)])
            #expect(try await !store.removeNamespace("a"), "none left to remove")
            #expect(try await !store.removeNamespace("never"))
            try await store.namespace("c").put(b("k"), b("v"))
            #expect(await store.namespaceNames() == ["b", "c"])
            #expect(await storeError { _ = try await store.removeNamespace("../b") }?.code == .invalidNamespace)
        }
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["b", "c"], "the removal lasts")
        }
    }

    @Test("at the limit, with removesEmptyNamespacesForRoom, a namespace that holds no key makes room for a new one; without it, the new one is refused")
    func emptyOnesMakeRoom() async throws {
        for makesRoom in [false, true] {
            let dir = TemporaryDirectory("remove-empty")
            defer { dir.remove() }
            var options = testOptions()
            options.maxNamespaces = 2
            options.removesEmptyNamespacesForRoom = makesRoom
            try await withStore(dir.data, options) { store in
                let held = try await store.namespace("a")
                try await held.put(b("k"), b("v"))
                try await store.namespace("b").put(b("k"), b("v"))
                #expect(await storeError { _ = try await store.namespace("c") }?.code == .tooManyNamespaces, "none is empty")
                _ = try await held.delete([b("k")])
                guard makesRoom else {
                    #expect(await storeError { _ = try await store.namespace("c") }?.code == .tooManyNamespaces)
                    #expect(await store.namespaceNames() == ["a", "b"])
                    return
                }
                try await store.namespace("c").put(b("k"), b("v"))
                #expect(await store.namespaceNames() == ["b", "c"])
                #expect(await storeError { try await held.put(b("k"), b("w")) }?.message.contains("was removed") == true,
                        "a Namespace held on the removed one refuses writes")
            }
        }
    }

    @Test("a name used again numbers on after its earlier life: an old version guards nothing, also after a restart")
    func versionsGoOn() async throws {
        let dir = TemporaryDirectory("remove-versions")
        defer { dir.remove() }
        var oldVersion: UInt64 = 0
        try await withStore(dir.data) { store in
            let a = try await store.namespace("a")
            for i in 0..<5 { try await a.put(b("k"), b("v\(i)")) }
            oldVersion = try #require(await a.versioned(b("k"))).version
            #expect(try await store.removeNamespace("a"))
            // The earlier life's version of `k`, and 0 (absent) for a key it held, now guard nothing they did.
            let again = try await store.namespace("a")
            #expect(try await again.put(b("k"), b("new"), ifVersion: oldVersion) == nil)
            let version = try #require(try await again.put(b("k"), b("new"), ifVersion: 0))
            #expect(version == oldVersion + 2, "after the removal's change, which deleted k")
            #expect(try SequenceFloor.read(directory: dir.data, system: .plain) == oldVersion + 1)
            // A namespace that holds no key takes no change: the floor rises to its last sequence.
            try await store.namespace("empty").put(b("x"), b("1"))
            _ = try await store.namespace("empty").delete([b("x")])
            #expect(try await store.namespace("empty").sequence == oldVersion + 3)
            #expect(try await store.removeNamespace("empty"))
            #expect(try SequenceFloor.read(directory: dir.data, system: .plain) == oldVersion + 3)
            #expect(try await store.removeNamespace("a"))
        }
        try await withStore(dir.data) { store in
            let a = try await store.namespace("a")
            let version = try #require(try await a.put(b("k"), b("later"), ifVersion: 0))
            #expect(version == oldVersion + 4, "numbered after the second removal's change, read back from the floor's file")
            let fresh = try await store.namespace("fresh")
            #expect(try await fresh.put(b("k"), b("v"), ifVersion: 0) == oldVersion + 4, "every new name numbers after the floor")
        }
    }

    @Test("a Namespace obtained before the removal refuses writes and holds nothing; the store's execute runs on the new life")
    func staleReference() async throws {
        let dir = TemporaryDirectory("remove-stale")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let old = try await store.namespace("a")
            try await old.put(b("k"), b("v"))
            #expect(try await store.removeNamespace("a"))
            let error = await storeError { try await old.put(b("k"), b("w")) }
            #expect(error?.code == .closed)
            #expect(error?.message.contains("was removed") == true, "\(error?.message ?? "none")")
            #expect(await old.get(b("k")) == nil)
            let put: [ActorKVStore.Operation] = [.put(key: b("k")[...], value: b("x")[...])]
            #expect(await store.execute(put, inNamespace: "a").outcomes == [.stored])
            #expect(try await store.namespace("a").get(b("k")) == b("x"))
        }
    }

    @Test("writes racing a removal each land before it (and are deleted by it) or after it (in the new life); none fails")
    func racingWrites() async throws {
        let dir = TemporaryDirectory("remove-race")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("seed"), b("1"))
            let outcomes = try await withThrowingTaskGroup(of: [Outcome].self) { group in
                for writer in 0..<4 {
                    group.addTask {
                        var outcomes: [Outcome] = []
                        for i in 0..<100 {
                            let put: [ActorKVStore.Operation] = [.put(key: b("w\(writer)-\(i)")[...], value: b("v")[...])]
                            outcomes += await store.execute(put, inNamespace: "a").outcomes
                        }
                        return outcomes
                    }
                }
                group.addTask {
                    for _ in 0..<5 { _ = try await store.removeNamespace("a") }
                    return []
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(outcomes.count == 400)
            #expect(outcomes.allSatisfy { $0 == .stored }, "\(outcomes.filter { $0 != .stored }.prefix(3))")
            // Versions only grew: every key now there is numbered after the floor of the last removal.
            let floor = try SequenceFloor.read(directory: dir.data, system: .plain)
            if let a = try await store.existingNamespace("a") {
                for (key, _) in await contents(a) { #expect(try #require(await a.versioned(key)).version > floor) }
            }
        }
    }

    @Test("a follower gets the change deleting every key, then the feed ends; following the name afterwards starts at the floor, and FROM judges it")
    func followers() async throws {
        let dir = TemporaryDirectory("remove-follow")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.everysec)) { store in
            let a = try await store.namespace("a")
            try await a.put(b("k1"), b("v"))
            try await a.put(b("k2"), b("v"))
            let start = try await store.follow("a", from: .now)
            let feed = try #require(start.feed as? ChangeFeed)
            #expect(try await store.removeNamespace("a"))
            guard case .changes(let changes) = feed.read(after: start.sequence, limit: 10) else {
                Issue.record("no change for the removal")
                return
            }
            #expect(changes.map(\.sequence) == [3])
            #expect(changes[0].mutations == [.delete(key: b("k1")), .delete(key: b("k2"))])
            #expect(feed.endSequence == 3)
            #expect(feed.read(after: 3, limit: 10) == .caughtUp, "nothing after it: the follower ends there")
            feed.removeFollower()
            // The name does not exist: FROM the removal's change, or 0, goes on; FROM an earlier one may miss the removal.
            for (from, code) in [(UInt64(3), StoreError.Code?.none), (0, nil), (2, .compacted), (4, .invalidArgument)] {
                do {
                    let resumed = try await store.follow("a", from: .sequence(from))
                    #expect(code == nil && resumed.sequence == 3, "FROM \(from)")
                    resumed.feed.removeFollower()
                } catch let error as StoreError {
                    #expect(error.code == code, "FROM \(from): \(error.message)")
                }
            }
            // A follower waiting on the name gets the new life's first change, numbered after the removal's.
            let waiting = try await store.follow("a", from: .sequence(3))
            try await store.namespace("a").put(b("k1"), b("again"))
            let next = waiting.feed.read(after: 3, limit: 10)
            guard case .changes(let later) = next else {
                Issue.record("\(next)")
                return
            }
            #expect(later.map(\.sequence) == [4])
            #expect(later[0].mutations == [.put(key: b("k1"), value: b("again"))])
            waiting.feed.removeFollower()
        }
    }

    @Test("a namespace created after a removal serves FROM 0 from its first write while its log holds every change since, across compactions and restarts; then COMPACTED, as FROM a sequence before its life")
    func fromZeroAfterTheFloor() async throws {
        let dir = TemporaryDirectory("remove-from-zero")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.changesHistory = 15
        options.segmentSealBytes = 0  // a segment per compaction
        /// The sequences FROM 0 gives (the start, then every change read from the log), or the error.
        func fromZero(_ store: Store) async throws -> Result<[UInt64], StoreError> {
            let start: FollowStart
            do { start = try await store.follow("fresh", from: .sequence(0)) } catch { return .failure(error) }
            defer { start.feed.removeFollower() }
            let ns = try #require(try await store.existingNamespace("fresh"))
            let last = await ns.currentStatistics().lastSequence
            let chunk = try await ns.readHistory(after: start.sequence, through: last, maxBytes: 1 << 20, from: nil)
            return .success([start.sequence] + chunk.changes.map(\.sequence))
        }
        try await withStore(dir.data, options) { store in
            try await store.namespace("old").put(b("k"), b("v"))  // 1
            #expect(try await store.removeNamespace("old"))           // 2: the floor
            let fresh = try await store.namespace("fresh")
            for i in 1...5 { try await fresh.put(b("k\(i)"), b("v")) }  // 3-7
            #expect(try await fromZero(store) == .success([2, 3, 4, 5, 6, 7]), "from its first write, as if it had been followed while absent")
            #expect(await storeError { _ = try await store.follow("fresh", from: .sequence(1)) }?.code == .compacted, "FROM 1 may have seen the earlier life")
            try await fresh.compact()
            #expect(try await fromZero(store) == .success([2, 3, 4, 5, 6, 7]), "the compaction kept the history")
        }
        try await withStore(dir.data, options) { store in
            #expect(try await fromZero(store) == .success([2, 3, 4, 5, 6, 7]), "the snapshot remembers where the life began")
            let fresh = try #require(try await store.existingNamespace("fresh"))
            for round in 0..<3 {
                for i in 1...10 { try await fresh.put(b("k\(i)"), b("r\(round)")) }
                try await fresh.compact()
            }
            #expect(await fresh.currentStatistics().oldestSequence > 3)
            guard case .failure(let error) = try await fromZero(store) else { Issue.record("FROM 0 served"); return }
            #expect(error.code == .compacted, "its first changes are dropped: FROM 0 would miss keys")
        }
    }

    @Test("a follower waiting on an absent name keeps its place when a removal elsewhere raises the floor before the name is created")
    func waitingFollowerKeepsItsPlace() async throws {
        let dir = TemporaryDirectory("remove-waiting")
        defer { dir.remove() }
        try await withStore(dir.data, testOptions(.everysec)) { store in
            let waiting = try await store.follow("later", from: .now)
            #expect(waiting.sequence == 0)
            try await store.namespace("other").put(b("k"), b("v"))
            #expect(try await store.removeNamespace("other"))
            try await store.namespace("later").put(b("k"), b("v"))
            guard case .changes(let changes) = waiting.feed.read(after: 0, limit: 10) else {
                Issue.record("no change")
                return
            }
            #expect(changes.map(\.sequence) == [1], "numbered from where its follower waits")
            waiting.feed.removeFollower()
        }
    }

    @Test("a removal whose floor or rename fails removes nothing: the namespace opens again from its files, and a later removal succeeds", arguments: [
        FaultInjector.Operation.write, .fsync, .rename,
    ])
    func failureRemovesNothing(_ operation: FaultInjector.Operation) async throws {
        let dir = TemporaryDirectory("remove-fail")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            faults.failSyscall(operation, pathContains: operation == .rename ? "/a" : SequenceFloor.fileName, errno: EIO)
            #expect(await storeError { _ = try await store.removeNamespace("a") }?.code == .io, "\(operation)")
            faults.reset()
            #expect(await store.namespaceNames() == ["a"])
            #expect(try await store.namespace("a").get(b("k")) == b("v"), "reopened from its files")
            #expect(try await store.removeNamespace("a"))
            #expect(await store.namespaceNames().isEmpty)
        }
    }

    @Test("a corrupt namespace is not removed: its error is thrown and its files stay")
    func corruptStays() async throws {
        let dir = TemporaryDirectory("remove-corrupt")
        defer { dir.remove() }
        try await withStore(dir.data) { store in try await store.namespace("a").put(b("k"), b("v")) }
        let log = dir.data + "/a/000001.log"
        var bytes = try readFile(log)
        bytes[12] ^= 0xff
        try writeFile(log, bytes + Array(repeating: 0x41, count: 64))
        try await withStore(dir.data) { store in
            #expect(await storeError { _ = try await store.removeNamespace("a") }?.code == .corrupt)
            #expect(fileExists(log))
        }
    }

    @Test("what a removal left behind is deleted at the next start; a floor file that is not its text is reported, not ignored")
    func leftoversAndFloorFile() async throws {
        let dir = TemporaryDirectory("remove-leftovers")
        defer { dir.remove() }
        try await withStore(dir.data) { store in try await store.namespace("a").put(b("k"), b("v")) }
        try FileManager.default.moveItem(atPath: dir.data + "/a", toPath: dir.data + "/.removed-a-0badc0de")
        var logged: [String] = []
        let lines = LockedLines()
        var options = testOptions()
        options.log = { lines.append($0) }
        try await withStore(dir.data, options) { store in #expect(await store.namespaceNames().isEmpty) }
        logged = lines.all
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data) == [".lock"])
        #expect(logged.contains { $0.contains(".removed-a-0badc0de") }, "\(logged)")
        try writeFile(dir.data + "/" + SequenceFloor.fileName, b("actorkv numbers new namespaces after sequence 12"))
        #expect(storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }?.code == .corrupt, "no newline: cut short")
        #expect(storeErrorSync { _ = try Store.check(directory: dir.data) }?.code == .corrupt, "actorkvd --check says so too")
        try writeFile(dir.data + "/" + SequenceFloor.fileName, Array(SequenceFloor.text(12).utf8))
        try await withStore(dir.data) { store in
            let version = try await store.namespace("n").put(b("k"), b("v"), ifVersion: 0)
            #expect(version == 13)
        }
    }

    @Test("a backup carries the floor: in the copy, a name removed before it and used again numbers on after its earlier life")
    func backupCarriesTheFloor() async throws {
        let dir = TemporaryDirectory("remove-backup")
        defer { dir.remove() }
        var removedAt: UInt64 = 0
        try await withStore(dir.data) { store in
            let a = try await store.namespace("a")
            for i in 0..<3 { try await a.put(b("k\(i)"), b("v")) }
            #expect(try await store.removeNamespace("a"))
            removedAt = try SequenceFloor.read(directory: dir.data, system: .plain)
            try await store.namespace("b").put(b("k"), b("v"))
            _ = try await store.backup(to: dir.path + "/copy")
        }
        #expect(try SequenceFloor.read(directory: dir.path + "/copy", system: .plain) == removedAt)
        try await withStore(dir.path + "/copy") { copy in
            let version = try await copy.namespace("a").put(b("k0"), b("again"), ifVersion: 0)
            #expect(version.map { $0 > removedAt } == true, "\(String(describing: version))")
        }
    }

    @Test("the floor file's text reads back exactly, and nothing else reads")
    func floorText() {
        for floor: UInt64 in [0, 1, 99, .max] {
            #expect(SequenceFloor.floor(in: Array(SequenceFloor.text(floor).utf8)) == floor)
        }
        for text in ["", "\n", "actorkv numbers new namespaces after sequence \n", "actorkv numbers new namespaces after sequence 1",
                     "actorkv numbers new namespaces after sequence -1\n", "actorkv numbers new namespaces after sequence 18446744073709551616\n",
                     "actorkv numbers new namespaces after sequence 1 \n"] {
            #expect(SequenceFloor.floor(in: Array(text.utf8)) == nil, "\(text.debugDescription)")
        }
    }
}

/// Lines logged from any thread, for a test to read afterwards.
private final class LockedLines: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    func append(_ line: String) { lock.withLock { lines.append(line) } }
    var all: [String] { lock.withLock { lines } }
}
