import ActorKVProtocol
import ActorKVStore

/// The `change` messages of one namespace's feed for followers of one prefix speaking one
/// protocol version, encoded once, back to back, and copied from here into each follower's
/// output: with a hundred followers, a change costs one encoding and a hundred copies of its
/// bytes, not a hundred encodings. Owned by the event loop thread.
///
/// The tape knows every change after ``coveredAfter`` through ``last``, in order; a change
/// outside the prefix has an empty message. A change larger than ``sharedLimit`` is a hole: it
/// is not encoded here (its message would exceed a follower's output bound), and a follower
/// reaches it through its own reading of the feed, which queues it to be written a piece at a
/// time. The tape holds about ``byteLimit`` bytes (its share of the server's ``ChangeTapes``
/// budget) and forgets its older half past that; a follower further behind reads the feed
/// itself (and is dropped as lagging when the feed has trimmed its place).
///
/// Only for a feed that keeps a window every follower reads without consuming it (the local
/// engine's ``ChangeFeed``): an etcd watch is read by its one follower, and reading ahead of it
/// here would take changes from it.
///
/// Its mutable state is `@exclusivity(unchecked)`: only the loop thread touches it, one access
/// at a time (``slice(after:maxBytes:)`` runs once per follower per change).
final class ChangeTape {
    /// What a tape is shared by.
    struct Key: Hashable {
        let feed: ObjectIdentifier
        let prefix: [UInt8]
        let version: RESPVersion
    }

    /// One change on the tape.
    private struct Entry {
        let sequence: UInt64
        /// Where its message ends in ``bytes`` (where it starts for a hole or an empty message).
        var end: Int
        /// Messages on the tape through this one, from the tape's start.
        var messages: Int
        /// Too large to be shared: a follower reads it from the feed.
        let hole: Bool
    }

    /// Messages after ``after`` on the tape: the bytes to copy and where they end.
    struct Slice: Equatable {
        /// The messages' bytes in ``ChangeTape/bytes``.
        let range: Range<Int>
        /// The last change the slice covers: a follower's cursor after sending it.
        let through: UInt64
        /// How many messages it holds (changes outside the prefix have none).
        let messages: Int
    }

    /// A message larger than this is not kept here (about a follower's output bound: 64 KiB).
    static let sharedLimit = 64 * 1024
    /// About how many bytes of messages the tape keeps (set by ``ChangeTapes``).
    @exclusivity(unchecked) var byteLimit = 1 << 20
    /// Changes read from the feed per extension.
    static let readBatch = 1024

    let namespace: String
    private let namespaceBytes: [UInt8]
    let prefix: [UInt8]
    let version: RESPVersion
    /// How many followers use it; the registry forgets it when none is left.
    @exclusivity(unchecked) var users = 0
    /// The tape holds every change after this one (through ``last``).
    @exclusivity(unchecked) private(set) var coveredAfter: UInt64
    @exclusivity(unchecked) private var entries: [Entry] = []
    /// The encoded messages, in sequence order.
    @exclusivity(unchecked) private(set) var bytes: [UInt8] = []

    /// An empty tape for `namespace`'s changes under `prefix`, encoded in `version`, starting
    /// after change `after`.
    init(namespace: String, prefix: [UInt8], version: RESPVersion, after: UInt64) {
        self.namespace = namespace
        namespaceBytes = Array(namespace.utf8)
        self.prefix = prefix
        self.version = version
        coveredAfter = after
    }

    /// The last change it holds (or ``coveredAfter`` when it holds none).
    var last: UInt64 { entries.last?.sequence ?? coveredAfter }

    /// Encodes `changes` (in order) onto the end; those at or before ``last`` are skipped.
    func append(_ changes: [Change]) {
        var messages = entries.last?.messages ?? 0
        for change in changes where change.sequence > last {
            let hole = change.byteSize > Self.sharedLimit
            if !hole && ChangeMessageEncoder.append(change, namespace: namespaceBytes, prefix: prefix, version: version, to: &bytes) {
                messages += 1
            }
            entries.append(Entry(sequence: change.sequence, end: bytes.count, messages: messages, hole: hole))
            if bytes.count > byteLimit {
                forgetOlderHalf()
                messages = entries.last?.messages ?? 0
            }
        }
    }

