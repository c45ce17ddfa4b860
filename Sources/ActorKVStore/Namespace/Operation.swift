/// One request to a namespace, as the server hands them over in pipeline order.
public enum Operation: Sendable {
    /// The value of a key. (The key is a slice so that a server can pass a request's key where
    /// the request holds it; ``get(_:)-swift.type.method`` takes an array.)
    case get(ArraySlice<UInt8>)
    /// How many of the keys exist.
    case exists([[UInt8]])
    /// The values of several keys, read together: a ``Outcome/batch(_:)`` of one
    /// ``Outcome/value(_:)`` per key, in order, nil where it is absent (Redis's HMGET).
    case getMany([[UInt8]])
    /// The value of a key and its version (a ``Outcome/versioned(_:)``).
    case getVersioned(ArraySlice<UInt8>)
    /// Set a key. (A slice key as for ``get(_:)-swift.enum.case``.)
    case put(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>)
    /// Set a key, as ``put(key:value:)-swift.enum.case``, reporting whether it was added: the
    /// outcome is ``Outcome/integer(_:)`` 1 if the key was absent (or expired), 0 if a value was
    /// replaced (Redis's HSET of one field). A put's cost: the record is a put's, and whether
    /// the key was new is what the map's insert finds anyway.
    case set(key: ArraySlice<UInt8>, value: ArraySlice<UInt8>)
    /// Set a key only if its version is `ifVersion` (0: only if it is absent). The outcome is
    /// the key's new version (``Outcome/version(_:)``), or ``Outcome/conditionFailed`` with
    /// nothing written. (The key is an array, so that the payload is no larger than a PUT's:
    /// a larger one would make every operation, plain PUTs included, larger to copy.)
    case conditionalPut(key: [UInt8], value: ArraySlice<UInt8>, ifVersion: UInt64)
    /// Add `by` to the signed 64-bit decimal integer stored under `key` (an absent key counts
    /// as 0) and store the sum in decimal; the outcome is the sum (``Outcome/integer(_:)``).
    /// A value that is not a canonical decimal integer fails with ``StoreError/Code/notAnInteger``
    /// and a sum out of range with ``StoreError/Code/overflow``, nothing written.
    case increment(key: [UInt8], by: Int64)
    /// Remove keys; the outcome counts those that existed.
    case delete([[UInt8]])
    /// Apply the steps all-or-nothing as one log record; each step sees the steps before it.
    /// If a guard (``BatchStep/ifVersion(key:_:)``) does not hold, nothing is applied and the
    /// outcome is ``Outcome/conditionFailed``.
    case batch([BatchStep])
    /// Set, delete or keep a key according to what ``Update`` computes from its current value,
    /// as the writes before it in the same run (and the same batch) left it. The outcome is the
    /// key's value afterwards.
    case update(key: [UInt8], Update)
    /// Set a key with a lifetime (a deadline, an owner), and optionally only if its version is
    /// `ifVersion`: the outcome is ``Outcome/stored``, or with a condition the key's new version
    /// or ``Outcome/conditionFailed``. (Not boxed: an operation is no larger for its payload,
    /// 65 bytes as a PUT's two slices with their case, and a box was an allocation per lock
    /// acquire.)
    case lifetimePut(LifetimePut)
    /// Give an existing key a deadline `milliseconds` from now (at or before now: delete it), or
    /// remove its deadline (nil); the outcome is ``Outcome/integer(_:)`` 1, or 0 when the key is
    /// absent (or, removing, has no deadline). The value, version and owner stay.
    case setTimeToLive(key: [UInt8], milliseconds: Int64?)
    /// The milliseconds left before `key` expires: -1 when it has no deadline, -2 when it is absent.
    case timeToLive([UInt8])
    /// Give several keys a deadline, or remove theirs, each when the condition holds, all in one
    /// record (Redis's `HEXPIRE` family). The outcome is a ``Outcome/batch(_:)`` of one
    /// ``Outcome/integer(_:)`` per key, in order: its ``KeyExpiry/Result``'s raw value.
    case expire(KeyExpiry)
    /// Write several keys' values, all or none, with one rule for their lifetimes (Redis 8's
    /// `HSETEX`), in one record: ``Outcome/integer(_:)`` 1 when written (or, a deadline at or
    /// before now, the keys deleted), 0 when ``KeySetting/presence`` did not hold.
    case setAll(KeySetting)
    /// The deadline of each key: a ``Outcome/batch(_:)`` of one ``Outcome/integer(_:)`` per key,
    /// in order, milliseconds since the epoch, -1 when it has none, -2 when it is absent.
    case deadlines([[UInt8]])
    /// The number of keys.
    case count
    /// One page of keys and values in key order.
    case scan(ScanCursor, prefix: [UInt8], limit: Int)

