import ActorKVProtocol
@testable import ActorKVServer
@testable import ActorKVStore
import Testing

/// The tape of encoded change messages that followers of the local engine share: its bytes are,
/// message for message, what each change's ``Reply`` encodes to; slices hold whole changes and
/// stop before one too large to share; it forgets its older half past its limit; it reads its
/// feed once for everyone and starts again at the window when the feed trimmed past it.
@Suite("Change tape")
struct ChangeTapeTests {
    /// The message a follower of `prefix` gets for `change`, built as a ``Reply`` the long way.
    static func expected(_ change: Change, prefix: [UInt8], version: RESPVersion) -> [UInt8] {
        var pairs: [Reply] = []
        for mutation in change.mutations {
            switch mutation {
            case .put(let key, let value) where key.starts(with: prefix): pairs += [.bulk(key), .bulk(value)]
            case .delete(let key) where key.starts(with: prefix): pairs += [.bulk(key), .null]
            default: continue
            }
        }
        guard !pairs.isEmpty else { return [] }
        return Reply.push([.bulk(b("change")), .bulk(b("ns")), .integer(Int64(change.sequence)), .array(pairs)]).encoded(in: version)
    }

    /// Changes 1...n of every shape: puts under and outside the prefix, deletes, a batch of
    /// both, and a change that only sets a lifetime (no message for anyone).
    static func changes(_ range: ClosedRange<UInt64>) -> [Change] {
        range.map { sequence in
            switch sequence % 5 {
            case 0: Change(sequence: sequence, mutations: [.put(key: b("a:\(sequence)"), value: b("v\(sequence)"))])
            case 1: Change(sequence: sequence, mutations: [.put(key: b("b:\(sequence)"), value: b("w"))])
            case 2: Change(sequence: sequence, mutations: [.delete(key: b("a:\(sequence - 2)"))])
            case 3: Change(sequence: sequence, mutations: [.put(key: b("b:x"), value: []), .delete(key: b("a:1")), .put(key: b("a:2"), value: b("z"))])
            default: Change(sequence: sequence, mutations: [.lifetime(key: b("a:1"), Lifetime(owner: 7))])
            }
        }
    }

    @Test("from every cursor, the tape's bytes are the messages after it, each as its Reply encodes, in both versions, with and without a prefix")
    func bytesAreTheMessages() {
        let changes = Self.changes(1...40)
        for version in RESPVersion.allCases {
            for prefix in [[], b("a:"), b("zz")] {
                let tape = ChangeTape(namespace: "ns", prefix: prefix, version: version, after: 0)
                tape.append(changes)
                #expect(tape.last == 40)
                for cursor in UInt64(0)..<40 {
                    let after = changes.filter { $0.sequence > cursor }
                    let want = after.flatMap { Self.expected($0, prefix: prefix, version: version) }
                    let count = after.filter { !Self.expected($0, prefix: prefix, version: version).isEmpty }.count
                    guard let slice = tape.slice(after: cursor, maxBytes: 1 << 20) else {
                        Issue.record("no slice after \(cursor)")
                        continue
                    }
                    #expect(tape.bytes(in: slice.range) == want, "after \(cursor), \(version), prefix \(prefix)")
                    #expect(slice.through == 40)
                    #expect(slice.messages == count)
                }
                #expect(tape.slice(after: 40, maxBytes: 1 << 20) == nil, "nothing after the end")
            }
        }
    }

