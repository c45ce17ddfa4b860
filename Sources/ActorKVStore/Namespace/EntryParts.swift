import ActorKVProtocol

/// Which strings of each entry ``Operation/packedEntries(_:within:)`` packs: the keys
/// (Redis's HKEYS), the values (HVALS), or both, key then value (HGETALL).
public enum EntryParts: Sendable, Equatable {
    /// The keys.
    case keys
    /// The values.
    case values
    /// Each key followed by its value.
    case both

    /// The bytes these parts of `entries` take (what ``PackingBound`` weighs).
    public func bytes(of entries: [KeyValue]) -> Int {
        var total = 0
        for entry in entries {
            if self != .values { total += entry.key.count }
            if self != .keys { total += entry.value.count }
        }
        return total
    }

    /// These parts of `entries`, packed in order (for a back end that reads pages), with room
    /// for `bytes` bytes of them.
    public func packed(_ entries: [KeyValue], bytes: Int = 0) -> BulkStrings {
        var strings = BulkStrings(reservingStrings: self == .both ? entries.count * 2 : entries.count, bytes: bytes)
        for entry in entries {
            if self != .values { strings.append(entry.key) }
            if self != .keys { strings.append(entry.value) }
        }
        return strings
    }
}