    /// `count` operations to be overwritten in place: ``count`` each, which holds nothing to
    /// release. Appended into reserved room: `Array(repeating:count:)` of them looked the array
    /// storage's metadata up in the runtime's cache on every call
    /// (`swift_getCanonicalPrespecializedGenericMetadata`, then `swift_getGenericMetadata` behind
    /// a lock: 6% of the server's own CPU at one request a turn).
    public static func placeholders(count: Int) -> [Operation] {
        var operations: [Operation] = []
        operations.reserveCapacity(count)
        for _ in 0..<count { operations.append(.count) }
        return operations
    }

    /// The value of `key`.
    public static func get(_ key: [UInt8]) -> Operation { .get(key[...]) }

    /// Set `key` to `value`.
    public static func put(key: [UInt8], value: [UInt8]) -> Operation { .put(key: key[...], value: value[...]) }

    /// Whether the operation is a plain put (``put(key:value:)-swift.enum.case`` or
    /// ``set(key:value:)``), whose record is encoded from the request as it is. (No payload is
    /// bound: asked of every operation of a run, it retains nothing.)
    var isPlainPut: Bool {
        switch self {
        case .put, .set: return true
        default: return false
        }
    }

    /// Whether the operation is a ``batch(_:)`` (asked where it lies, it retains nothing).
    public var isBatch: Bool {
        switch self {
        case .batch: return true
        default: return false
        }
    }

    /// The key of a plain put (see ``isPlainPut``); nil for the others.
    var plainPutKey: ArraySlice<UInt8>? {
        switch self {
        case .put(let key, _), .set(let key, _): return key
        default: return nil
        }
    }

    /// The key of a GET, nil for any other operation. Read in place: a pattern match on an
    /// array's element copied the whole operation out first (a retain and a release of its
    /// request's bytes, per GET of a pipeline).
    var getKey: ArraySlice<UInt8>? { Self.getKey(of: self) }

    private static func getKey(of operation: borrowing Operation) -> ArraySlice<UInt8>? {
        switch operation {
        case .get(let key): key
        default: nil
        }
    }

    /// Whether the operation changes data (and so is logged and waits for durability).
    public var isWrite: Bool {
        switch self {
        case .put, .set, .conditionalPut, .increment, .delete, .batch, .update, .lifetimePut, .setTimeToLive, .expire, .setAll: return true
        case .get, .getVersioned, .exists, .getMany, .count, .scan, .timeToLive, .deadlines: return false
        }
    }

    /// Whether the operation reads the state that the writes before it leave, and so needs the
    /// planner to resolve it before its record can be encoded.
    var readsBeforeWriting: Bool {
        switch self {
        case .update, .conditionalPut, .increment, .lifetimePut, .setTimeToLive, .expire, .setAll: return true
        case .batch(let steps): return steps.contains { $0.readsBeforeWriting }
        case .get, .getVersioned, .exists, .getMany, .put, .set, .delete, .count, .scan, .timeToLive, .deadlines: return false
        }
    }

