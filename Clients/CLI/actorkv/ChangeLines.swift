// The lines `actorkv changes` prints.
import ActorKVClient

/// The lines `changes` prints for a change stream's events (see `usage`).
///
/// A snapshot that a broken connection cut short is followed by a new one, whose lines repeat
/// the keys that still exist; a key printed from the unfinished snapshot that the new one no
/// longer holds was deleted meanwhile, and gets a deleted line once the new snapshot is complete.
/// For that, the keys of a snapshot are remembered while it is printed.
struct ChangeLines {
    /// Keys printed from the snapshot being printed; nil when none is.
    private var snapshotKeys: Set<[UInt8]>?
    /// Keys printed from unfinished snapshots before it.
    private var abandoned: Set<[UInt8]> = []
    private var snapshotSequence: UInt64 = 0

    /// The lines for `event`, together.
    mutating func lines(for event: ChangeEvent) -> [UInt8] {
        var out: [UInt8] = []
        switch event {
        case .snapshot(let page):
            if page.isFirst {
                if let printed = snapshotKeys { abandoned.formUnion(printed) }
                snapshotKeys = []
                snapshotSequence = page.sequence
            }
            for entry in page.entries {
                snapshotKeys?.insert(entry.key)
                Self.append(page.sequence, entry.key, entry.value, to: &out)
            }
        case .change(let change):
            endSnapshot(into: &out)
            for changed in change.keys { Self.append(change.sequence, changed.key, changed.value, to: &out) }
        case .synced:
            endSnapshot(into: &out)
        }
        return out
    }

    /// After a snapshot's last page: deleted lines for the keys only an unfinished one printed.
    private mutating func endSnapshot(into out: inout [UInt8]) {
        guard let printed = snapshotKeys else { return }
        snapshotKeys = nil
        let gone = abandoned.subtracting(printed).sorted { $0.lexicographicallyPrecedes($1) }
        abandoned = []
        for key in gone { Self.append(snapshotSequence, key, nil, to: &out) }
    }

    /// Appends `SEQ<TAB>KEY<TAB>VALUE` (VALUE `\N` for nil) and a newline.
    static func append(_ sequence: UInt64, _ key: [UInt8], _ value: [UInt8]?, to out: inout [UInt8]) {
        out += Array(String(sequence).utf8)
        out.append(UInt8(ascii: "\t"))
        out += escapedField(key)
        out.append(UInt8(ascii: "\t"))
        out += value.map(escapedField) ?? [UInt8(ascii: "\\"), UInt8(ascii: "N")]
        out.append(0x0A)
    }
}
