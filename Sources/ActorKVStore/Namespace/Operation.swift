/// One request to a namespace, as the server hands them over in pipeline order.
public enum Operation: Sendable {
    /// The value of a key. (The key is a slice so that a server can pass a request's key where
    /// the request holds it; ``get(_:)-swift.type.method`` takes an array.)
    case get(ArraySlice<UInt8>)
    /// How many of the keys exist. (Slices, as ``get(_:)-swift.enum.case``'s key, so that a
    /// server can pass a request's keys where the request holds them; ``exists(_:)-swift.type.method``
    /// takes arrays.)
    case exists([ArraySlice<UInt8>])
    /// The values of several keys, read together: a ``Outcome/batch(_:)`` of one
    /// ``Outcome/value(_:)`` per key, in order, nil where it is absent (Redis's HMGET). (Slices
    /// as ``exists(_:)-swift.enum.case``'s; ``getMany(_:)-swift.type.method`` takes arrays.)
    case getMany([ArraySlice<UInt8>])
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
    /// Remove keys; the outcome counts those that existed. Only those are deleted and logged: a
    /// delete that finds none of its keys writes no record (it changes nothing).
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
    /// Give the namespace itself a deadline, or remove it, when the condition holds (Redis's
    /// `EXPIRE` family and `PERSIST` of a hash): ``Outcome/integer(_:)`` 1 when it changed (a
    /// time at or before now deletes every key), 0 when the namespace holds no key or the
    /// condition does not hold (``NamespaceDeadline``).
    case setNamespaceDeadline(NamespaceDeadline)
    /// The namespace's own deadline: ``Outcome/integer(_:)`` milliseconds since the epoch, -1
    /// when it has none, -2 when it holds no key (Redis's `PEXPIRETIME` of a hash).
    case namespaceDeadline
    /// The number of keys.
    case count
    /// An estimate of the memory the namespace's data takes (``MemoryEstimate``), in bytes:
    /// ``Outcome/integer(_:)``, 0 when the namespace holds no live key (Redis's `MEMORY USAGE`
    /// of a hash). O(1).
    case memoryUsage
    /// One page of keys and values in key order.
    case scan(ScanCursor, prefix: [UInt8], limit: Int)
    /// Keys and their values drawn at random, each live key as likely as any other (Redis's
    /// `HRANDFIELD`): a ``Outcome/page(_:)`` of them in the order drawn. Costs about what its
    /// reply holds, not what the namespace does.
    case sample(RandomDraw)
    /// Every live entry's key, value or both, in key order, packed into one buffer: a
    /// ``Outcome/strings(_:)`` (what Redis's HGETALL, HKEYS and HVALS send, without an array
    /// per key and a reference per value). When the namespace's keys and values take more than
    /// the bound allows, a ``Outcome/page(_:)`` of all its entries instead, which shares the
    /// values rather than copying them.
    case packedEntries(EntryParts, within: PackingBound)

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

    /// How many of `keys` exist.
    public static func exists(_ keys: [[UInt8]]) -> Operation { .exists(keys.map { $0[...] }) }

    /// The values of `keys`, read together.
    public static func getMany(_ keys: [[UInt8]]) -> Operation { .getMany(keys.map { $0[...] }) }

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
        case .put, .set, .conditionalPut, .increment, .delete, .batch, .update, .lifetimePut, .setTimeToLive, .expire, .setAll,
             .setNamespaceDeadline: return true
        case .get, .getVersioned, .exists, .getMany, .count, .memoryUsage, .scan, .sample, .packedEntries, .timeToLive, .deadlines,
             .namespaceDeadline:
            return false
        }
    }

    /// Whether the operation changes the namespace's own deadline (itself, or a step of its
    /// batch): it is planned first in a run of its own, over the namespace as the operations
    /// before it left it (see `Namespace.execute`).
    var setsNamespaceDeadline: Bool {
        switch self {
        case .setNamespaceDeadline: return true
        case .batch(let steps): return steps.contains { if case .setNamespaceDeadline = $0 { true } else { false } }
        default: return false
        }
    }

    /// Whether the operation reads the state that the writes before it leave, and so needs the
    /// planner to resolve it before its record can be encoded (a delete: which of its keys exist).
    var readsBeforeWriting: Bool {
        switch self {
        case .update, .conditionalPut, .increment, .lifetimePut, .setTimeToLive, .expire, .setAll, .delete, .setNamespaceDeadline: return true
        case .batch(let steps): return steps.contains { $0.readsBeforeWriting }
        case .get, .getVersioned, .exists, .getMany, .put, .set, .count, .memoryUsage, .scan, .sample, .packedEntries, .timeToLive, .deadlines,
             .namespaceDeadline: return false
        }
    }

    /// Whether the operation may bring a namespace that does not exist into existence: a PUT, a
    /// batch that may write a value, an increment, or an update that may compute a value.
    /// Deletes and reads never do (a batch's reads of keys, ``Update/keep``, among them), nor a
    /// write whose condition cannot hold where nothing exists (`floor`: the sequence such a
    /// namespace stands at, its store's ``SequenceFloor``).
    func mayCreateNamespace(floor: UInt64) -> Bool {
        switch self {
        case .put, .set, .increment: return true
        case .update(_, let update): return update.mayStore
        case .conditionalPut(_, _, let version): return version == 0
        case .lifetimePut(let put): return (put.ifVersion ?? 0) == 0
        case .setAll(let setting): return setting.presence != .allPresent
        case .batch(let steps): return Self.guardsHoldWhereNothingExists(steps, floor: floor) && steps.contains { $0.mayWriteValue }
        case .get, .getVersioned, .exists, .getMany, .delete, .count, .memoryUsage, .scan, .sample, .packedEntries, .setTimeToLive, .timeToLive,
             .expire, .deadlines, .setNamespaceDeadline, .namespaceDeadline:
            return false
        }
    }

    /// Whether every guard among `steps` holds where the namespace does not exist: asks for
    /// version 0 (absent), or for no change since `floor`, the sequence such a namespace stands
    /// at (0 until a namespace is removed; what WATCH remembered of it, unless a removal came
    /// since, when anything may have lived and gone under the name).
    static func guardsHoldWhereNothingExists(_ steps: [BatchStep], floor: UInt64) -> Bool {
        steps.allSatisfy {
            switch $0 {
            case .ifVersion(_, let version): return version == 0
            case .unchangedSince(let sequence): return sequence == floor
            default: return true
            }
        }
    }
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