    /// Whether the operation may bring a namespace that does not exist into existence: a PUT, a
    /// batch that may write a value, an increment, or an update (which may compute a value).
    /// Deletes and reads never do, nor a write whose condition cannot hold where nothing exists.
    var mayCreateNamespace: Bool {
        switch self {
        case .put, .set, .update, .increment: return true
        case .conditionalPut(_, _, let version): return version == 0
        case .lifetimePut(let put): return (put.ifVersion ?? 0) == 0
        case .setAll(let setting): return setting.presence != .allPresent
        case .batch(let steps): return Self.guardsHoldWhereNothingExists(steps) && steps.contains { $0.mayWriteValue }
        case .get, .getVersioned, .exists, .getMany, .delete, .count, .scan, .setTimeToLive, .timeToLive, .expire, .deadlines: return false
        }
    }

    /// Whether every guard among `steps` holds where the namespace does not exist (asks for
    /// version 0, or for no change since sequence 0).
    static func guardsHoldWhereNothingExists(_ steps: [BatchStep]) -> Bool {
        steps.allSatisfy {
            switch $0 {
            case .ifVersion(_, let version), .unchangedSince(let version): return version == 0
            default: return true
            }
        }
    }
}

/// A PUT with a lifetime (``Operation/lifetimePut(_:)``).
public struct LifetimePut: Sendable {
    /// The key.
    public var key: [UInt8]
    /// The value. (A slice, as a PUT's, so that a server passes the value where its request
    /// holds it: a conditional put whose condition fails, such as a lock's refused acquire,
    /// copies nothing.)
    public var value: ArraySlice<UInt8>
    /// Milliseconds from the write until the key expires; 0: no deadline.
    public var milliseconds: UInt64
    /// The connection that owns the key (ephemeral); 0: nobody.
    public var owner: UInt64
    /// Write only if the key's version is this (0: only if absent); nil: unconditionally.
    public var ifVersion: UInt64?

    /// A put of `value` under `key` with this lifetime and condition.
    public init(key: [UInt8], value: ArraySlice<UInt8>, milliseconds: UInt64 = 0, owner: UInt64 = 0, ifVersion: UInt64? = nil) {
        self.key = key
        self.value = value
        self.milliseconds = milliseconds
        self.owner = owner
        self.ifVersion = ifVersion
    }

    /// A put of `value` under `key` with this lifetime and condition.
    public init(key: [UInt8], value: [UInt8], milliseconds: UInt64 = 0, owner: UInt64 = 0, ifVersion: UInt64? = nil) {
        self.init(key: key, value: value[...], milliseconds: milliseconds, owner: owner, ifVersion: ifVersion)
    }
}

/// One step of a ``Operation/batch(_:)``.
public enum BatchStep: Sendable {
    /// Set a key.
    case put(key: [UInt8], value: [UInt8])
    /// Remove a key; its outcome says whether it existed at that point of the run.
    case delete(key: [UInt8])
    /// Set, delete or keep a key according to what ``Update`` computes from its value at that
    /// point of the run; its outcome is the key's value afterwards.
    case update(key: [UInt8], Update)
    /// A guard: the batch applies only if the key's version is this at that point of the run
    /// (0: the key is absent). Writes nothing; its outcome is ``Outcome/stored``. A guard after a
    /// write to the same key in the batch sees that write (0 then fails after a put).
    case ifVersion(key: [UInt8], UInt64)
    /// Add to the decimal integer under the key, as ``Operation/increment(key:by:)``; its
    /// outcome is the sum.
    case increment(key: [UInt8], by: Int64)
    /// Set a key, as ``put(key:value:)``; its outcome says whether the key was added:
    /// ``Outcome/integer(_:)`` 1 if it was absent (or expired) at that point of the run, 0 if it
    /// replaced a value (Redis's HSET count).
    case set(key: [UInt8], value: [UInt8])
    /// Set a key only if it is absent at that point of the run; its outcome is
    /// ``Outcome/integer(_:)`` 1 if it was set, 0 if the key existed (nothing written for it,
    /// the rest of the batch goes on: Redis's HSETNX).
    case setIfAbsent(key: [UInt8], value: [UInt8])
    /// A guard on the whole namespace: the batch applies only if no record was written in the
    /// namespace after the one numbered `sequence` (0: none ever), at that point of the run
    /// (what Redis's WATCH checks at EXEC, a namespace being a watched key). Its outcome is
    /// ``Outcome/stored``; it has no key (``key`` is empty).
    case unchangedSince(UInt64)
    /// A read of the whole namespace at that point of the run, the batch's earlier steps
    /// applied: how many keys it has (``Outcome/integer(_:)``) or all its entries in key order
    /// (``Outcome/page(_:)``, its next cursor ``ScanCursor/start``). Writes nothing; it has no
    /// key (``key`` is empty). What Redis's HLEN and HGETALL read inside MULTI.
    case read(NamespaceRead)
    /// Change the deadlines of the expiry's keys at that point of the run, as
    /// ``Operation/expire(_:)`` does; its outcome is that operation's (a ``Outcome/batch(_:)``
    /// of one outcome per key). What Redis's `HEXPIRE` family and `HGETEX` do inside MULTI.
    /// (Boxed, as ``setAll(_:)``: held inline, it made every step, a plain HSET's too, 40 bytes
    /// in an array instead of 32.)
    indirect case expire(KeyExpiry)
    /// A read of the keys' deadlines at that point of the run, as ``Operation/deadlines(_:)``
    /// (a ``Outcome/batch(_:)`` of one ``Outcome/integer(_:)`` per key). Writes nothing.
    case deadlines([[UInt8]])
    /// Write the keys with one rule for their lifetimes, as ``Operation/setAll(_:)`` does,
    /// its presence judged at that point of the run (``Outcome/integer(_:)`` 1 or 0; a 0 writes
    /// nothing and the rest of the batch goes on). What Redis 8's `HSETEX` does inside MULTI.
    indirect case setAll(KeySetting)

