#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What an offline check of one namespace found: whether it would open, and what opening it
/// would do to its files. Nothing is changed to find out.
public struct NamespaceCheck: Sendable, Equatable {
    /// The namespace.
    public var name: String
    /// Why the namespace would be refused (`corrupt`: file and byte offset; `io`: unreadable);
    /// nil when it would open.
    public var failure: StoreError?
    /// Live keys after replay (0 when refused).
    public var keys: Int
    /// The sequence number of the last write.
    public var lastSequence: UInt64
    /// The sequence number the snapshot covers (0: no snapshot).
    public var snapshotSequence: UInt64
    /// Log records after the snapshot that opening replays.
    public var recordsReplayed: Int
    /// A torn tail that opening would cut.
    public var tornTail: TornTail?
    /// Whether an unfinished `snapshot.json.tmp` is there, which opening would remove.
    public var temporarySnapshotLeft: Bool

    /// Whether the namespace would open.
    public var isReadable: Bool { failure == nil }

    /// One line for a person: the verdict and the facts behind it.
    public var summary: String {
        if let failure { return "namespace \(name): UNAVAILABLE: \(failure.message)" }
        var line = "namespace \(name): ok: \(keys) keys, last sequence \(lastSequence), snapshot through sequence \(snapshotSequence), \(recordsReplayed) log records to replay"
        if let torn = tornTail {
            line += "; " + torn.description("would be cut")
        }
        if temporarySnapshotLeft { line += "; an unfinished snapshot.json.tmp would be removed" }
        return line
    }
}

extension Store {
    /// Checks every namespace of the data directory at `directory` without changing any of its
    /// files (`actorkvd --check`): reads each snapshot and log as opening would, and reports what
    /// it found, namespaces in name order. Holds the directory's lock meanwhile, so that no server
    /// writes while it reads. A rename cut short (``RenameJournal``) is checked as the server's
    /// next start will have finished it: the target's new files under its name, the source gone.
    ///
    /// Throws `io` if the directory does not exist or cannot be listed, `locked` if a server (or
    /// anything else) holds it. A namespace that would be refused is a result, not an error.
    public static func check(directory: String) throws(StoreError) -> [NamespaceCheck] {
        guard let st = try? SystemCalls.status(directory), (st.st_mode & S_IFMT) == S_IFDIR else {
            throw StoreError(.io, "no data directory at \(directory)")
        }
        let lock = try DirectoryLock(directory: directory, writingPID: false, system: .plain)
        defer { withExtendedLifetime(lock) {} }
        // A floor file that does not read keeps the store from opening at all: say so as it would.
        _ = try SequenceFloor.read(directory: directory, system: .plain)
        var paths: [String: String] = [:]
        for name in try namespaceDirectories(in: directory, system: .plain) { paths[name] = directory + "/" + name }
        try RenameJournal.pending(in: directory)?.applied(to: &paths, directory: directory)
        return paths.keys.sorted().map { name in
            check(name: name, files: NamespaceFiles(directory: paths[name]!, system: .plain))
        }
    }

    private static func check(name: String, files: NamespaceFiles) -> NamespaceCheck {
        do {
            // Whose the directory is does not matter for a check (a backup copy may be anyone's);
            // that it is no symbolic link does, as for opening.
            try checkNamespaceDirectory(files.directory, allowShared: true)
            let found = try NamespaceRecovery.read(name: name, files: files)
            return NamespaceCheck(name: name, failure: nil, keys: found.data.map.count, lastSequence: found.lastSequence,
                                  snapshotSequence: found.snapshotSequence, recordsReplayed: found.recordsReplayed,
                                  tornTail: found.tornTail, temporarySnapshotLeft: found.temporarySnapshotLeft)
        } catch {
            return NamespaceCheck(name: name, failure: error, keys: 0, lastSequence: 0, snapshotSequence: 0,
                                  recordsReplayed: 0, tornTail: nil, temporarySnapshotLeft: false)
        }
    }
}
