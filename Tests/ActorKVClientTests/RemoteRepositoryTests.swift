import ActorKVClient
import ActorKVTestSupport
import Foundation
import Testing

struct Question: Codable, Identifiable, Sendable, Equatable {
    var id: String
    var text: String
    var tags: [String]
    var score: Double
}

struct Event: Codable, Identifiable, Sendable, Equatable {
    var id: UUID
    var name: String
    var payload: [String: Int]
}

struct Counter: Codable, Identifiable, Sendable, Equatable {
    var id: Int
    var value: Int
    var note: String?
}

/// The bytes the embedded `Repository` stores for an item: JSONEncoder with sorted keys.
func embeddedFormat<T: Encodable>(_ item: T) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return Array(try encoder.encode(item))
}

@Suite("RemoteRepository")
struct RemoteRepositoryTests {
    @Test("String ids: save, find, loadAll in key order, count, delete; stored bytes are the embedded format")
    func stringIDs() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Question>(client: kv, namespace: "questions")
            let q1 = Question(id: "q1", text: "Why \"actors\"?\nBecause.", tags: ["swift", "ünïcode"], score: 1.5)
            let q2 = Question(id: "q2", text: "", tags: [], score: -3)
            try await repo.save(q2)
            try await repo.save(q1)
            #expect(try await repo.find(by: "q1") == q1)
            #expect(try await repo.find(by: "nope") == nil)
            #expect(try await repo.loadAll() == [q1, q2])
            #expect(try await repo.count() == 2)

            // Same key and same JSON bytes as the embedded Repository writes.
            #expect(try await kv.get("questions", "q1") == (try embeddedFormat(q1)))
            let raw = try #require(try await kv.getString("questions", "q1"))
            #expect(raw.hasPrefix("{\"id\":\"q1\",\"score\":1.5,\"tags\":"))

            // And data written in that format (e.g. by the embedded Repository) reads back.
            let q3 = Question(id: "q3", text: "written raw", tags: ["x"], score: 0)
            try await kv.put("questions", "q3", try embeddedFormat(q3))
            #expect(try await repo.find(by: "q3") == q3)

            var updated = q1
            updated.score = 99
            try await repo.save(updated)
            #expect(try await repo.find(by: "q1") == updated)
            try await repo.delete("q1")
            try await repo.delete("q1")
            #expect(try await repo.find(by: "q1") == nil)
            #expect(try await repo.loadAll().map(\.id) == ["q2", "q3"])
        }
    }

    @Test("UUID ids use upper-case text keys; save(contentsOf:) is one batch; loadAll pages past 1000")
    func uuidIDs() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Event>(client: kv, namespace: "events")
            // One batch: an agent's etcd txn holds at most --max-txn-ops writes (1024 in the tests' cluster).
            let total = ClusterTarget.active ? 1020 : 2500
            let events = (0..<total).map { Event(id: UUID(), name: "event \($0)", payload: ["n": $0, "sq": $0 * $0]) }
            try await repo.save(contentsOf: events)
            try await repo.save(contentsOf: [])
            #expect(try await repo.count() == total)

            let sample = events[total / 2]
            #expect(try await repo.find(by: sample.id) == sample)
            #expect(try await kv.get("events", sample.id.uuidString.uppercased()) == (try embeddedFormat(sample)))
            #expect(try await kv.get("events", sample.id.uuidString.lowercased()) == nil)

            let all = try await repo.loadAll()
            #expect(all.count == total)
            #expect(all == events.sorted { $0.id.uuidString < $1.id.uuidString })
            #expect(Set(all.map(\.id)) == Set(events.map(\.id)))

            // save(contentsOf:) is all-or-nothing: an item with an invalid (empty) key fails it.
            let bad = RemoteRepository<Question>(client: kv, namespace: "events")
            let error = await expectActorKVError {
                try await bad.save(contentsOf: [Question(id: "ok", text: "", tags: [], score: 0),
                                                Question(id: "", text: "", tags: [], score: 0)])
            }
            #expect(error?.serverCode == "BADKEY")
            #expect(try await kv.get("events", "ok") == nil)
        }
    }

    @Test("Int ids use decimal text keys (text order); undecodable bytes raise decodingFailed")
    func intIDs() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Counter>(client: kv, namespace: "counters")
            let counters = [Counter(id: 9, value: 1, note: nil), Counter(id: 10, value: 2, note: "ten"),
                            Counter(id: -1, value: 3, note: "minus")]
            try await repo.save(contentsOf: counters)
            #expect(try await repo.find(by: 10) == counters[1])
            #expect(try await kv.get("counters", "10") == (try embeddedFormat(counters[1])))
            #expect(try await kv.getString("counters", "9") == "{\"id\":9,\"value\":1}")
            #expect(try await repo.loadAll().map(\.id) == [-1, 10, 9])

            try await kv.put("counters", "7", "not json")
            let error = await expectActorKVError { _ = try await repo.find(by: 7) }
            if case .decodingFailed(let namespace, let key, _)? = error {
                #expect(namespace == "counters")
                #expect(key == Array("7".utf8))
            } else {
                Issue.record("expected decodingFailed, got \(String(describing: error))")
            }
            let loadError = await expectActorKVError { _ = try await repo.loadAll() }
            #expect(loadError?.description.contains("cannot decode") == true)
        }
    }

    @Test("scanPage: key order, a prefix, and pages that together return every item once")
    func scanPages() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Question>(client: kv, namespace: "scanpages")
            let users = (0..<25).map { Question(id: String(format: "user:%02d", $0), text: "u\($0)", tags: [], score: 0) }
            try await repo.save(contentsOf: users + [Question(id: "team:1", text: "t", tags: [], score: 0)])
            var seen: [Question] = []
            var cursor = ScanPage.start
            var pages = 0
            repeat {
                let page = try await repo.scanPage(cursor: cursor, prefix: "user:", count: 10)
                seen += page.items
                cursor = page.nextCursor
                pages += 1
            } while cursor != ScanPage.start
            #expect(seen == users)
            #expect(pages == 3)
        }
    }
}
