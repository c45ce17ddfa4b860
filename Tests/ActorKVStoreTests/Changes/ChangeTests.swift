@testable import ActorKVStore
import ActorKVTestSupport
import Testing

/// A change read from its run's records as logged (what a namespace publishes) against the same
/// change made from its mutations (what the log files and etcd give): the same number,
/// mutations and writes.
@Suite("Changes read from their records")
struct ChangeTests {
    private static let lifetime = Lifetime(deadline: 1_900_000_000_000, owner: 0)

    /// Three records as a run writes them, back to back: a put, a batch of every kind of
    /// mutation (an empty value and an empty key among them), and a delete of two keys.
    private static let records: [LogRecord] = [
        LogRecord(sequence: 41, mutations: [.put(key: b("config/theme"), value: b("dark"))], durableThrough: 40),
        LogRecord(sequence: 42, mutations: [
            .put(key: b("a"), value: []), .lifetime(key: b("a"), lifetime), .delete(key: b("b")),
            .put(key: [], value: b("empty key")), .put(key: b("c"), value: Array(repeating: 0xFF, count: 70_000)),
        ]),
        LogRecord(sequence: 43, mutations: [.delete(key: b("x")), .delete(key: b("y"))], durableThrough: 42),
    ]

    private static var run: [UInt8] {
        var buffer: [UInt8] = []
        for record in records { LogRecordCodec.encode(record, into: &buffer) }
        return buffer
    }

    /// What `forEachWrite` passes, as arrays (nil: a delete).
    private static func writes(_ change: Change) -> [[UInt8]?] {
        var out: [[UInt8]?] = []
        change.forEachWrite { key, value in
            out.append(Array(key))
            out.append(value.map { Array($0) })
        }
        return out
    }

    @Test("each record of a run becomes one change with its number and mutations, equal to one made from them")
    func recordsBecomeChanges() {
        let changes = Change.changes(ofRecords: Self.run)
        #expect(changes.map(\.sequence) == [41, 42, 43])
        for (change, record) in zip(changes, Self.records) {
            #expect(change.mutations == record.mutations)
            #expect(change == Change(sequence: record.sequence, mutations: record.mutations))
            #expect(change.byteSize == LogRecordCodec.encode(record).count, "a record counts its length against the lag bound")
        }
        #expect(changes[0] != Change(sequence: 41, mutations: [.put(key: b("config/theme"), value: b("light"))]))
        #expect(changes[0] != Change(sequence: 40, mutations: Self.records[0].mutations))
        #expect(Change.changes(ofRecords: []).isEmpty)
    }

    @Test("forEachWrite passes each put and delete in order, and no lifetime, from a record as from mutations")
    func writesInOrder() {
        let changes = Change.changes(ofRecords: Self.run)
        let expected: [[[UInt8]?]] = [
            [b("config/theme"), b("dark")],
            [b("a"), [], b("b"), nil, [], b("empty key"), b("c"), Array(repeating: 0xFF, count: 70_000)],
            [b("x"), nil, b("y"), nil],
        ]
        for (index, change) in changes.enumerated() {
            #expect(Self.writes(change) == expected[index])
            #expect(Self.writes(Change(sequence: change.sequence, mutations: Self.records[index].mutations)) == expected[index])
        }
    }
}
