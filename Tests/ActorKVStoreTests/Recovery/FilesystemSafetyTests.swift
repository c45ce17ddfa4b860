import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What someone who can plant files in or next to a data directory must not achieve: writes
/// through symbolic links into other files, or a server using directories another user owns.
@Suite("Filesystem safety: symbolic links, ownership, a check that writes nothing")
struct FilesystemSafetyTests {
    /// A file outside the data directory that a symbolic link will point at, with known bytes.
    private func victim(in dir: TemporaryDirectory, _ name: String = "victim") throws -> (path: String, bytes: [UInt8]) {
        let path = dir.path + "/" + name
        let bytes = b("IMPORTANT, not ActorKV's")
        try writeFile(path, bytes)
        return (path, bytes)
    }

    @Test("a .lock that is a symbolic link is refused, and the file it points at is untouched")
    func lockSymlink() async throws {
        let dir = TemporaryDirectory("fs")
        defer { dir.remove() }
        let target = try victim(in: dir)
        mkdir(dir.data, 0o700)
        symlink(target.path, dir.data + "/.lock")
        let error = storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }
        #expect(error?.code == .io, "\(String(describing: error))")
        #expect(error?.message.contains(".lock") == true)
        #expect(try readFile(target.path) == target.bytes)
        // Nor does the offline check write through it.
        #expect(storeErrorSync { _ = try Store.check(directory: dir.data) } != nil)
        #expect(try readFile(target.path) == target.bytes)
    }

    @Test("a namespace directory that is a symbolic link is refused; nothing is written where it points")
    func namespaceSymlink() async throws {
        let dir = TemporaryDirectory("fs")
        defer { dir.remove() }
        let elsewhere = dir.path + "/elsewhere"
        mkdir(elsewhere, 0o700)
        mkdir(dir.data, 0o700)
        symlink(elsewhere, dir.data + "/planted")
        try await withStore(dir.data) { store in
            let error = await storeError { try await store.namespace("planted").put(b("k"), b("v")) }
            #expect(error?.code == .unsafeDirectory, "\(String(describing: error))")
            #expect(error?.message.contains("symbolic link") == true)
            // Other namespaces work.
            try await store.namespace("fine").put(b("k"), b("v"))
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
        let report = try Store.check(directory: dir.data)
        #expect(report.first { $0.name == "planted" }?.failure?.code == .unsafeDirectory)
    }

    @Test("a snapshot.json.tmp planted as a symbolic link fails the compaction without writing through it")
    func temporarySnapshotSymlink() async throws {
        let dir = TemporaryDirectory("fs")
        defer { dir.remove() }
        let target = try victim(in: dir)
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("n")
            try await ns.put(b("secret"), b("value"))
            symlink(target.path, dir.data + "/n/snapshot.json.tmp")
            #expect(await storeError { try await ns.compact() } != nil)
            #expect(await ns.get(b("secret")) == b("value"))
        }
        #expect(try readFile(target.path) == target.bytes, "the snapshot went nowhere near the victim")
    }

    @Test("the offline check writes nothing to .lock and creates none")
    func checkWritesNoLock() async throws {
        let dir = TemporaryDirectory("fs")
        defer { dir.remove() }
        try await withStore(dir.data) { store in try await store.namespace("n").put(b("k"), b("v")) }
        try writeFile(dir.data + "/.lock", b("12345"))
        _ = try Store.check(directory: dir.data)
        #expect(try readFile(dir.data + "/.lock") == b("12345"))
        unlink(dir.data + "/.lock")
        #expect(try Store.check(directory: dir.data).count == 1)
        #expect(!fileExists(dir.data + "/.lock"))
    }

    @Test("a data or namespace directory owned by another user is refused unless sharing is allowed (as root)")
    func ownership() async throws {
        guard getuid() == 0 else { return }
        let dir = TemporaryDirectory("fs")
        defer { dir.remove() }
        mkdir(dir.data, 0o700)
        chown(dir.data, 65534, 65534)
        let error = storeErrorSync { _ = try Store(directory: dir.data, options: testOptions()) }
        #expect(error?.code == .unsafeDirectory)
        #expect(error?.message.contains("owned by uid 65534") == true, "\(String(describing: error))")
        try await withStore(dir.data, testOptions(allowShared: true)) { _ in }

        chown(dir.data, 0, 0)
        mkdir(dir.data + "/theirs", 0o700)
        chown(dir.data + "/theirs", 65534, 65534)
        try await withStore(dir.data) { store in
            #expect(await storeError { _ = try await store.namespace("theirs") }?.code == .unsafeDirectory)
        }
        try await withStore(dir.data, testOptions(allowShared: true)) { store in
            try await store.namespace("theirs").put(b("k"), b("v"))
        }
    }
}