    @Test("a change message is encoded as its Reply is for every count of digits: sequences, lengths and pair counts at each power of ten")
    func encodingAtDigitBoundaries() {
        var generator = SystemRandomNumberGenerator()
        let sequences: [UInt64] = [1, 9, 10, 99, 100, 999, 1_000, 123_456_789, 9_999_999_999, UInt64(Int64.max)]
        let lengths = [0, 1, 9, 10, 11, 99, 100, 1_000, 10_000]
        for version in RESPVersion.allCases {
            for sequence in sequences {
                for _ in 0..<20 {
                    let mutations: [Mutation] = (0..<Int.random(in: 1...12, using: &generator)).map { i in
                        let key = b("k\(i):") + [UInt8](repeating: 0x61, count: lengths.randomElement(using: &generator)!)
                        if Bool.random(using: &generator) { return .delete(key: key) }
                        return .put(key: key, value: (0..<lengths.randomElement(using: &generator)!).map { _ in UInt8.random(in: 0...255, using: &generator) })
                    }
                    let change = Change(sequence: sequence, mutations: mutations)
                    var bytes = b("before")
                    #expect(ChangeMessageEncoder.append(change, namespace: b("ns"), prefix: [], version: version, to: &bytes))
                    #expect(bytes == b("before") + Self.expected(change, prefix: [], version: version), "sequence \(sequence), \(version)")
                }
            }
        }
        var untouched = b("x")
        #expect(!ChangeMessageEncoder.append(Change(sequence: 5, mutations: [.put(key: b("b"), value: b("v"))]), namespace: b("ns"), prefix: b("a"), version: .resp3, to: &untouched))
        #expect(untouched == b("x"))
    }

    @Test("a slice holds whole changes within its bytes (at least one) and stops before a change too large to share; past it the tape serves again")
    func slicesAndHoles() {
        let large = [UInt8](repeating: 0x78, count: ChangeTape.sharedLimit + 1)
        var changes = Self.changes(1...10)
        changes.append(Change(sequence: 11, mutations: [.put(key: b("big"), value: large)]))
        changes += Self.changes(12...20)
        let tape = ChangeTape(namespace: "ns", prefix: [], version: .resp2, after: 0)
        tape.append(changes)
        let one = Self.expected(changes[0], prefix: [], version: .resp2)
        let first = tape.slice(after: 0, maxBytes: 1)
        #expect(first.map { tape.bytes(in: $0.range) } == one, "one whole change even past the bytes asked for")
        #expect(first?.through == 1)
        let upToHole = tape.slice(after: 1, maxBytes: 1 << 20)
        #expect(upToHole?.through == 10, "stops before the hole")
        #expect(upToHole.map { tape.bytes(in: $0.range) } == changes[1..<10].flatMap { Self.expected($0, prefix: [], version: .resp2) })
        #expect(tape.slice(after: 10, maxBytes: 1 << 20) == nil, "the hole is read from the feed")
        let afterHole = tape.slice(after: 11, maxBytes: 1 << 20)
        #expect(afterHole?.through == 20)
        #expect(afterHole.map { tape.bytes(in: $0.range) } == changes[11...].flatMap { Self.expected($0, prefix: [], version: .resp2) })
        // A limit between changes: as many whole changes as fit.
        let two = Self.expected(changes[1], prefix: [], version: .resp2) + Self.expected(changes[2], prefix: [], version: .resp2)
        #expect(tape.slice(after: 1, maxBytes: two.count)?.through == 4, "changes 2 and 3, and 4, which sets a lifetime: no message, no bytes")
        #expect(tape.slice(after: 1, maxBytes: two.count - 1)?.through == 2)
    }

    @Test("past its hard limit the tape forgets its older half: a cursor before its new start is not served, one after it still gets the exact bytes")
    func forgetsItsOlderHalf() {
        let tape = ChangeTape(namespace: "ns", prefix: [], version: .resp3, after: 0)
        tape.byteLimit = 1024
        let changes = Self.changes(1...400)
        tape.append(changes)
        #expect(tape.byteCount <= 1024 * ChangeTape.hardLimitFactor)
        #expect(tape.byteCount > 1024, "between the byte limit and the hard limit, nothing is forgotten without a feed")
        #expect(tape.coveredAfter > 0 && tape.last == 400)
        #expect(tape.slice(after: tape.coveredAfter - 1, maxBytes: 1 << 20) == nil)
        let start = tape.coveredAfter
        let slice = tape.slice(after: start, maxBytes: 1 << 20)
        #expect(slice.map { tape.bytes(in: $0.range) } == changes.filter { $0.sequence > start }.flatMap { Self.expected($0, prefix: [], version: .resp3) })
    }

