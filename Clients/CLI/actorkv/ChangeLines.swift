// The lines `actorkv changes` prints.
import ActorKVClient

/// The lines `changes` prints for a change stream's events (see `usage`).
///
/// A snapshot that a broken connection cut short is followed by a new one, as of a later
/// sequence. So that no line is printed twice, the new one prints only what the lines already
/// printed do not say: a key not printed yet, or printed with another value (changed meanwhile);
/// and once it is complete, a deleted line for each key printed that it no longer holds (deleted
/// meanwhile). Those lines carry the new snapshot's sequence: they tell the state as of it. For
/// that, a hash of each key's printed value is remembered while a snapshot is printed.
struct ChangeLines {
    /// The keys printed from the snapshots being printed (the current one and those cut short
    /// before it), each with its value's hash; nil when no snapshot is being printed.
    private var printed: [[UInt8]: Int]?
    /// The keys the current snapshot holds, so far, once one was cut short (nil before: the
    /// keys printed are then those it holds).
    private var held: Set<[UInt8]>?
    private var snapshotSequence: UInt64 = 0

    /// The lines for `event`, together.
    mutating func lines(for event: ChangeEvent) -> [UInt8] {
        var out: [UInt8] = []
        switch event {
        case .snapshot(let page):
            if page.isFirst {
                held = printed == nil ? nil : []
                if printed == nil { printed = [:] }
                snapshotSequence = page.sequence
            }
            for entry in page.entries { printSnapshotEntry(entry, into: &out) }
        case .change(let change):
            endSnapshot(into: &out)
            for changed in change.keys { Self.append(change.sequence, changed.key, changed.value, to: &out) }
        case .synced:
            endSnapshot(into: &out)
        }
        return out
    }

    /// A snapshot's entry, unless a snapshot cut short printed the key with this value already.
    private mutating func printSnapshotEntry(_ entry: ScanEntry, into out: inout [UInt8]) {
        held?.insert(entry.key)
        let hash = entry.value.hashValue
        guard printed?.updateValue(hash, forKey: entry.key) != hash else { return }
        Self.append(snapshotSequence, entry.key, entry.value, to: &out)
    }

    /// After a snapshot's last page: deleted lines for the keys printed from one cut short that
    /// this one does not hold.
    private mutating func endSnapshot(into out: inout [UInt8]) {
        guard let keys = printed else { return }
        printed = nil
        guard let held else { return }
        self.held = nil
        let gone = keys.keys.filter { !held.contains($0) }.sorted { $0.lexicographicallyPrecedes($1) }
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
