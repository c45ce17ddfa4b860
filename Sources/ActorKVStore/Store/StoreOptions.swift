/// When a write's log record reaches stable storage, relative to the write returning.
public enum DurabilityPolicy: String, Sendable, CaseIterable {
    /// A write returns only after its record is fsync'd. Concurrent writers share one fsync
    /// (group commit). Survives kill -9 and power loss.
    case always
    /// A write returns once its record is handed to the kernel; a background fsync follows within
    /// about a second. Survives kill -9; power loss can lose about the last second.
    case everysec
    /// A write returns once handed to the kernel; the kernel decides when it reaches the disk.
    /// Survives kill -9; power loss can lose whatever the kernel had not written back.
    case no
}

/// When a namespace rewrites its snapshot and drops the log records it covers.
public struct CompactionPolicy: Sendable, Equatable {
    /// Compact when the log is larger than `logToLiveRatio` times the live data ...
    public var logToLiveRatio: Double
    /// ... and at least this many bytes.
    public var minimumLogBytes: Int
    /// Also compact this often (seconds) if anything was written since the last snapshot; 0 turns it off.
    public var interval: Double

    /// Creates a policy; the defaults are a ratio of 2, 64 MiB (Redis's `auto-aof-rewrite-min-size`)
    /// and 60 s.
    public init(logToLiveRatio: Double = 2, minimumLogBytes: Int = 64 << 20, interval: Double = 60) {
        self.logToLiveRatio = logToLiveRatio
        self.minimumLogBytes = minimumLogBytes
        self.interval = interval
    }

    /// Whether a log of `logBytes` over `liveBytes` of live data has grown enough to compact.
    public func isDue(logBytes: Int, liveBytes: Int) -> Bool {
        logBytes >= minimumLogBytes && Double(logBytes) > logToLiveRatio * Double(liveBytes)
    }
}

/// Size limits on what a namespace stores.
public struct StoreLimits: Sendable, Equatable {
    /// The longest key, in bytes (keys are 1 to this many bytes, any byte values).
    public var maxKeyBytes: Int
    /// The longest value, in bytes.
    public var maxValueBytes: Int

    /// The default ``maxValueBytes``: 32 MiB, the same as `actorkvd --max-value-bytes`, so a
    /// value an embedded store accepts is one a server accepts too.
    public static let defaultMaxValueBytes = 32 << 20

    /// Creates limits; the defaults are 64 KiB keys and 32 MiB values (``defaultMaxValueBytes``,
    /// the server's default).
    public init(maxKeyBytes: Int = 64 << 10, maxValueBytes: Int = StoreLimits.defaultMaxValueBytes) {
        self.maxKeyBytes = maxKeyBytes
        self.maxValueBytes = maxValueBytes
    }
}

extension StoreLimits {
    /// Why `operation` is invalid under these limits (an empty or too long key, a too large value,
    /// an empty batch), or nil if it is valid. Checked before anything is written.
    public func problem(with operation: Operation) -> StoreError? {
        switch operation {
        case .get(let key), .getVersioned(let key): return keyProblem(key)
        case .delete(let keys), .deadlines(let keys): return keys.lazy.compactMap(keyProblem).first
        case .exists(let keys), .getMany(let keys): return keys.lazy.compactMap(keyProblem).first
        case .expire(let expiry): return expiry.keys.lazy.compactMap(keyProblem).first
        case .setAll(let setting):
            return zip(setting.keys, setting.values).lazy.compactMap { self.keyProblem($0) ?? self.valueProblem($1) }.first
        case .count, .memoryUsage, .scan, .sample, .packedEntries, .setNamespaceDeadline, .namespaceDeadline: return nil
        case .put(let key, let value), .set(let key, let value): return keyProblem(key) ?? valueProblem(value)
        case .conditionalPut(let key, let value, _): return keyProblem(key) ?? valueProblem(value)
        case .update(let key, _), .increment(let key, _), .setTimeToLive(let key, _), .timeToLive(let key): return keyProblem(key)
        case .lifetimePut(let put): return keyProblem(put.key) ?? valueProblem(put.value)
        case .batch(let steps):
            if steps.isEmpty { return StoreError(.invalidArgument, "a batch needs at least one operation") }
            for step in steps {
                switch step {
                case .put(let key, let value), .set(let key, let value), .setIfAbsent(let key, let value):
                    if let p = keyProblem(key) ?? valueProblem(value) { return p }
                case .delete(let key), .update(let key, _), .ifVersion(let key, _), .increment(let key, _):
                    if let p = keyProblem(key) { return p }
                case .expire(let expiry): if let p = problem(with: .expire(expiry)) { return p }
                case .deadlines(let keys): if let p = problem(with: .deadlines(keys)) { return p }
                case .setAll(let setting): if let p = problem(with: .setAll(setting)) { return p }
                case .unchangedSince, .read, .setNamespaceDeadline: continue
                }
            }
            return nil
        }
    }

    /// Why `key` is invalid under these limits (empty or too long), or nil: ``problem(with:)``
    /// of a GET of it.
    func problem(withKey key: ArraySlice<UInt8>) -> StoreError? { keyProblem(key) }

    /// Why a value an ``Update`` computed is invalid under these limits, or nil.
    func problem(withComputedValue value: [UInt8]) -> StoreError? { valueProblem(value) }

    private func keyProblem<Key: BorrowedBytes>(_ key: Key) -> StoreError? {
        guard key.count == 0 || key.count > maxKeyBytes else { return nil }
        return StoreError(.invalidKey, "key is \(key.count) bytes; keys are 1 to \(maxKeyBytes) bytes")
    }

