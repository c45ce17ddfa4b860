import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

private struct Note: Codable, Identifiable, Sendable, Equatable {
    var id: String
    var text: String
    var tags: [String]
}

private struct Reading: Codable, Identifiable, Sendable, Equatable {
    var id: UUID
    var celsius: Double
}

private struct Row: Codable, Identifiable, Sendable, Equatable {
    var id: Int
    var value: Int
}

/// A value whose encoding fails, to prove that `save(contentsOf:)` is all-or-nothing.
private struct Unencodable: Codable, Identifiable, Sendable {
    var id: String
    var fails: Bool
    func encode(to encoder: any Encoder) throws {
        if fails { throw EncodingError.invalidValue(fails, .init(codingPath: [], debugDescription: "refused")) }
        var container = encoder.singleValueContainer()
        try container.encode(id)
    }
    init(id: String, fails: Bool) { self.id = id; self.fails = fails }
    init(from decoder: any Decoder) throws { id = try decoder.singleValueContainer().decode(String.self); fails = false }
}

/// The typed embedded API (the seed pattern's `LocalRepository` surface) over a real store.
@Suite("Repository (typed, embedded)")
struct RepositoryTests {
    @Test("String ids: save, find, loadAll in key order, count, delete; the stored bytes are sorted-key JSON under the id")
    func stringIDs() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        let n1 = Note(id: "n1", text: "Why \"actors\"?\nBecause.", tags: ["ünïcode"])
        let n2 = Note(id: "n2", text: "", tags: [])
        try await withStore(dir.data) { store in
            let repo = try await Repository<Note>(store: store, namespace: "notes")
            try await repo.save(n2)
            try await repo.save(n1)
            #expect(try await repo.find(by: "n1") == n1)
            #expect(try await repo.find(by: "missing") == nil)
            #expect(try await repo.loadAll() == [n1, n2])
            #expect(await repo.count() == 2)
            let raw = try #require(await repo.namespace.get(b("n1")))
            #expect(String(decoding: raw, as: UTF8.self).hasPrefix("{\"id\":\"n1\",\"tags\":[\"ünïcode\"],\"text\":"))
            try await repo.delete("n2")
            try await repo.delete("n2")
            #expect(try await repo.loadAll() == [n1])
        }
        // Durable: a reopened store has the same items.
        try await withStore(dir.data) { store in
            let repo = try await Repository<Note>(store: store, namespace: "notes")
            #expect(try await repo.loadAll() == [n1])
        }
    }

    @Test("UUID and Int ids: keys are their text; loadAll pages past 1000 items")
    func uuidAndIntIDs() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let readings = try await Repository<Reading>(store: store, namespace: "readings")
            let items = (0..<1500).map { Reading(id: UUID(), celsius: Double($0)) }
            try await readings.save(contentsOf: items)
            let all = try await readings.loadAll()
            #expect(all.count == 1500)
            #expect(all.map(\.id.uuidString) == items.map(\.id.uuidString).sorted())
            #expect(await readings.namespace.get(Array(items[7].id.uuidString.utf8)) != nil)

            let rows = try await Repository<Row>(store: store, namespace: "rows")
            try await rows.save(contentsOf: [Row(id: 10, value: 1), Row(id: 9, value: 2), Row(id: -1, value: 3)])
            #expect(try await rows.loadAll().map(\.id) == [-1, 10, 9], "text order of the decimal keys")
            #expect(try await rows.find(by: 9) == Row(id: 9, value: 2))
        }
    }

    @Test("save(contentsOf:) is all-or-nothing: one item that cannot be encoded stores none of them")
    func batchIsAllOrNothing() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let repo = try await Repository<Unencodable>(store: store, namespace: "batch")
            await #expect(throws: EncodingError.self) {
                try await repo.save(contentsOf: [Unencodable(id: "a", fails: false), Unencodable(id: "b", fails: true)])
            }
            #expect(await repo.count() == 0)
            try await repo.save(contentsOf: [Unencodable(id: "a", fails: false), Unencodable(id: "c", fails: false)])
            #expect(await repo.count() == 2)
        }
    }

    @Test("bytes that do not decode as the type are an error, not a missing item")
    func undecodableBytes() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let repo = try await Repository<Note>(store: store, namespace: "notes")
            try await repo.namespace.put(b("bad"), b("not json"))
            await #expect(throws: DecodingError.self) { _ = try await repo.find(by: "bad") }
            await #expect(throws: DecodingError.self) { _ = try await repo.loadAll() }
        }
    }

    @Test("scanPage: key order, a prefix, and pages that together return every item once")
    func scanPages() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let repo = try await Repository<Note>(store: store, namespace: "scan")
            let users = (0..<25).map { Note(id: String(format: "user:%02d", $0), text: "u\($0)", tags: []) }
            try await repo.save(contentsOf: users + [Note(id: "team:1", text: "t", tags: []), Note(id: "a", text: "a", tags: [])])
            var seen: [Note] = []
            var cursor = ScanCursor.start
            var pages = 0
            repeat {
                let page = try await repo.scanPage(after: cursor, prefix: "user:", limit: 10)
                #expect(page.items.count <= 10)
                seen += page.items
                cursor = page.next
                pages += 1
            } while cursor != .start
            #expect(seen == users)
            #expect(pages == 3)
            let first = try await repo.scanPage(limit: 2)
            #expect(first.items.map(\.id) == ["a", "team:1"])
            #expect(first.next != .start)
        }
    }
}
