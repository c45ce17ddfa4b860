/// What ``Store/backup(to:)`` wrote.
public struct BackupSummary: Sendable, Equatable {
    /// One namespace in the backup.
    public struct Entry: Sendable, Equatable {
        /// Its name.
        public var name: String
        /// The keys written (those expired by the moment of the copy left out).
        public var keys: Int
        /// The last sequence the backup holds: its snapshot's.
        public var lastSequence: UInt64
    }

    /// The backup's directory.
    public var path: String
    /// The namespaces in it, in name order.
    public var namespaces: [Entry]
    /// The namespaces of the store that are not in it, because they could not be opened (their
    /// files are corrupt, or cannot be read now), with why.
    public var unavailable: [String: StoreError]
}
