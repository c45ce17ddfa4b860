/// A backup of a running store: every namespace's state, written as a new data directory that a
/// server (or ``Store``) opens as it is.
extension Store {
    /// Writes a backup of every namespace to the new directory `path` (absolute; its parent must
    /// exist, and it must not be inside this store's directory), made durable before this returns.
    ///
    /// Each namespace is copied (copy-on-write: reads and writes go on) and written as a snapshot
    /// off the actors. The ``SequenceFloor`` goes with them, when a namespace was ever removed. With a ``StoreOptions/serialExecutor`` (the server's default, `--execution
    /// loop`), every namespace is copied at the same moment, between two runs: the backup holds
    /// a write only with every write performed before it, in every namespace. Without one (an
    /// embedded store, `--execution pool`), each namespace is copied at a moment of its own. Expired keys are left out; keys owned by a connection are in it, and
    /// deleted when it is opened, as after a restart.
    ///
    /// The backup is written to a hidden directory beside `path` and renamed to `path` once
    /// complete, so `path` never holds part of one; the hidden directories that earlier backups
    /// cut short left in the same directory are removed first (``BackupLeftovers``). A namespace that cannot be opened is left out
    /// and named in ``BackupSummary/unavailable``. Throws `invalidArgument` for a bad path, `io`
    /// when writing fails (what was written is removed), `closed` if the store is closed.
    public func backup(to path: String) async throws(StoreError) -> BackupSummary {
        // Every namespace on disk opened first; those that cannot be are named in the summary.
        let unavailable = try await openEveryNamespace()
        let system = self.system
        let paths = try await BlockingIO.run { () throws(StoreError) in
            try BackupWriter.prepare(path, dataDirectory: self.directory, system: system)
        }
        for leftover in paths.removedLeftovers {
            options.log("backup: removed \(leftover), left by a backup cut short (its server stopped or was killed while writing it)")
        }
        // A name removed before the copy, used again in it, must number on after its earlier life.
        let floor = sequenceFloor
        let copies: [NamespaceCopy]
        if options.serialExecutor != nil, let first = openNamespacesNow().first {
            // The namespaces are listed again in the copy's own job: one created since the list
            // above (and written to before that moment) is copied too.
            copies = await first.copyTogether { self.openNamespacesNow() }
        } else {
            var each: [NamespaceCopy] = []
            for namespace in openNamespacesNow() { each.append(await namespace.copyForBackup()) }
            copies = each
        }
        let entries = try await BlockingIO.run { () throws(StoreError) in
            var entries: [BackupSummary.Entry] = []
            do throws(StoreError) {
                for copy in copies {
                    entries.append(.init(name: copy.name, keys: try BackupWriter.write(copy, into: paths.partial, system: system),
                                         lastSequence: copy.lastSequence))
                }
                if floor > 0 { try SequenceFloor.write(floor, directory: paths.partial, system: system) }
                try BackupWriter.finish(paths, system: system)
            } catch {
                BackupWriter.discard(paths.partial, names: copies.map(\.name), system: system)
                throw error
            }
            return entries
        }
        options.log("backup of \(entries.count) namespace(s), \(entries.reduce(0) { $0 + $1.keys }) keys, written to \(paths.target)"
                    + (unavailable.isEmpty ? "" : "; left out, unavailable: \(unavailable.keys.sorted().joined(separator: ", "))"))
        return BackupSummary(path: paths.target, namespaces: entries, unavailable: unavailable)
    }
}