    private func valueProblem<Value: BorrowedBytes>(_ value: Value) -> StoreError? {
        guard value.count > maxValueBytes else { return nil }
        return StoreError(.valueTooLarge, "value is \(value.count) bytes; the limit is \(maxValueBytes)")
    }
}

/// How a ``Store`` behaves.
public struct StoreOptions: Sendable {
    /// When writes become durable; `everysec` by default.
    public var durability: DurabilityPolicy
    /// When snapshots are written.
    public var compaction: CompactionPolicy
    /// Key and value size limits.
    public var limits: StoreLimits
    /// Open even if other users may write to the data directory.
    public var allowSharedDirectory: Bool
    /// How far ahead of its records each log segment is filled with zeros.
    public var reservation: LogReservation
    /// Receives one line per notable event (recovery facts, torn tails cut, compactions, errors).
    public var log: @Sendable (String) -> Void
    /// How many of each namespace's most recent changes its log keeps for change feeds that
    /// resume (`CHANGES … FROM`), past what recovery needs (100,000 by default; less than 0
    /// counts as 0).
    public var changesHistory = 100_000
    /// The most bytes of log segments each namespace keeps for that history (64 MiB by
    /// default): past them a compaction drops the oldest, whatever ``changesHistory`` says, so
    /// that a namespace of large values keeps fewer changes rather than gigabytes of them (less
    /// than 0 counts as 0).
    public var changesHistoryBytes = 64 << 20
    /// How many bytes of records the active log segment may hold before a compaction seals it
    /// even though history still needs all it holds (1 MiB by default). A compaction seals the
    /// active segment, and starts a new one, when it holds a change older than the last
    /// ``changesHistory`` or this many bytes of records; otherwise the segment goes on taking
    /// writes, its records before the snapshot kept as history, so that a namespace compacted
    /// for a write or two does not gain a file at each compaction. 0 seals at every compaction.
    public var segmentSealBytes = 1 << 20
    /// How many bytes of recent changes a followed namespace holds in memory: a follower that
    /// falls further behind is dropped (16 MiB by default).
    public var changesLagBytes = 16 << 20
    /// The most namespaces the data directory may hold: a write that would create one more fails
    /// with ``StoreError/Code/tooManyNamespaces``. Each open namespace keeps its log open (a
    /// file descriptor), so the server bounds them as it bounds connections (an idle one costs
    /// no background work). Namespaces already there are opened whatever their number. No limit by
    /// default: an embedding app that makes many should set one well below its open files limit
    /// (a process out of descriptors can be aborted by the Dispatch library; README, "Embedding and
    /// clients").
    public var maxNamespaces = Int.max
    /// What sets ``maxNamespaces``, named in parentheses where the limit is told: in the refusal
    /// of a namespace past it and in the warning about a data directory that holds more. The
    /// server's flag by default; the server names its open files limit when that is what binds.
    public var maxNamespacesSource = "actorkvd --max-namespaces"
    /// Whether a write that would create a namespace past ``maxNamespaces`` first makes room by
    /// removing, as ``Store/removeNamespace(_:)`` does, open namespaces that hold no key and that
    /// nobody follows (up to 64 at once), and is refused only when none is. The server's choice
    /// (Redis clients see a hash without fields as gone); off by default, because a `Namespace`
    /// or `Repository` an app holds on to refuses writes once its namespace is removed.
    public var removesEmptyNamespacesForRoom = false
    /// For tests: the injector whose armed faults this store's syscalls and failpoints obey, and
    /// no other store's. Nil (the default) injects nothing.
    public var faults: FaultInjector?
    /// Where the namespaces' own background work runs (the expiry sweeper, the deletes of
    /// expired keys met by reads): the server passes its event loop's executor, so that this
    /// work and the requests meet on the loop thread instead of handing each namespace actor
    /// between threads. Nil (the default): Swift's global executor.
    public var backgroundExecutor: (any TaskExecutor)?
    /// The serial executor every namespace actor runs on. The server passes its event loop's, so
    /// that the loop can run a turn's requests on a namespace synchronously
    /// (``Store/executeNow(_:inNamespace:)``): no task and no actor hop per turn. Its jobs must run
    /// one at a time, including before the loop starts (while the store opens) and after it stops,
    /// and its `checkIsolated()` must trap anywhere but where the loop runs those synchronous turns
    /// (``Store/executeNow(_:inNamespace:)`` asks it directly, so an executor with the default,
    /// which always traps, cannot be given here). Nil (the default): each namespace behaves as a
    /// default actor.
    public var serialExecutor: (any SerialExecutor)?
    /// For tests: false stops the once-a-second housekeeping from running by itself; the test
    /// runs its rounds (``Housekeeper/tick(now:)``).
    var housekeepingTicks = true

    /// Creates options; every parameter has a working default (`reservation`: the
    /// ``LogReservation/standard(for:)`` one for `durability`).
    public init(durability: DurabilityPolicy = .everysec, compaction: CompactionPolicy = CompactionPolicy(),
                limits: StoreLimits = StoreLimits(), allowSharedDirectory: Bool = false,
                reservation: LogReservation? = nil, faults: FaultInjector? = nil,
                log: @escaping @Sendable (String) -> Void = { _ in }) {
        self.durability = durability
        self.reservation = reservation ?? .standard(for: durability)
        self.compaction = compaction
        self.limits = limits
        self.allowSharedDirectory = allowSharedDirectory
        self.faults = faults
        self.log = log
    }
}