    /// The step that applies `mutation`.
    public init(_ mutation: Mutation) {
        switch mutation {
        case .put(let key, let value): self = .put(key: key, value: value)
        case .delete(let key): self = .delete(key: key)
        case .lifetime: preconditionFailure("BatchStep: a lifetime is written by a PUT with one, not as a batch step")
        }
    }

    /// The key the step writes (empty for a step of several keys, or of none).
    public var key: [UInt8] {
        switch self {
        case .put(let key, _), .delete(let key), .update(let key, _), .ifVersion(let key, _), .increment(let key, _),
             .set(let key, _), .setIfAbsent(let key, _): return key
        case .unchangedSince, .read, .expire, .deadlines, .setAll: return []
        }
    }

    /// The keys the step reads or writes, in order (none for a read of the whole namespace, or
    /// WATCH's guard).
    public var keys: [[UInt8]] {
        switch self {
        case .expire(let expiry): return expiry.keys
        case .deadlines(let keys): return keys
        case .setAll(let setting): return setting.keys
        case .unchangedSince, .read: return []
        case .put, .delete, .update, .ifVersion, .increment, .set, .setIfAbsent: return [key]
        }
    }

    /// Whether a value the step sets keeps the key's deadline and owner (an INCR; an update
    /// that says so).
    var keepsLifetime: Bool {
        switch self {
        case .increment: return true
        case .update(_, let update): return update.keepsLifetime
        case .put, .delete, .set, .setIfAbsent, .ifVersion, .unchangedSince, .read, .expire, .deadlines, .setAll: return false
        }
    }

    /// The mutation of a step that needs no resolving (a put or a delete); nil for the others.
    var plainMutation: Mutation? {
        switch self {
        case .put(let key, let value): return .put(key: key, value: value)
        case .delete(let key): return .delete(key: key)
        case .set(let key, let value): return .put(key: key, value: value)
        case .update, .ifVersion, .increment, .setIfAbsent, .unchangedSince, .read, .expire, .deadlines, .setAll: return nil
        }
    }

    /// Whether the step depends on the key's current state.
    var readsBeforeWriting: Bool {
        switch self {
        case .update, .ifVersion, .increment, .setIfAbsent, .unchangedSince, .read, .expire, .deadlines, .setAll: return true
        case .put, .delete, .set: return false
        }
    }

