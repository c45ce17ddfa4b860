#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes a snapshot file atomically: temp file, fsync, rename over the old one, fsync the directory.
///
/// Each step is a named failpoint, so crash tests can stop the process between any two of them
/// and check that reopening gives exactly the acknowledged data.
enum SnapshotWriter {
    /// Writes `map` (with the `lifetimes` of its keys) as the namespace's snapshot; returns the
    /// file's size. Blocking: call it off the actor.
    static func write(_ map: OrderedMap, lifetimes: KeyLifetimes, header: SnapshotCodec.Header, files: NamespaceFiles) throws(StoreError) -> Int {
        let temp = files.temporarySnapshotPath
        let system = files.system
        do {
            let size = try writeTemporary(map, lifetimes: lifetimes, header: header, path: temp, system: system)
            try system.rename(temp, files.snapshotPath)
            try system.failpoint("compaction.afterRename")
            try system.fsyncDirectory(files.directory)
            try system.failpoint("compaction.afterDirectorySync")
            return size
        } catch let error as Errno {
            try? system.unlink(temp)
            throw StoreError.io("writing snapshot", files.snapshotPath, error)
        } catch let error as StoreError {
            try? system.unlink(temp)
            throw error
        } catch {
            try? system.unlink(temp)
            throw StoreError(.io, "writing snapshot \(files.snapshotPath) failed: \(error)")
        }
    }

    private static func writeTemporary(_ map: OrderedMap, lifetimes: KeyLifetimes, header: SnapshotCodec.Header, path: String,
                                       system: SystemCalls) throws -> Int {
        let fd = try system.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        defer { SystemCalls.close(fd) }
        var offset = 0
        try SnapshotCodec.encode(map, header: header, lifetimes: lifetimes) { (chunk: UnsafeRawBufferPointer) throws(Errno) in
            try system.pwriteAll(fd, chunk, at: offset, path: path)
            offset += chunk.count
        }
        try system.failpoint("compaction.afterTempWrite")
        try system.fsync(fd, path: path)
        try system.failpoint("compaction.afterTempSync")
        return offset
    }
}
