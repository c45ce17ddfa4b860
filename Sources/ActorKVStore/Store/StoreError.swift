/// An error raised by the storage engine.
///
/// A code from a closed list, and a message. The server maps each code to a wire error in one
/// place (`ErrorMapping` in ActorKVServer), by a switch with no default: a code added here fails
/// to compile there until it is given its wire code.
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: String, CaseIterable, Hashable, Sendable, CustomStringConvertible {
        /// A namespace name outside the allowed set (see ``NamespaceName``).
        case invalidNamespace
        /// A key that is empty or longer than ``StoreLimits/maxKeyBytes``.
        case invalidKey
        /// A value longer than the store's value limit.
        case valueTooLarge
        /// A scan cursor that this store did not produce.
        case invalidCursor
        /// A file of the namespace cannot be read as written; the namespace refuses to open and its
        /// files are left untouched.
        case corrupt
        /// A read, write or fsync failed; the message carries the errno text.
        case io
        /// An fsync failed earlier: the namespace no longer accepts writes until reopened.
        case durabilityLost
        /// The data directory is locked by another process.
        case locked
        /// The data directory or a namespace directory is unsafe (for example writable by other
        /// users, or a namespace directory that is a symbolic link).
        case unsafeDirectory
        /// The store or namespace has been closed.
        case closed
        /// The request is malformed in a way not covered above (for example an empty batch).
        case invalidArgument
        /// An increment of a value that is not a canonical signed 64-bit decimal integer.
        case notAnInteger
        /// An increment whose sum would not fit in a signed 64-bit integer.
        case overflow
        /// A change feed asked to resume from changes the namespace no longer holds.
        case compacted
        /// A write would create a namespace past ``StoreOptions/maxNamespaces``: nothing was done.
        case tooManyNamespaces
        /// Where the data lives cannot be reached now (cluster mode: no etcd member answers, or
        /// the cluster has no leader or quorum): nothing was done; try again later.
        case unavailable

        /// A short stable name, the case's name, e.g. "corrupt".
        public var name: String { rawValue }
        /// The name.
        public var description: String { name }
    }

    /// The kind of failure.
    public let code: Code
    /// A sentence saying what went wrong, naming the file and byte offset where there is one.
    public let message: String

    /// Creates an error with a code and a message.
    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// "code: message".
    public var description: String { "\(code): \(message)" }

    static func io(_ what: String, _ path: String, _ errno: Errno) -> StoreError {
        StoreError(.io, "\(what) \(path) failed: \(errno)")
    }

    static func corrupt(_ path: String, offset: Int, _ reason: String) -> StoreError {
        StoreError(.corrupt, "\(path) is corrupt at byte offset \(offset): \(reason); the file was left untouched")
    }
}
