@testable import ActorKVServer
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

/// HashScanCursors: HSCAN's server-wide cursor table, its lifetimes and its bounds.
@Suite("HashScanCursors: HSCAN's cursor table")
struct HashScanCursorsTests {
    @Test("an issued cursor resolves to its key in its namespace, as often as asked")
    func roundTrip() {
        let cursors = HashScanCursors()
        let first = cursors.issue(namespace: "ns", after: Array("k1".utf8), now: 0)
        let second = cursors.issue(namespace: "ns", after: Array("k2".utf8), now: 0)
        #expect(first != second)
        for now: UInt64 in [1, 2, 3] {
            #expect(cursors.resolve(first, namespace: "ns", now: now) == .resume(after: Array("k1".utf8)))
        }
        #expect(cursors.resolve(second, namespace: "ns", now: 4) == .resume(after: Array("k2".utf8)))
        #expect(cursors.count == 2)
    }

    @Test("cursor 0 is the start, in any namespace, even in an empty table")
    func zeroIsStart() {
        let cursors = HashScanCursors()
        #expect(cursors.resolve(0, namespace: "ns", now: 0) == .start)
        _ = cursors.issue(namespace: "ns", after: [1], now: 0)
        #expect(cursors.resolve(0, namespace: "other", now: 0) == .start)
    }

    @Test("a cursor never issued is unknown, also one another table issued")
    func unknownCursor() {
        let cursors = HashScanCursors(), elsewhere = HashScanCursors()
        let mine = cursors.issue(namespace: "ns", after: [1], now: 0)
        let theirs = elsewhere.issue(namespace: "ns", after: [2], now: 0)
        #expect(cursors.resolve(theirs, namespace: "ns", now: 0) == .unknown)
        #expect(cursors.resolve(mine &+ 1, namespace: "ns", now: 0) == .unknown)
        #expect(cursors.resolve(1 << 60, namespace: "ns", now: 0) == .unknown)
    }

    @Test("a cursor is unknown in another namespace, and stays valid in its own")
    func wrongNamespace() {
        let cursors = HashScanCursors()
        let cursor = cursors.issue(namespace: "a", after: Array("k".utf8), now: 0)
        #expect(cursors.resolve(cursor, namespace: "b", now: 1) == .unknown)
        #expect(cursors.resolve(cursor, namespace: "A", now: 1) == .unknown)
        #expect(cursors.resolve(cursor, namespace: "a", now: 2) == .resume(after: Array("k".utf8)))
    }

    @Test("a cursor expires a lifetime after it was issued or last resolved")
    func expiry() {
        let cursors = HashScanCursors(lifetime: 1000)
        let used = cursors.issue(namespace: "ns", after: [1], now: 0)
        let unused = cursors.issue(namespace: "ns", after: [2], now: 0)
        #expect(cursors.resolve(unused, namespace: "ns", now: 999) == .resume(after: [2]))
        #expect(cursors.resolve(used, namespace: "ns", now: 999) == .resume(after: [1]))
        #expect(cursors.resolve(used, namespace: "ns", now: 1998) == .resume(after: [1]))
        #expect(cursors.resolve(unused, namespace: "ns", now: 1999) == .unknown)
        #expect(cursors.resolve(used, namespace: "ns", now: 2997) == .resume(after: [1]))
        #expect(cursors.resolve(used, namespace: "ns", now: 3997) == .unknown)
        #expect(cursors.count == 0)
    }

    @Test("expired cursors are dropped by later calls without being asked for")
    func lazyExpiry() {
        let cursors = HashScanCursors(lifetime: 1000)
        for key in 0..<100 { _ = cursors.issue(namespace: "ns", after: [UInt8(key)], now: UInt64(key)) }
        let kept = cursors.issue(namespace: "ns", after: [200], now: 1050)
        #expect(cursors.count == 50)
        #expect(cursors.resolve(0, namespace: "ns", now: 2000) == .start)
        #expect(cursors.count == 50, "cursor 0 needs no table")
        #expect(cursors.resolve(kept &+ 1, namespace: "ns", now: 2000) == .unknown)
        #expect(cursors.count == 1)
        #expect(cursors.isConsistent)
    }

