import Synchronization

/// A trace of every file operation that changes what a store leaves on disk, in the order the
/// kernel carried them out: for tests that work out what a power loss at each point could leave
/// behind (`PowerLossTests`).
///
/// A test hands one to the store through ``FaultInjector/init(recording:)``; only that store's
/// operations are recorded, so suites running side by side never record each other's. Reads are
/// not recorded. A store without one pays nothing more than the injector's nil check
/// (``StoreOptions/faults`` is nil in production).
///
/// Paths are recorded as the engine passed them. An operation is recorded once it has succeeded
/// (a `pwrite` that wrote part of its bytes before failing records that part).
public final class FileOperationRecorder: Sendable {
    /// One mutating file operation.
    public enum Operation: Sendable, Equatable {
        /// `open` with `O_CREAT` or `O_TRUNC`: creates the file if it is absent; `truncates`
        /// when `O_TRUNC` cut it to nothing.
        case open(path: String, truncates: Bool)
        /// `pwrite` of `bytes` at `offset`.
        case write(path: String, offset: Int, bytes: [UInt8])
        /// `ftruncate` to `length` bytes.
        case truncate(path: String, length: Int)
        /// `fsync` or `fdatasync` of a file, or `fsync` of a directory.
        case sync(path: String)
        /// `rename`, replacing `to` if it exists.
        case rename(from: String, to: String)
        /// `unlink` (also of a file that was not there: the engine does not treat that as an error).
        case unlink(path: String)
        /// `mkdir` that created the directory.
        case mkdir(path: String)
    }

    private let trace = Mutex<[Operation]>([])

    /// An empty trace.
    public init() {}

    /// The operations recorded so far, in order.
    public var operations: [Operation] { trace.withLock { $0 } }

    /// How many operations have been recorded: a test notes it when a write is acknowledged, so
    /// that the acknowledgement is known to come after exactly the first `count` operations.
    public var count: Int { trace.withLock { $0.count } }

    func record(_ operation: Operation) {
        trace.withLock { $0.append(operation) }
    }
}
