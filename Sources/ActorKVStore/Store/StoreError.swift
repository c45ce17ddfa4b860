/// An error raised by the storage engine.
///
/// A struct around an extensible code, so that codes can be added without breaking callers.
/// The server maps each code to a wire error in one place (`ErrorMapping` in ActorKVServer).
public struct StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// A short stable name, e.g. "corrupt".
        public let name: String
        init(_ name: String) { self.name = name }
        /// The name.
        public var description: String { name }

        /// A namespace name outside the allowed set (see ``NamespaceName``).
        public static let invalidNamespace = Code("invalidNamespace")
        /// A key that is empty or longer than ``StoreLimits/maxKeyBytes``.
        public static let invalidKey = Code("invalidKey")
        /// A value longer than the store's value limit.
        public static let valueTooLarge = Code("valueTooLarge")
        /// A scan cursor that this store did not produce.
        public static let invalidCursor = Code("invalidCursor")
        /// A file of the namespace cannot be read as written; the namespace refuses to open and its
        /// files are left untouched.
        public static let corrupt = Code("corrupt")
        /// A read, write or fsync failed; the message carries the errno text.
        public static let io = Code("io")
        /// An fsync failed earlier: the namespace no longer accepts writes until reopened.
        public static let durabilityLost = Code("durabilityLost")
        /// The data directory is locked by another process.
        public static let locked = Code("locked")
        /// The data directory is unsafe (for example writable by other users).
        public static let unsafeDirectory = Code("unsafeDirectory")
        /// The store or namespace has been closed.
        public static let closed = Code("closed")
        /// The request is malformed in a way not covered above (for example an empty batch).
        public static let invalidArgument = Code("invalidArgument")
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