    @Test("past the capacity, the least recently used cursor is dropped")
    func evictionByCount() {
        let cursors = HashScanCursors(capacity: 3)
        let a = cursors.issue(namespace: "ns", after: [1], now: 0)
        let b = cursors.issue(namespace: "ns", after: [2], now: 1)
        let c = cursors.issue(namespace: "ns", after: [3], now: 2)
        #expect(cursors.resolve(a, namespace: "ns", now: 3) == .resume(after: [1]))
        let d = cursors.issue(namespace: "ns", after: [4], now: 4)
        #expect(cursors.resolve(b, namespace: "ns", now: 5) == .unknown)
        #expect(cursors.resolve(a, namespace: "ns", now: 5) == .resume(after: [1]))
        #expect(cursors.resolve(d, namespace: "ns", now: 5) == .resume(after: [4]))
        #expect(cursors.resolve(c, namespace: "ns", now: 5) == .resume(after: [3]))
        #expect(cursors.count == 3)
        #expect(cursors.isConsistent)
    }

    @Test("past the byte budget, least recently used cursors are dropped; a larger one is kept alone")
    func evictionByBytes() {
        let cursors = HashScanCursors(byteBudget: 10)  // each entry below: 1 + 3 bytes
        let a = cursors.issue(namespace: "n", after: [1, 1, 1], now: 0)
        let b = cursors.issue(namespace: "n", after: [2, 2, 2], now: 1)
        #expect(cursors.storedBytes == 8)
        let c = cursors.issue(namespace: "n", after: [3, 3, 3], now: 2)
        #expect(cursors.storedBytes == 8)
        #expect(cursors.resolve(a, namespace: "n", now: 3) == .unknown)
        #expect(cursors.resolve(b, namespace: "n", now: 3) == .resume(after: [2, 2, 2]))
        #expect(cursors.resolve(c, namespace: "n", now: 3) == .resume(after: [3, 3, 3]))
        let huge = [UInt8](repeating: 9, count: 20)
        let d = cursors.issue(namespace: "n", after: huge, now: 4)
        #expect(cursors.count == 1)
        #expect(cursors.resolve(d, namespace: "n", now: 5) == .resume(after: huge))
        #expect(cursors.isConsistent)
    }

    @Test("a cursor may be retried until the cursor issued after it is used; then it is forgotten")
    func predecessorForgotten() {
        let cursors = HashScanCursors()
        let first = cursors.issue(namespace: "ns", after: [1], now: 0)
        #expect(cursors.resolve(first, namespace: "ns", now: 1) == .resume(after: [1]))
        let second = cursors.issue(namespace: "ns", after: [2], now: 1, following: first)
        // A retry of the first page (its reply was lost, say) gives another cursor for the same next page.
        #expect(cursors.resolve(first, namespace: "ns", now: 2) == .resume(after: [1]))
        let retried = cursors.issue(namespace: "ns", after: [2], now: 2, following: first)
        #expect(cursors.count == 3)
        #expect(cursors.resolve(second, namespace: "ns", now: 3) == .resume(after: [2]))
        #expect(cursors.resolve(first, namespace: "ns", now: 3) == .unknown, "the scan moved past it")
        #expect(cursors.resolve(second, namespace: "ns", now: 4) == .resume(after: [2]), "the page in use may still be retried")
        #expect(cursors.resolve(retried, namespace: "ns", now: 4) == .resume(after: [2]))
        #expect(cursors.count == 2 && cursors.isConsistent)
    }

