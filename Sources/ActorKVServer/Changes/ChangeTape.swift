#if canImport(Glibc)
import Glibc
#endif
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
/// time.
///
/// What it forgets: what every user has taken (``forgetTaken(in:)``), so that a tape whose
/// followers keep up stays short; past ``byteLimit`` (its share of the server's
/// ``ChangeTapes`` budget), the changes its feed no longer holds, once they are half its bytes
/// (a follower there is lagging: it is dropped); and past ``hardLimitFactor`` times that,
/// its older half, whatever the feed holds. So a tape covers the feed's whole window while
/// followers lag (one that forgot its older half at the byte limit covered a little less than
/// the window, and a follower in between had each message built for it alone), and a
/// follower further behind reads the feed itself (and is dropped as lagging when the feed has
/// trimmed its place).
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
        /// Where its message ends in the tape's bytes (where it starts for a hole or an empty message).
        var end: Int
        /// Messages on the tape through this one, from the tape's start.
        var messages: Int
        /// Too large to be shared: a follower reads it from the feed.
        let hole: Bool
    }

    /// Messages after ``after`` on the tape: the bytes to copy and where they end.
    struct Slice: Equatable {
        /// Where the messages lie in the tape's bytes (``ChangeTape/withBytes(in:_:)``).
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
    /// The most it keeps, as a multiple of ``byteLimit``: messages can be larger than the
    /// records the feed counts (up to four times, for one-byte keys and values).
    static let hardLimitFactor = 4
    /// Changes read from the feed per extension.
    static let readBatch = 1024

    let namespace: String
    private let namespaceBytes: [UInt8]
    let prefix: [UInt8]
    let version: RESPVersion
    /// How many followers use it; the registry forgets it when none is left.
    @exclusivity(unchecked) var users = 0
    /// The users noted in one round of the loop's (``noteTaken(through:in:)``).
    struct Noted {
        var round: UInt64 = 0
        var users = 0
        /// The lowest cursor noted: every user has taken every change through it.
        var lowest = UInt64.max
    }
    @exclusivity(unchecked) private var noted = Noted()
    /// The tape holds every change after this one (through ``last``).
    @exclusivity(unchecked) private(set) var coveredAfter: UInt64
    @exclusivity(unchecked) private var entries: [Entry] = []
    /// The encoded messages, in sequence order: ``byteCount`` bytes at `base`, in a `malloc`
    /// allocation of `capacity` bytes that doubles (by `realloc`) as it fills. Messages are
    /// written in place (an array would first fill each message's room with zeros). Grown by
    /// `realloc`, not by a new allocation and a copy: a tape that covers a 16 MiB window for
    /// lagging followers is tens of MiB, which glibc maps on its own and moves with `mremap`,
    /// so the bytes already written are neither copied nor faulted in again.
    @exclusivity(unchecked) private var base: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private(set) var byteCount = 0
    /// A new tape's room for messages.
    static let initialCapacity = 4096

    /// An empty tape for `namespace`'s changes under `prefix`, encoded in `version`, starting
    /// after change `after`.
    init(namespace: String, prefix: [UInt8], version: RESPVersion, after: UInt64) {
        self.namespace = namespace
        namespaceBytes = Array(namespace.utf8)
        self.prefix = prefix
        self.version = version
        coveredAfter = after
        capacity = Self.initialCapacity
        base = Self.reallocate(nil, capacity: capacity)
    }

    deinit {
        free(base)
    }

    /// The last change it holds (or ``coveredAfter`` when it holds none).
    var last: UInt64 { entries.last?.sequence ?? coveredAfter }

    /// Encodes `changes` (in order) onto the end; those at or before ``last`` are skipped.
    func append(_ changes: [Change]) {
        for change in changes { append(change) }
    }

    /// Encodes `change` onto the end, unless it is at or before ``last``.
    func append(_ change: Change) {
        guard change.sequence > last else { return }
        var messages = entries.last?.messages ?? 0
        let hole = change.byteSize > Self.sharedLimit
        if !hole, let size = ChangeMessageEncoder.size(of: change, namespace: namespaceBytes, prefix: prefix, version: version) {
            reserve(size.length)
            ChangeMessageEncoder.write(change, size: size, namespace: namespaceBytes, prefix: prefix, version: version, to: base + byteCount)
            byteCount += size.length
            messages += 1
        }
        entries.append(Entry(sequence: change.sequence, end: byteCount, messages: messages, hole: hole))
        if byteCount > byteLimit * Self.hardLimitFactor { forgetOlderHalf() }
    }

    /// Makes room for `count` more bytes after ``byteCount``.
    private func reserve(_ count: Int) {
        guard byteCount + count > capacity else { return }
        var grown = capacity * 2
        while grown < byteCount + count { grown *= 2 }
        base = Self.reallocate(base, capacity: grown)
        capacity = grown
    }

    /// `pointer`'s allocation (nil: none yet) resized to `capacity` bytes, its contents kept.
    private static func reallocate(_ pointer: UnsafeMutablePointer<UInt8>?, capacity: Int) -> UnsafeMutablePointer<UInt8> {
        guard let resized = realloc(pointer, capacity) else { fatalError("ChangeTape: out of memory for \(capacity) bytes") }
        return resized.assumingMemoryBound(to: UInt8.self)
    }

    /// Calls `body` with the bytes in `range` (a slice's), borrowed for the call.
    func withBytes<Result, Failure: Error>(in range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result) throws(Failure) -> Result {
        precondition(range.lowerBound >= 0 && range.upperBound <= byteCount, "ChangeTape: bytes outside the tape")
        return try body(UnsafeRawBufferPointer(start: base + range.lowerBound, count: range.count))
    }

    /// A copy of the bytes in `range`.
    func bytes(in range: Range<Int>) -> [UInt8] {
        withBytes(in: range) { Array($0) }
    }

    /// Reads the feed's next deliverable changes onto the end. When the feed no longer holds the
    /// change after ``last``, starts again, empty, at the feed's window.
    func extend(from feed: ChangeFeed) {
        if let window = feed.visitDeliverable(after: last, limit: Self.readBatch, append) {
            restart(after: window.start - 1)
            _ = feed.visitDeliverable(after: last, limit: Self.readBatch, append)
        }
        // The changes before the window: the feed no longer holds them.
        if byteCount > byteLimit { forget(through: feed.windowStart - 1) }
    }

    /// Forgets the changes through `sequence`: all of them when it is at or past the end (no
    /// byte moves), otherwise once their bytes are at least half the tape's, so that moving the
    /// rest down costs at most a byte per byte appended.
    private func forget(through sequence: UInt64) {
        guard sequence > coveredAfter else { return }
        if sequence >= last {
            restart(after: last)
            return
        }
        let count = firstIndex(after: sequence)
        if entries[count - 1].end * 2 >= byteCount { forgetFirst(count) }
    }

    /// Starts again, empty, after change `after`.
    func restart(after: UInt64) {
        entries.removeAll(keepingCapacity: true)
        byteCount = 0
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
        while count < entries.count - 1 && entries[count].end <= byteCount / 2 { count += 1 }
        forgetFirst(count)
    }

    /// Drops the first `count` changes and their bytes.
    private func forgetFirst(_ count: Int) {
        guard count > 0 else { return }
        let cut = entries[count - 1].end
        let messages = entries[count - 1].messages
        coveredAfter = entries[count - 1].sequence
        entries.removeFirst(count)
        for index in entries.indices {
            entries[index].end -= cut
            entries[index].messages -= messages
        }
        base.update(from: base + cut, count: byteCount - cut)
        byteCount -= cut
    }
}

extension ChangeTape {
    /// Notes, in `round`, that one of its users has taken every change through `cursor`: the
    /// loop notes each user once per round in which it serves them all (the followers of one
    /// namespace whose feed moved). Returns whether this is the round's first note (the caller
    /// then asks the tape to ``forgetTaken(in:)`` when the round is over).
    func noteTaken(through cursor: UInt64, in round: UInt64) -> Bool {
        let first = noted.round != round
        if first { noted = Noted(round: round) }
        noted.users += 1
        noted.lowest = min(noted.lowest, cursor)
        return first
    }

    /// When every user was noted in `round`, forgets what all of them have taken: everything
    /// when they are all at the end (no byte moves), otherwise the part taken once it is at
    /// least half the bytes. So a tape whose users keep up stays about one turn's changes long,
    /// written again where it was last written: a tape kept to its byte limit wrote each message
    /// to memory not touched for megabytes and moved its newer half down each time it filled.
    /// Returns the change through which every user has taken all (nil: not all were noted).
    @discardableResult
    func forgetTaken(in round: UInt64) -> UInt64? {
        guard noted.round == round, noted.users >= users else { return nil }
        forget(through: noted.lowest)
        return noted.lowest
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