    /// Reads the feed's next deliverable changes onto the end. When the feed no longer holds the
    /// change after ``last``, starts again, empty, at the feed's window.
    func extend(from feed: ChangeFeed) {
        switch feed.read(after: last, limit: Self.readBatch) {
        case .changes(let changes):
            append(changes)
        case .beforeWindow(let windowStart, _):
            restart(after: windowStart - 1)
            if case .changes(let changes) = feed.read(after: last, limit: Self.readBatch) { append(changes) }
        case .caughtUp, .waiting, .failed:
            break
        }
    }

    /// Starts again, empty, after change `after`.
    func restart(after: UInt64) {
        entries.removeAll(keepingCapacity: true)
        bytes.removeAll(keepingCapacity: true)
        coveredAfter = after
    }

    /// The messages after `cursor`: as many whole changes as fit in `maxBytes` (at least one),
    /// up to the next hole. Nil when the tape cannot serve a follower at `cursor`: it is behind
    /// the tape's start, at or past its end, or the next change is a hole.
    func slice(after cursor: UInt64, maxBytes: Int) -> Slice? {
        guard cursor >= coveredAfter, cursor < last else { return nil }
        let first = firstIndex(after: cursor)
        guard !entries[first].hole else { return nil }
        let start = first == 0 ? 0 : entries[first - 1].end
        let messagesBefore = first == 0 ? 0 : entries[first - 1].messages
        var end = first + 1
        while end < entries.count && !entries[end].hole && entries[end].end - start <= maxBytes { end += 1 }
        let through = entries[end - 1]
        return Slice(range: start..<through.end, through: through.sequence, messages: through.messages - messagesBefore)
    }

    /// The index of the first entry after `cursor` (there is one: `cursor < last`).
    private func firstIndex(after cursor: UInt64) -> Int {
        var low = 0, high = entries.count - 1
        while low < high {
            let middle = (low + high) / 2
            if entries[middle].sequence > cursor { high = middle } else { low = middle + 1 }
        }
        return low
    }

    /// Drops the changes whose messages end in the first half of the bytes.
    private func forgetOlderHalf() {
        var count = 0
        while count < entries.count - 1 && entries[count].end <= bytes.count / 2 { count += 1 }
        guard count > 0 else { return }
        let cut = entries[count - 1].end
        let messages = entries[count - 1].messages
        coveredAfter = entries[count - 1].sequence
        entries.removeFirst(count)
        for index in entries.indices {
            entries[index].end -= cut
            entries[index].messages -= messages
        }
        bytes.removeFirst(cut)
    }
}

/// The tapes the event loop's followers share, by feed, prefix and protocol version, and the
/// memory they may hold: a budget (the feeds' `--changes-lag-bytes`) shared out evenly, each
/// tape keeping at least ``minimumShare``. So a tape usually covers as much as its feed's window,
/// and a thousand followers with a thousand prefixes cost a thousand small tapes.
struct ChangeTapes {
    /// The least a tape may keep, however many there are.
    static let minimumShare = 256 * 1024
    private let byteBudget: Int
    private var tapes: [ChangeTape.Key: ChangeTape] = [:]

    /// No tapes yet; together they will keep about `byteBudget` bytes.
    init(byteBudget: Int) {
        self.byteBudget = byteBudget
    }

    /// How many tapes are kept.
    var count: Int { tapes.count }

    /// The tape a follower of `feed` under `prefix` on a connection speaking `version` uses,
    /// made (starting after `cursor`) if nobody uses one yet; counted as one more user.
    mutating func adopt(feed: ChangeFeed, prefix: [UInt8], version: RESPVersion, cursor: UInt64) -> ChangeTape {
        let key = ChangeTape.Key(feed: ObjectIdentifier(feed), prefix: prefix, version: version)
        if let tape = tapes[key] {
            tape.users += 1
            return tape
        }
        let tape = ChangeTape(namespace: feed.namespace, prefix: prefix, version: version, after: cursor)
        tape.users = 1
        tapes[key] = tape
        shareOut()
        return tape
    }

    /// One user fewer for `tape`; forgotten when it has none.
    mutating func release(_ tape: ChangeTape, feed: ObjectIdentifier) {
        tape.users -= 1
        guard tape.users <= 0 else { return }
        tapes[ChangeTape.Key(feed: feed, prefix: tape.prefix, version: tape.version)] = nil
        shareOut()
    }

    /// Gives each tape its share of the budget.
    private func shareOut() {
        guard !tapes.isEmpty else { return }
        let share = max(Self.minimumShare, byteBudget / tapes.count)
        for tape in tapes.values { tape.byteLimit = share }
    }
}
