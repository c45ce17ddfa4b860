@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// ``Store/backup(to:)``: a new data directory that opens as the store it was taken from, written
/// whole or not at all. (That the server copies every namespace at one moment is tested with a
/// real server, in ActorKVServerTests' BackupServerTests.)
@Suite("Backups of a running store")
struct BackupTests {
    typealias Entry = (key: [UInt8], value: [UInt8], version: UInt64, lifetime: Lifetime)

    /// Fills namespace `a` (a compaction halfway, so the backup comes from a snapshot and a log)
    /// and `b`: puts, an increment, deletes, a key with a deadline, one already expired and one
    /// owned by connection 4.
    func fill(_ store: Store) async throws {
        let a = try await store.namespace("a")
        for i in 0..<50 { try await a.put(b("k\(i)"), b("v\(i)")) }
        try await a.compact()
        _ = try await a.delete([b("k3"), b("k4")])
        _ = try await a.increment(b("n"), by: 7)
        _ = try await a.put(b("k5"), b("new"), ifVersion: await a.versioned(b("k5"))!.version)
        let lifetimes: [ActorKVStore.Operation] = [.lifetimePut(LifetimePut(key: b("later"), value: b("x"), milliseconds: 600_000)),
                                      .lifetimePut(LifetimePut(key: b("soon"), value: b("x"), milliseconds: 1)),
                                      .lifetimePut(LifetimePut(key: b("owned"), value: b("x"), owner: 4))]
        _ = await a.execute(lifetimes).settled(lifetimes)
        let other = try await store.namespace("b")
        try await other.put(b("only"), b("one"))
        try await Task.sleep(nanoseconds: 5_000_000)  // `soon` expires
    }

    @Test("a backup opens as the store it was taken from: values, versions, deadlines and last sequences; expired keys left out, a connection's keys deleted on opening as after a restart")
    func opensAsTheStore() async throws {
        let dir = TemporaryDirectory("backup")
        defer { dir.remove() }
        let target = dir.path + "/copy"
        var expected: [String: (sequence: UInt64, entries: [Entry])] = [:]
        // The sweeper never runs: the expired key stays in the map, for the backup to leave out.
        var options = testOptions()
        options.backgroundExecutor = ParkedExecutor.shared
        try await withStore(dir.data, options) { store in
            try await fill(store)
            for name in ["a", "b"] { expected[name] = try await store.namespace(name).entriesWithLifetimes() }
            let summary = try await store.backup(to: target + "/")
            #expect(summary.path == target)
            #expect(summary.unavailable.isEmpty)
            #expect(summary.namespaces.map(\.name) == ["a", "b"])
            #expect(summary.namespaces.map(\.lastSequence) == [expected["a"]!.sequence, expected["b"]!.sequence])
            #expect(summary.namespaces.map(\.keys) == [expected["a"]!.entries.count - 1, 1], "the expired key left out")
            // The store goes on as before.
            try await store.namespace("a").put(b("after"), b("1"))
            #expect(try await store.namespace("a").get(b("k5")) == b("new"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["copy", "data"], "no hidden directory left")
        #expect(try FileManager.default.contentsOfDirectory(atPath: target).sorted() == ["a", "b"])
        try await withStore(target) { copy in
            #expect(await copy.namespaceNames() == ["a", "b"])
            for name in ["a", "b"] {
                let found = try await copy.namespace(name).entriesWithLifetimes()
                let wanted = expected[name]!.entries.filter { $0.key != b("soon") && $0.key != b("owned") }
                #expect(found.sequence == expected[name]!.sequence + (name == "a" ? 1 : 0), "a's owned key deleted on opening")
                #expect(found.entries.map(\.key) == wanted.map(\.key), "\(name)")
                #expect(found.entries.map(\.value) == wanted.map(\.value), "\(name)")
                #expect(found.entries.map(\.version) == wanted.map(\.version), "\(name)")
                #expect(found.entries.map(\.lifetime) == wanted.map(\.lifetime), "\(name): the deadline kept")
            }
            #expect(try await copy.namespace("a").get(b("after")) == nil, "written after the backup")
            // Versions go on from the backup's sequence.
            let a = try await copy.namespace("a")
            #expect(try await a.put(b("next"), b("1"), ifVersion: 0) == expected["a"]!.sequence + 2,
                    "one record for the owned key's deletion on opening, then this one")
        }
    }