    /// Whether the step reads or sets its keys' deadlines (``expire(_:)``, ``deadlines(_:)``,
    /// ``setAll(_:)``): a step of several keys, resolved with their lifetimes.
    public var readsLifetimes: Bool {
        switch self {
        case .expire, .deadlines, .setAll: return true
        case .put, .delete, .update, .ifVersion, .increment, .set, .setIfAbsent, .unchangedSince, .read: return false
        }
    }

    /// Whether the step may store a value (and so bring its namespace into existence).
    var mayWriteValue: Bool {
        switch self {
        case .put, .update, .increment, .set, .setIfAbsent: return true
        case .setAll(let setting): return setting.presence != .allPresent
        case .delete, .ifVersion, .unchangedSince, .read, .expire, .deadlines: return false
        }
    }
}

/// What a ``BatchStep/read(_:)`` reads of the whole namespace.
public enum NamespaceRead: Sendable, Equatable {
    /// How many keys it has (Redis's HLEN).
    case count
    /// Every entry, in key order (Redis's HGETALL, HKEYS, HVALS).
    case entries

    /// The operation that reads the same outside a batch.
    public var operation: Operation {
        switch self {
        case .count: return .count
        case .entries: return .scan(.start, prefix: [], limit: .max)
        }
    }
}

/// A value and its version: the sequence number of the log record that last wrote the key.
public struct VersionedValue: Sendable, Equatable {
    /// The value.
    public var value: [UInt8]
    /// The version, greater than 0.
    public var version: UInt64

    /// A value with its version.
    public init(value: [UInt8], version: UInt64) {
        self.value = value
        self.version = version
    }
}

extension OrderedMap {
    /// The value stored for `key` with its version, or nil.
    func versionedValue<Key: BorrowedBytes>(_ key: Key) -> VersionedValue? {
        versioned(key).map { VersionedValue(value: $0.value, version: $0.version) }
    }
}

/// A read-modify-write: computes a key's new state from its current value (nil: absent). It runs
/// on the namespace's actor, so nothing can write the key between the read and the write; it must
/// be quick and must not block.
public struct Update: Sendable {
    /// The computation, given the current value.
    public let compute: @Sendable (_ current: [UInt8]?) -> UpdateResult
    /// Whether a value it sets keeps the key's deadline and owner, as an INCR does (a counter
    /// changed, not replaced: Redis's HINCRBYFLOAT); otherwise the key is written anew, without
    /// them, as a PUT writes it.
    public let keepsLifetime: Bool

    /// An update that runs `compute`; with `keepsLifetime`, a value it sets keeps the key's
    /// deadline and owner.
    public init(keepsLifetime: Bool = false, _ compute: @escaping @Sendable (_ current: [UInt8]?) -> UpdateResult) {
        self.compute = compute
        self.keepsLifetime = keepsLifetime
    }

    /// An update that writes nothing: its outcome is the key's current value, a read of one key
    /// inside a batch (MULTI's GET, HGETDEL's read before its delete).
    public static let keep = Update { _ in .keep }
}

/// What an ``Update`` decided.
public enum UpdateResult: Sendable, Equatable {
    /// Store this value.
    case set([UInt8])
    /// Remove the key.
    case delete
    /// Leave the key as it is: nothing is written or logged.
    case keep
    /// Refuse the update with this error: nothing is written (in a batch, no step is).
    case refuse(StoreError)
}

/// The result of one ``Operation``.
public enum Outcome: Sendable, Equatable {
    /// A value, or nil for a missing key.
    case value([UInt8]?)
    /// A put succeeded, or a batch's guard held.
    case stored
    /// A value and its version (``Operation/getVersioned(_:)``), or nil for a missing key.
    case versioned(VersionedValue?)
    /// A conditional put succeeded: the key's new version.
    case version(UInt64)
    /// A condition did not hold (a conditional put, a batch's guard): nothing was written.
    case conditionFailed
    /// A count (deleted, existing or total keys).
    case integer(Int)
    /// A batch succeeded: one outcome per step (``stored`` for a put or a guard, ``integer(_:)``
    /// 1 or 0 for a delete, whether the key existed, or an increment's sum; ``value(_:)`` for an
    /// update, the key's value afterwards).
    case batch([Outcome])
    /// A scan page.
    case page(ScanPage)
    /// The operation failed and changed nothing.
    case failure(StoreError)
}

