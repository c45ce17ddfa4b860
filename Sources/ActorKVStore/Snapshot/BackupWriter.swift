#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Writes a backup: a new data directory holding, for each namespace, a snapshot of a
/// ``NamespaceCopy`` and nothing else (opening it creates the first log segment after the
/// snapshot's sequence, as for a namespace whose log was compacted away).
///
/// Everything goes into a hidden directory beside the target, `.NAME.partial-PID-XXXXXXXX` (PID:
/// the process writing it), which is fsync'd file by file and renamed to the target only when
/// complete: a target that exists is a whole backup, and a backup cut short (a failure, the
/// server killed) leaves at most the hidden directory. A failure removes it; one a killed server
/// left is removed by the next backup to the same target (``BackupLeftovers``). Blocking: run it
/// off the actors.
enum BackupWriter {
    /// Where a backup goes.
    struct Paths {
        /// The directory asked for, without trailing slashes.
        var target: String
        /// Its parent directory.
        var parent: String
        /// The hidden directory beside it, where the backup is written.
        var partial: String
        /// The hidden directories of backups to the same target that a process killed while
        /// writing them left, removed before this one began.
        var removedLeftovers: [String] = []
    }

    /// The target `path` checked, and the hidden directory made beside it: refuses a path that is
    /// not absolute, whose parent is not an existing directory, that exists already, or that is
    /// inside `dataDirectory` (the store would take it for a namespace).
    static func prepare(_ path: String, dataDirectory: String, system: SystemCalls) throws(StoreError) -> Paths {
        guard path.hasPrefix("/") else {
            throw StoreError(.invalidArgument, "a backup needs an absolute path (the server does not share the client's working directory): \(path)")
        }
        var target = path
        while target.count > 1 && target.hasSuffix("/") { target.removeLast() }
        let slash = target.lastIndex(of: "/")!
        let name = String(target[target.index(after: slash)...])
        guard !name.isEmpty, name != ".", name != ".." else {
            throw StoreError(.invalidArgument, "a backup needs a path that names a new directory: \(path)")
        }
        let parent = slash == target.startIndex ? "/" : String(target[..<slash])
        let parentStatus: stat?
        do { parentStatus = try SystemCalls.status(parent) } catch { throw StoreError.io("reading", parent, error) }
        guard let parentStatus, parentStatus.st_mode & S_IFMT == S_IFDIR else {
            throw StoreError(.invalidArgument, "the backup's parent directory \(parent) does not exist or is not a directory")
        }
        try refuseExisting(target)
        let realParent: String, realData: String
        do { realParent = try SystemCalls.realPath(parent) } catch { throw StoreError.io("resolving", parent, error) }
        do { realData = try SystemCalls.realPath(dataDirectory) } catch { throw StoreError.io("resolving", dataDirectory, error) }
        if realParent == realData || realParent.hasPrefix(realData == "/" ? "/" : realData + "/") {
            throw StoreError(.invalidArgument, "a backup cannot go inside the data directory \(dataDirectory) (the server would take it for a namespace): \(path)")
        }
        let removed = BackupLeftovers.removeStale(in: parent, system: system)
        let partial = parent + (parent == "/" ? "" : "/") + BackupLeftovers.hiddenName(of: name)
        // Claimed before it exists: another backup's search for leftovers then never takes it
        // for one (``BackupLeftovers/removeStale(in:system:)``).
        BackupLeftovers.claim(partial)
        do throws(Errno) {
            guard try system.mkdir(partial) else { throw Errno(EEXIST) }
        } catch {
            BackupLeftovers.release(partial)
            throw StoreError.io("creating the backup directory", partial, error)
        }
        return Paths(target: target, parent: parent, partial: partial, removedLeftovers: removed)
    }

    /// Writes `copy` as the snapshot of namespace directory `partial/name`; returns the keys written.
    static func write(_ copy: NamespaceCopy, into partial: String, system: SystemCalls) throws(StoreError) -> Int {
        let files = NamespaceFiles(directory: partial + "/" + copy.name, system: system)
        do { try system.mkdir(files.directory) } catch { throw StoreError.io("creating the backup directory", files.directory, error) }
        let header = SnapshotCodec.Header(namespace: copy.name, lastSequence: copy.lastSequence, createdAt: UInt64(time(nil)), deadline: copy.deadline)
        return try SnapshotWriter.write(copy.map.take(), lifetimes: copy.lifetimes, expiredAt: copy.expiredAt, header: header,
                                        files: files).entries
    }

    /// Makes the hidden directory durable, renames it to the target and makes that durable.
    static func finish(_ paths: Paths, system: SystemCalls) throws(StoreError) {
        do { try system.fsyncDirectory(paths.partial) } catch { throw StoreError.io("syncing", paths.partial, error) }
        // Checked again: rename would replace an empty directory made there meanwhile.
        try refuseExisting(paths.target)
        do { try system.rename(paths.partial, paths.target) } catch { throw StoreError.io("renaming \(paths.partial) to", paths.target, error) }
        BackupLeftovers.release(paths.partial)
        do { try system.fsyncDirectory(paths.parent) } catch { throw StoreError.io("syncing", paths.parent, error) }
    }

    /// Removes what ``prepare(_:dataDirectory:system:)`` and ``write(_:into:system:)`` made of a
    /// backup that failed: the snapshots of `names` and their directories, the sequence floor's
    /// file, then the hidden one.
    /// Anything else found there stays (and so does the directory holding it).
    static func discard(_ partial: String, names: [String], system: SystemCalls) {
        defer { BackupLeftovers.release(partial) }
        for name in names {
            let files = NamespaceFiles(directory: partial + "/" + name, system: system)
            try? system.unlink(files.temporarySnapshotPath)
            try? system.unlink(files.snapshotPath)
            try? system.removeDirectory(files.directory)
        }
        try? system.unlink(partial + "/" + SequenceFloor.fileName + ".tmp")
        try? system.unlink(partial + "/" + SequenceFloor.fileName)
        try? system.removeDirectory(partial)
    }

    private static func refuseExisting(_ target: String) throws(StoreError) {
        let existing: stat?
        do { existing = try SystemCalls.linkStatus(target) } catch { throw StoreError.io("reading", target, error) }
        if existing != nil {
            throw StoreError(.invalidArgument, "\(target) exists already: a backup is written only to a new path")
        }
    }
}