    @Test("a target that is relative, exists, has no parent directory, or is inside the data directory is refused, and nothing is made")
    func badTargets() async throws {
        let dir = TemporaryDirectory("backup-bad")
        defer { dir.remove() }
        _ = FileManager.default.createFile(atPath: dir.path + "/file", contents: Data())
        try FileManager.default.createDirectory(atPath: dir.path + "/empty", withIntermediateDirectories: false)
        try await withStore(dir.data) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            let refused: [(String, String)] = [
                ("copy", "a backup needs an absolute path"),
                ("", "a backup needs an absolute path"),
                ("/", "a backup needs a path that names a new directory"),
                (dir.path + "/..", "a backup needs a path that names a new directory"),
                (dir.path + "/file", "exists already"),
                (dir.path + "/empty", "exists already"),
                (dir.path + "/missing/copy", "does not exist or is not a directory"),
                (dir.path + "/file/copy", "does not exist or is not a directory"),
                (dir.data + "/copy", "cannot go inside the data directory"),
                (dir.data + "/a/copy", "cannot go inside the data directory"),
                (dir.path + "/empty/../data/copy", "cannot go inside the data directory"),
            ]
            for (path, reason) in refused {
                let error = await storeError { _ = try await store.backup(to: path) }
                #expect(error?.code == .invalidArgument, "\(path)")
                #expect(error?.message.contains(reason) == true, "\(path): \(error?.message ?? "none")")
            }
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["data", "empty", "file"])
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path + "/empty").isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.data).sorted() == [".lock", "a"])
    }

    @Test("a backup whose writing fails leaves no target and no hidden directory, and the next one succeeds", arguments: [
        FaultInjector.Operation.open, .write, .fsync, .rename, .mkdir,
    ])
    func failureLeavesNothing(_ operation: FaultInjector.Operation) async throws {
        let dir = TemporaryDirectory("backup-fail")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            try await store.namespace("b").put(b("k"), b("v"))
            // In the hidden directory, or (a rename) to the target: the second namespace's file
            // or the last step, so that something was written before the failure.
            faults.failSyscall(operation, pathContains: operation == .rename ? "/copy" : operation == .mkdir ? ".partial-" : "/b/snapshot.json",
                               errno: EIO)
            let error = await storeError { _ = try await store.backup(to: dir.path + "/copy") }
            #expect(error?.code == .io, "\(operation)")
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted() == ["data"], "\(operation)")
            faults.reset()
            let summary = try await store.backup(to: dir.path + "/copy")
            #expect(summary.namespaces.map(\.keys) == [1, 1])
        }
    }

    @Test("a namespace that cannot be opened is left out of the backup and named with its error; the others are in it")
    func unavailableLeftOut() async throws {
        let dir = TemporaryDirectory("backup-corrupt")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            for name in ["a", "b", "c"] { try await store.namespace(name).put(b("k"), b(name)) }
        }
        // A record of b's log damaged in the middle of the file: corrupt, not a torn tail.
        let log = dir.data + "/b/000001.log"
        var bytes = try readFile(log)
        try #require(bytes.count > 40)
        bytes[30] ^= 0xff
        try writeFile(log, bytes + Array(repeating: 0x41, count: 64))
        try await withStore(dir.data) { store in
            let summary = try await store.backup(to: dir.path + "/copy")
            #expect(summary.namespaces.map(\.name) == ["a", "c"])
            #expect(Array(summary.unavailable.keys) == ["b"])
            #expect(summary.unavailable["b"]?.code == .corrupt)
        }
        try await withStore(dir.path + "/copy") { copy in
            #expect(await copy.namespaceNames() == ["a", "c"])
            let c = try await copy.namespace("c")
            #expect(await c.get(b("k")) == b("c"))
        }
    }

    @Test("the next backup into a directory removes the hidden directories that backups cut short left there, to any path; those of a live process, of a backup of this process in progress, of another user or in an older form stay, and so do a file it does not know and what a link points to")
    func removesLeftoversOfKilledBackups() async throws {
        let dir = TemporaryDirectory("backup-leftovers")
        defer { dir.remove() }
        let dead = try Self.deadProcessID()
        let live = try ChildProcess("/bin/sleep", ["30"])
        defer { live.signal(SIGKILL); _ = live.waitForExit() }
        func leftover(_ name: String, files: [String]) throws -> String {
            let path = dir.path + "/" + name
            for file in files {
                try FileManager.default.createDirectory(atPath: (path + "/" + file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try writeFile(path + "/" + file, b("{"))
            }
            return path
        }
        let killed = try leftover(".copy.partial-\(dead)-1a2b3c", files: ["a/snapshot.json", "b/snapshot.json.tmp", ".sequence-floor"])
        let restarted = try leftover(".copy.partial-\(getpid())-ff", files: ["a/snapshot.json"])
        let inProgress = try leftover(".copy.partial-\(getpid())-abc", files: ["a/snapshot.json"])
        let running = try leftover(".copy.partial-\(live.pid)-abcd", files: ["a/snapshot.json"])
        let older = try leftover(".copy.partial-0123abcd", files: ["a/snapshot.json"])
        let other = try leftover(".other.partial-\(dead)-1234", files: ["a/snapshot.json"])
        let unknown = try leftover(".copy.partial-\(dead)-5678", files: ["a/snapshot.json", "a/notes.txt"])
        // A link in a leftover is not followed: what it points to stays.
        let elsewhere = try leftover("elsewhere", files: ["ns/snapshot.json"])
        let linking = try leftover(".copy.partial-\(dead)-11", files: [])
        try FileManager.default.createDirectory(atPath: linking, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: linking + "/ns", withDestinationPath: elsewhere + "/ns")
        // Another user's directory of that name is not touched (only root can make one here).
        let foreign = try leftover(".copy.partial-\(dead)-22", files: ["a/snapshot.json"])
        if geteuid() == 0 { #expect(chown(foreign, 2001, 2001) == 0) }
        BackupLeftovers.claim(inProgress)
        defer { BackupLeftovers.release(inProgress) }
        let logged = Mutex<[String]>([])
        var options = testOptions()
        options.log = { line in logged.withLock { $0.append(line) } }
        try await withStore(dir.data, options) { store in
            try await store.namespace("a").put(b("k"), b("v"))
            _ = try await store.backup(to: dir.path + "/copy")
        }
        for gone in [killed, restarted, other] { #expect(!fileExists(gone), "\(gone)") }
        for kept in [inProgress, running, older, unknown + "/a/notes.txt", elsewhere + "/ns/snapshot.json"] {
            #expect(fileExists(kept), "\(kept)")
        }
        #expect(fileExists(linking + "/ns") || !fileExists(linking), "the link itself may go, not what it points to")
        #expect(fileExists(foreign + "/a/snapshot.json") == (geteuid() == 0), "another user's directory stays")
        #expect(!fileExists(unknown + "/a/snapshot.json"), "what it knows of the leftover is removed")
        let lines = logged.withLock { $0 }.filter { $0.hasPrefix("backup: removed") }
        #expect(lines.count == (geteuid() == 0 ? 3 : 4) && [killed, restarted, other].allSatisfy { path in lines.contains { $0.contains(path + ",") } }, "\(lines)")
        try await withStore(dir.path + "/copy") { copy in
            let a = try await copy.namespace("a")
            #expect(await a.get(b("k")) == b("v"))
        }
    }

    @Test("the process id in a backup's hidden directory name is read back; other names give none")
    func hiddenNames() {
        let name = BackupLeftovers.hiddenName(of: "monday")
        #expect(name.hasPrefix(".monday.partial-\(getpid())-"))
        #expect(BackupLeftovers.owner(of: name) == getpid())
        #expect(BackupLeftovers.owner(of: ".a.partial-b.partial-12-ab") == 12, "a name holding the marker: the last one counts")
        for entry in [".monday.partial-1a2b", ".monday.partial-12-", ".monday.partial--12-ab", ".monday.partial-0-ab",
                      ".monday.partial-12-xyz", ".monday.partial-12-ab-cd", "monday", ".monday.partial-99999999999-ab",
                      "monday.partial-12-ab", "..partial-12-ab", ".partial-12-ab", ".monday.partial-12-ab.partial-x"] {
            #expect(BackupLeftovers.owner(of: entry) == nil, "\(entry)")
        }
    }

    /// The id of a process that ran and was reaped: no process has it now (unless the system
    /// reuses it within the test, which would only keep its leftover in place).
    static func deadProcessID() throws -> Int32 {
        let process = try ChildProcess("/bin/true", [])
        _ = process.waitForExit()
        return process.pid
    }

    @Test("a closed store refuses to back up")
    func closedStore() async throws {
        let dir = TemporaryDirectory("backup-closed")
        defer { dir.remove() }
        let store = try await openStore(dir.data)
        try await store.namespace("a").put(b("k"), b("v"))
        await store.close()
        #expect(await storeError { _ = try await store.backup(to: dir.path + "/copy") }?.code == .closed)
        #expect(!fileExists(dir.path + "/copy"))
    }
}
