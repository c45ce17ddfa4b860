import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A namespace whose creation fails (no descriptor left, no space) leaves nothing behind: the
/// empty directory it used to leave was a namespace INFO did not list, which the next attempt
/// found instead of starting clean.
@Suite("A failed namespace creation removes what it made")
struct NamespaceCreationTests {
    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    @Test("EMFILE making the directory's entry durable, or ENOSPC creating its log: the directory goes, and a later write creates the namespace")
    func failedCreationLeavesNothing() async throws {
        let dir = TemporaryDirectory("nscreate")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            // The data directory's open, to fsync the new entry: the operator's
            // "creating namespace directory …/n1 failed: Too many open files".
            faults.failSyscall(.open, pathContains: dir.data, errno: EMFILE)
            let first = await storeError { _ = try await store.namespace("n1") }
            #expect(first?.code == .io && first?.message.contains("creating namespace directory") == true, "\(String(describing: first))")
            #expect(!Self.exists(dir.data + "/n1"), "the directory the failed creation made is removed")
            // The log segment's creation, after the directory was made.
            faults.failSyscall(.open, pathContains: "/n2/000001.log", errno: ENOSPC)
            #expect(await storeError { _ = try await store.namespace("n2") }?.code == .io)
            #expect(!Self.exists(dir.data + "/n2"))
            #expect(await store.namespaceNames() == [])
            // A later attempt starts clean and works.
            for name in ["n1", "n2"] {
                let ns = try await store.namespace(name)
                try await ns.put(b("k"), b(name))
                #expect(await ns.get(b("k")) == b(name))
            }
            #expect(await store.namespaceNames() == ["n1", "n2"])
        }
        try await withStore(dir.data) { store in
            #expect(await store.namespaceNames() == ["n1", "n2"])
            let n2 = try await store.namespace("n2")
            #expect(await n2.get(b("k")) == b("n2"))
        }
    }

    @Test("a directory the creation did not make stays, with what is in it")
    func onlyWhatItMade() async throws {
        let dir = TemporaryDirectory("nscreate-theirs")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(faults: faults)) { store in
            // Made after the store listed its namespaces: the store takes n3 for a new one.
            #expect(mkdir(dir.data + "/n3", 0o700) == 0)
            try Data("mine".utf8).write(to: URL(fileURLWithPath: dir.data + "/n3/notes"))
            faults.failSyscall(.open, pathContains: "/n3/000001.log", errno: EMFILE)
            #expect(await storeError { _ = try await store.namespace("n3") }?.code == .io)
            #expect(Self.exists(dir.data + "/n3/notes"))
        }
    }
}
