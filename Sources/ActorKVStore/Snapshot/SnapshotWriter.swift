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
    /// Writes `map` (with the `lifetimes` of its keys) as the namespace's snapshot, leaving out
    /// the keys expired by `now` (milliseconds since the epoch; 0: none); returns the file's size
    /// and the number of entries written. Blocking: call it off the actor.
    static func write(_ map: OrderedMap, lifetimes: KeyLifetimes, expiredAt now: UInt64, header: SnapshotCodec.Header,
                      everyVersion: UInt64 = 0, files: NamespaceFiles) throws(StoreError) -> (size: Int, entries: Int) {
        let temp = files.temporarySnapshotPath
        let system = files.system
        do {
            let written = try writeTemporary(map, lifetimes: lifetimes, now: now, header: header, everyVersion: everyVersion,
                                             path: temp, system: system)
            try system.rename(temp, files.snapshotPath)
            try system.failpoint("compaction.afterRename")
            try system.fsyncDirectory(files.directory)
            try system.failpoint("compaction.afterDirectorySync")
            return written
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

    private static func writeTemporary(_ map: OrderedMap, lifetimes: KeyLifetimes, now: UInt64, header: SnapshotCodec.Header,
                                       everyVersion: UInt64, path: String, system: SystemCalls) throws -> (size: Int, entries: Int) {
        let fd = try system.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
        defer { SystemCalls.close(fd) }
        var offset = 0
        let entries = try SnapshotCodec.encode(map, header: header, lifetimes: lifetimes, expiredAt: now,
                                               everyVersion: everyVersion) { (chunk: UnsafeRawBufferPointer) throws(Errno) in
            try system.pwriteAll(fd, chunk, at: offset, path: path)
            offset += chunk.count
        }
        try system.failpoint("compaction.afterTempWrite")
        try system.fsync(fd, path: path)
        try system.failpoint("compaction.afterTempSync")
        return (offset, entries)
    }
}