    @Test("sequence numbers with gaps (etcd's revisions) are found by search")
    func gapsInSequences() {
        let changes = [10, 20, 30].map { Change(sequence: UInt64($0), mutations: [.put(key: b("k\($0)"), value: b("v"))]) }
        let tape = ChangeTape(namespace: "ns", prefix: [], version: .resp2, after: 5)
        tape.append(changes)
        #expect(tape.slice(after: 15, maxBytes: 1 << 20)?.range.lowerBound == Self.expected(changes[0], prefix: [], version: .resp2).count)
        #expect(tape.slice(after: 20, maxBytes: 1 << 20)?.through == 30)
        #expect(tape.slice(after: 4, maxBytes: 1 << 20) == nil, "before what it covers")
    }

    @Test("the tape reads its feed's deliverable changes, and starts again at the window when the feed trimmed past its end")
    func readsItsFeed() {
        let feed = ChangeFeed(namespace: "ns", lagBytes: 2000, listener: ChangeListener())
        feed.addFollower(lastSequence: 0, deliverable: 0)
        let tape = ChangeTape(namespace: "ns", prefix: [], version: .resp2, after: 0)
        let first = Self.changes(1...10)
        feed.publish(first)
        feed.advanceDeliverable(to: 8)
        tape.extend(from: feed)
        #expect(tape.last == 8, "only what is deliverable")
        feed.advanceDeliverable(to: 10)
        tape.extend(from: feed)
        #expect(tape.last == 10)
        // Far more than the feed's 2000 bytes arrive before the tape reads again: the feed
        // trims past the tape's end, so the tape starts again at the window.
        let more = Self.changes(11...400)
        feed.publish(more)
        feed.advanceDeliverable(to: 400)
        tape.extend(from: feed)
        #expect(tape.coveredAfter > 10 && tape.last > tape.coveredAfter)
        #expect(tape.slice(after: 10, maxBytes: 1 << 20) == nil, "a follower at 10 is lagging: not served from the tape")
        let start = tape.coveredAfter
        let slice = tape.slice(after: start, maxBytes: 1 << 20)
        #expect(slice.map { tape.bytes(in: $0.range) } == more.filter { $0.sequence > start && $0.sequence <= tape.last }.flatMap { Self.expected($0, prefix: [], version: .resp2) })
    }

    @Test("past its byte limit, a tape reading its feed forgets the changes the feed trimmed, once they are half its bytes, and keeps the rest of the window")
    func forgetsWhatTheFeedTrimmed() {
        let feed = ChangeFeed(namespace: "ns", lagBytes: 3000, listener: ChangeListener())
        feed.addFollower(lastSequence: 0, deliverable: 0)
        let tape = ChangeTape(namespace: "ns", prefix: [], version: .resp2, after: 0)
        tape.byteLimit = 3000  // as the budget shared by one tape: the feed's lag bytes
        let changes = Self.changes(1...600)
        for change in changes {
            feed.publish([change])
            feed.advanceDeliverable(to: change.sequence)
            tape.extend(from: feed)
            // Every change the window holds stays on the tape, however far past its limit.
            #expect(tape.coveredAfter < feed.windowStart, "after change \(change.sequence)")
            // Past its limit, what the feed trimmed is less than half the tape.
            if tape.byteCount > tape.byteLimit, let window = tape.slice(after: feed.windowStart - 1, maxBytes: 1) {
                #expect(window.range.lowerBound * 2 < tape.byteCount, "after change \(change.sequence)")
            }
        }
        #expect(tape.coveredAfter > 0, "what the feed trimmed was forgotten")
        #expect(tape.byteCount < 3000 * ChangeTape.hardLimitFactor)
        let start = feed.windowStart - 1
        let slice = tape.slice(after: start, maxBytes: 1 << 20)
        #expect(slice.map { tape.bytes(in: $0.range) } == changes.filter { $0.sequence > start }.flatMap { Self.expected($0, prefix: [], version: .resp2) })
    }