    @Test("a predecessor's number drawn again for another namespace's scan is not forgotten")
    func predecessorOfOtherNamespaceKept() {
        let draws = Mutex<[UInt64]>([5, 6, 5])
        let cursors = HashScanCursors(capacity: 2, random: { draws.withLock { $0.removeFirst() } })
        #expect(cursors.issue(namespace: "a", after: [1], now: 0) == 5)
        #expect(cursors.issue(namespace: "a", after: [2], now: 1, following: 5) == 6)
        // The table is full: a's 5 is dropped to make room, and 5 is drawn again for b.
        #expect(cursors.issue(namespace: "b", after: [9], now: 2) == 5)
        #expect(cursors.resolve(6, namespace: "a", now: 3) == .resume(after: [2]))
        #expect(cursors.resolve(5, namespace: "b", now: 4) == .resume(after: [9]))
        #expect(cursors.isConsistent)
    }

    @Test("a scan of many pages holds two cursors, not one per page: another scan's cursor stays in a small table")
    func longScanKeepsOthers() {
        let cursors = HashScanCursors(capacity: 4)
        let other = cursors.issue(namespace: "slow", after: Array("f10".utf8), now: 0)
        var cursor: UInt64 = 0
        for page in 0..<1000 {
            let now = UInt64(page + 1)
            if cursor != 0 { #expect(cursors.resolve(cursor, namespace: "big", now: now) == .resume(after: [UInt8(truncatingIfNeeded: page - 1)])) }
            cursor = cursors.issue(namespace: "big", after: [UInt8(truncatingIfNeeded: page)], now: now, following: cursor)
            #expect(cursors.count <= 3)
        }
        #expect(cursors.resolve(other, namespace: "slow", now: 2000) == .resume(after: Array("f10".utf8)))
        #expect(cursors.isConsistent)
    }

    @Test("cursors from the system's generator are distinct, nonzero and at most 2^53")
    func systemCursors() {
        let cursors = HashScanCursors()
        let issued = (0..<10_000).map { _ in cursors.issue(namespace: "ns", after: [], now: 0) }
        #expect(issued.allSatisfy { $0 != 0 && $0 <= 1 << 53 })
        #expect(Set(issued).count == issued.count)
        #expect(issued.contains { $0 >= 1 << 52 }, "cursors use all 53 bits")
    }

    @Test("random draws are masked to 53 bits; 0 and cursors in use are drawn again")
    func drawsAreMaskedAndRetried() {
        let draws = Mutex<[UInt64]>([0, 1 << 53, .max, .max, (1 << 60) | 7])
        let cursors = HashScanCursors(random: { draws.withLock { $0.removeFirst() } })
        #expect(cursors.issue(namespace: "ns", after: [1], now: 0) == (1 << 53) - 1)
        #expect(cursors.issue(namespace: "ns", after: [2], now: 0) == 7)
        #expect(draws.withLock { $0.isEmpty })
        #expect(cursors.resolve(7, namespace: "ns", now: 0) == .resume(after: [2]))
    }

    @Test("threads issuing and resolving at once keep the table consistent and never mix up keys")
    func concurrentUse() async throws {
        let cursors = HashScanCursors(capacity: 64, byteBudget: 1024, lifetime: 50)
        let mistakes = Atomic<Int>(0), resumed = Atomic<Int>(0)
        try await onOwnThread {
            DispatchQueue.concurrentPerform(iterations: 8) { thread in
                for step in 0..<3000 {
                    let key = Array("t\(thread)-\(step)".utf8), namespace = "ns\(thread % 2)"
                    let cursor = cursors.issue(namespace: namespace, after: key, now: UInt64(step))
                    switch cursors.resolve(cursor, namespace: namespace, now: UInt64(step + step % 3)) {
                    case .resume(after: let found) where found == key: resumed.add(1, ordering: .relaxed)
                    case .unknown: break
                    default: mistakes.add(1, ordering: .relaxed)
                    }
                    if case .resume = cursors.resolve(cursor, namespace: "ns\((thread + 1) % 2)", now: UInt64(step)) {
                        mistakes.add(1, ordering: .relaxed)
                    }
                }
            }
        }
        #expect(mistakes.load(ordering: .relaxed) == 0)
        #expect(resumed.load(ordering: .relaxed) > 0)
        #expect(cursors.count <= 64 && cursors.storedBytes <= 1024)
        #expect(cursors.isConsistent)
    }
}
