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
    /// Change the namespace's own deadline at that point of the run, as
    /// ``Operation/setNamespaceDeadline(_:)`` does (``Outcome/integer(_:)`` 1 or 0); it has no
    /// key. What Redis's `EXPIRE` family and `PERSIST` of a hash do inside MULTI.
    indirect case setNamespaceDeadline(NamespaceDeadline)

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
        case .unchangedSince, .read, .expire, .deadlines, .setAll, .setNamespaceDeadline: return []
        }
    }

    /// The keys the step reads or writes, in order (none for a read of the whole namespace, or
    /// WATCH's guard).
    public var keys: [[UInt8]] {
        switch self {
        case .expire(let expiry): return expiry.keys
        case .deadlines(let keys): return keys
        case .setAll(let setting): return setting.keys
        case .unchangedSince, .read, .setNamespaceDeadline: return []
        case .put, .delete, .update, .ifVersion, .increment, .set, .setIfAbsent: return [key]
        }
    }

    /// Whether a value the step sets keeps the key's deadline and owner (an INCR; an update
    /// that says so).
    var keepsLifetime: Bool {
        switch self {
        case .increment: return true
        case .update(_, let update): return update.keepsLifetime
        case .put, .delete, .set, .setIfAbsent, .ifVersion, .unchangedSince, .read, .expire, .deadlines, .setAll, .setNamespaceDeadline:
            return false
        }
    }

    /// The mutation of a step that needs no resolving (a put or a delete); nil for the others.
    var plainMutation: Mutation? {
        switch self {
        case .put(let key, let value): return .put(key: key, value: value)
        case .delete(let key): return .delete(key: key)
        case .set(let key, let value): return .put(key: key, value: value)
        case .update, .ifVersion, .increment, .setIfAbsent, .unchangedSince, .read, .expire, .deadlines, .setAll, .setNamespaceDeadline:
            return nil
        }
    }

    /// Whether the step depends on the key's current state.
    var readsBeforeWriting: Bool {
        switch self {
        case .update, .ifVersion, .increment, .setIfAbsent, .unchangedSince, .read, .expire, .deadlines, .setAll, .delete,
             .setNamespaceDeadline: return true
        case .put, .set: return false
        }
    }

    /// Whether the step reads or sets its keys' deadlines (``expire(_:)``, ``deadlines(_:)``,
    /// ``setAll(_:)``): a step of several keys, resolved with their lifetimes.
    public var readsLifetimes: Bool {
        switch self {
        case .expire, .deadlines, .setAll: return true
        case .put, .delete, .update, .ifVersion, .increment, .set, .setIfAbsent, .unchangedSince, .read, .setNamespaceDeadline: return false
        }
    }

    /// Whether the step may store a value (and so bring its namespace into existence).
    var mayWriteValue: Bool {
        switch self {
        case .put, .increment, .set, .setIfAbsent: return true
        case .update(_, let update): return update.mayStore
        case .setAll(let setting): return setting.presence != .allPresent
        case .delete, .ifVersion, .unchangedSince, .read, .expire, .deadlines, .setNamespaceDeadline: return false
        }
    }
}

/// What a ``BatchStep/read(_:)`` reads of the whole namespace.
public enum NamespaceRead: Sendable, Equatable {
    /// How many keys it has (Redis's HLEN).
    case count
    /// Every entry, in key order (Redis's HGETALL, HKEYS, HVALS).
    case entries
    /// Entries drawn at random (Redis's HRANDFIELD).
    case sample(RandomDraw)
    /// The namespace's own deadline (Redis's PEXPIRETIME, TTL of a hash), as
    /// ``Operation/namespaceDeadline`` reads it.
    case deadline

    /// The operation that reads the same outside a batch.
    public var operation: Operation {
        switch self {
        case .count: return .count
        case .entries: return .scan(.start, prefix: [], limit: .max)
        case .sample(let draw): return .sample(draw)
        case .deadline: return .namespaceDeadline
        }
    }
}