    @Test("a round in which every user was noted forgets what all have taken: all of it when all are at the end, the part taken once it is half the bytes; a round missing a user forgets nothing")
    func forgetsWhatEveryUserTook() {
        let changes = Self.changes(1...40)
        let tape = ChangeTape(namespace: "ns", prefix: [], version: .resp2, after: 0)
        tape.users = 2
        tape.append(changes)
        // One user noted: the other may still need everything.
        #expect(tape.noteTaken(through: 40, in: 1))
        tape.forgetTaken(in: 1)
        #expect(tape.coveredAfter == 0 && tape.last == 40)
        // Both, one of them a quarter of the way: too little to move the rest down for.
        #expect(tape.noteTaken(through: 40, in: 2))
        #expect(!tape.noteTaken(through: 10, in: 2), "only a round's first note asks for forgetTaken")
        tape.forgetTaken(in: 2)
        #expect(tape.coveredAfter == 0)
        // Both, the slower past the middle: what both have is forgotten, the rest still served.
        #expect(tape.noteTaken(through: 30, in: 3) && !tape.noteTaken(through: 40, in: 3))
        tape.forgetTaken(in: 3)
        #expect(tape.coveredAfter == 30 && tape.last == 40)
        let slice = tape.slice(after: 30, maxBytes: 1 << 20)
        #expect(slice.map { tape.bytes(in: $0.range) } == changes[30...].flatMap { Self.expected($0, prefix: [], version: .resp2) })
        // Both at the end: the tape is empty and goes on from there.
        _ = tape.noteTaken(through: 40, in: 4)
        _ = tape.noteTaken(through: 40, in: 4)
        tape.forgetTaken(in: 4)
        #expect(tape.byteCount == 0 && tape.coveredAfter == 40 && tape.last == 40)
        let next = Self.changes(41...42)
        tape.append(next)
        #expect(tape.slice(after: 40, maxBytes: 1 << 20).map { tape.bytes(in: $0.range) } == next.flatMap { Self.expected($0, prefix: [], version: .resp2) })
        // A stale round's notes forget nothing.
        tape.forgetTaken(in: 3)
        #expect(tape.coveredAfter == 40 && tape.last == 42)
    }

    @Test("followers of one feed, prefix and version share a tape; the last to leave frees it; the budget is shared out, never below the floor")
    func registry() {
        let listener = ChangeListener()
        let feed = ChangeFeed(namespace: "ns", lagBytes: 1 << 20, listener: listener)
        let other = ChangeFeed(namespace: "other", lagBytes: 1 << 20, listener: listener)
        var tapes = ChangeTapes(byteBudget: 4 << 20)
        let a = tapes.adopt(feed: feed, prefix: [], version: .resp2, cursor: 3)
        let b1 = tapes.adopt(feed: feed, prefix: [], version: .resp2, cursor: 9)
        #expect(a === b1 && a.users == 2 && a.coveredAfter == 3 && tapes.count == 1)
        #expect(a.byteLimit == 4 << 20)
        let resp3 = tapes.adopt(feed: feed, prefix: [], version: .resp3, cursor: 3)
        let prefixed = tapes.adopt(feed: feed, prefix: b("a:"), version: .resp2, cursor: 3)
        let elsewhere = tapes.adopt(feed: other, prefix: [], version: .resp2, cursor: 3)
        #expect(tapes.count == 4 && resp3 !== a && prefixed !== a && elsewhere !== a)
        #expect(a.byteLimit == 1 << 20 && elsewhere.byteLimit == 1 << 20)
        for _ in 0..<30 { _ = tapes.adopt(feed: other, prefix: b("p\(tapes.count)"), version: .resp2, cursor: 0) }
        #expect(a.byteLimit == ChangeTapes.minimumShare, "never below the floor")
        tapes.release(a, feed: ObjectIdentifier(feed))
        #expect(tapes.count == 34, "one user left")
        tapes.release(a, feed: ObjectIdentifier(feed))
        #expect(tapes.count == 33)
        let again = tapes.adopt(feed: feed, prefix: [], version: .resp2, cursor: 50)
        #expect(again !== a && again.coveredAfter == 50, "a new tape once the last user left")
    }
}

private func b(_ s: String) -> [UInt8] { Array(s.utf8) }
