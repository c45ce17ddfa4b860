import ActorKVProtocol

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
    /// Entries' keys, values or both, packed (``Operation/packedEntries(_:within:)``).
    case strings(BulkStrings)
    /// The operation failed and changed nothing.
    case failure(StoreError)
}