/// The outcomes of a run of operations, and what to wait for before acknowledging their writes.
public struct Execution: Sendable {
    /// One outcome per operation, in order.
    public var outcomes: [Outcome]
    /// Wait on this before replying to any write in the run.
    public var durability: Durability

    /// The outcomes of a run, durable once `durability` says so.
    public init(outcomes: [Outcome], durability: Durability) {
        self.outcomes = outcomes
        self.durability = durability
    }

    /// The outcomes of `operations` (the ones this ran) once their writes are as durable as the
    /// policy promises. If that fails (an fsync failed), every write that had succeeded gets the
    /// error instead: it was applied in memory, but whether it survives a restart is unknown.
    public func settled(_ operations: [Operation]) async -> [Outcome] {
        do {
            try await durability.wait()
            return outcomes
        } catch {
            let failure = error as? StoreError ?? StoreError(.io, "\(error)")
            var outcomes = outcomes
            for i in outcomes.indices where operations[i].isWrite {
                if case .failure = outcomes[i] { continue }
                outcomes[i] = .failure(failure)
            }
            return outcomes
        }
    }
}

/// Counters and facts about one namespace, for INFO.
public struct NamespaceStatistics: Sendable, Equatable {
    /// The namespace.
    public var name: String
    /// Live keys.
    public var keys: Int
    /// Bytes of live keys and values.
    public var liveBytes: Int
    /// Bytes of the log that recovery replays (the records after the snapshot, and the segment
    /// headers before them): what compaction weighs against ``liveBytes``.
    public var logBytes: Int
    /// Bytes of the log kept only for change history (`CHANGES … FROM`: see `changesHistory`),
    /// on disk besides ``logBytes``: older segments the snapshot covers, and the records before
    /// the snapshot in the segment still written to.
    public var historyBytes = 0
    /// The sequence number of the last write.
    public var lastSequence: UInt64
    /// The sequence number the last snapshot covers (0: none).
    public var snapshotSequence: UInt64
    /// When the last snapshot was written, in seconds since 1970 (0: none).
    public var snapshotTime: UInt64
    /// Log records replayed when the namespace was opened.
    public var recordsReplayed: Int
    /// Bytes of torn tail cut when the namespace was opened.
    public var tornBytesCut: Int
    /// Compactions completed since opening.
    public var compactions: Int
    /// Failed reads, writes and fsyncs since opening.
    public var ioErrors: Int
    /// Set when writes are refused because durability was lost.
    public var failure: String?
    /// The oldest change held for change feeds that resume (`CHANGES … FROM`).
    public var oldestSequence: UInt64 = 0
    /// Connections following the namespace's changes.
    public var followers = 0
    /// Change feed messages sent to followers.
    public var changesSent = 0
    /// Followers dropped for falling too far behind (`-LAGGING`).
    public var followersDropped = 0
    /// Bytes of recent changes held in memory for the followers: what some follower has not
    /// taken yet, at most about `--changes-lag-bytes`.
    public var changesHeld = 0
    /// Keys with a deadline (`PX`, `EX`, `PEXPIRE`).
    public var expiringKeys = 0
    /// Keys owned by a connection (`EPHEMERAL`).
    public var ephemeralKeys = 0
}

extension Operation {
    /// What an increment of `value` (nil: absent, counting as 0) by `delta` stores: the sum, or
    /// ``StoreError/Code/notAnInteger`` for a value that is not a canonical signed 64-bit decimal
    /// and ``StoreError/Code/overflow`` for a sum out of range (the rules of ``increment(key:by:)``,
    /// for a server that keeps its data elsewhere).
    public static func incrementedValue(_ value: [UInt8]?, by delta: Int64) -> Result<Int64, StoreError> {
        WritePlanner.sum(of: value, and: delta)
    }
}
