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

/// The seed's view model shape: `@MainActor`, state of its own that `update`'s body changes.
@MainActor
private final class RowModel {
    let rows: Repository<Row>
    var bumps = 0
    let step = 10
    init(_ rows: Repository<Row>) { self.rows = rows }

    /// Captures `self` (main-actor state) in a closure that is not Sendable: compiles only
    /// because `update` is `nonisolated(nonsending)`.
    func bump(_ id: Int) async throws {
        try await rows.update(id) { $0.value += self.step }
        bumps += 1
        _ = try await rows.loadAll()
    }
}

/// A custom id type: `RepositoryKey` is in scope through `import ActorKVStore` alone (this file
/// does not import ActorKVProtocol).
private struct TicketID: Hashable, Codable, RepositoryKey {
    var number: Int
    var repositoryKey: [UInt8] { Array("T-\(number)".utf8) }
    init(number: Int) { self.number = number }
    init?(repositoryKey: [UInt8]) {
        let text = String(decoding: repositoryKey, as: UTF8.self)
        guard text.hasPrefix("T-"), let number = Int(text.dropFirst(2)) else { return nil }
        self.number = number
    }
}

private struct Ticket: Codable, Identifiable, Sendable, Equatable {
    var id: TicketID
    var title: String
}

/// The bytes `Repository` stores for an item (sorted-key JSON).
private func embeddedBytes<T: Encodable>(_ item: T) throws -> [UInt8] {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return Array(try encoder.encode(item))
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

    @Test("a repository made from a store follows its name: after a rename or copy onto it, or its removal, it reads and writes the namespace the name names then; one made from a namespace keeps that one")
    func followsItsName() async throws {
        let dir = TemporaryDirectory("repo-follow")
        defer { dir.remove() }
        func note(_ id: String) -> Note { Note(id: id, text: id, tags: []) }
        try await withStore(dir.data) { store in
            let config = try await Repository<Note>(store: store, namespace: "config")
            let pinned = Repository<Note>(namespace: config.namespace)
            try await config.save(note("old"))
            let staging = try await Repository<Note>(store: store, namespace: "staging")
            try await staging.save(note("new"))
            // The recipe: build under a temporary name, then swap it in.
            try await store.renameNamespace("staging", to: "config", replacing: true)
            #expect(config.namespace.isDetached && staging.namespace.isDetached)
            #expect(try await config.loadAll() == [note("new")], "the namespace the name names now")
            #expect(try await config.find(by: "new") == note("new"))
            #expect(await config.count() == 1)
            try await config.save(note("more"))
            #expect(try await Repository<Note>(store: store, namespace: "config").loadAll() == [note("more"), note("new")])
            #expect(try await pinned.loadAll() == [], "made from a namespace: it keeps the one it was made with")
            await #expect(throws: StoreError.self) { try await pinned.save(note("lost")) }
            #expect(try await staging.loadAll() == [], "renamed away: its name names nothing now")
            // A copy onto the name, and its removal.
            try await Repository<Note>(store: store, namespace: "template").save(note("t"))
            let beforeCopy = try await Repository<Note>(store: store, namespace: "config")
            try await store.copyNamespace("template", to: "config", replacing: true)
            #expect(try await beforeCopy.loadAll() == [note("t")] && config.namespace.isDetached)
            try await store.removeNamespace("config")
            #expect(try await beforeCopy.loadAll() == [])
            #expect(await beforeCopy.count() == 0)
            #expect(try await beforeCopy.find(by: "t") == nil)
            #expect(await store.namespaceNames().contains("config") == false, "a read created nothing")
            try await beforeCopy.save(note("again"))
            #expect(try await Repository<Note>(store: store, namespace: "config").loadAll() == [note("again")], "a write creates it")
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

    @Test("update whose body changes the item's id throws and writes nothing: it would write under another item's key with this one's version")
    func updateThatChangesTheIDIsRefused() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let rows = try await Repository<Row>(store: store, namespace: "rows")
            try await rows.save(contentsOf: [Row(id: 1, value: 10), Row(id: 2, value: 20)])  // one record: one version
            let error = await #expect(throws: EncodingError.self) { try await rows.update(1) { $0.id = 2; $0.value = 11 } }
            #expect("\(String(describing: error))".contains("changed the item's id from '1' to '2'"), "\(String(describing: error))")
            #expect(try await rows.loadAll() == [Row(id: 1, value: 10), Row(id: 2, value: 20)], "nothing written")
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
            let findError = await #expect(throws: RepositoryError.self) { _ = try await repo.find(by: "bad") }
            guard case .decodingFailed(let namespace, let key, let reason)? = findError else {
                Issue.record("expected decodingFailed, got \(String(describing: findError))"); return
            }
            #expect(namespace == "notes")
            #expect(key == b("bad"))
            #expect(!reason.isEmpty)
            let loadError = await #expect(throws: RepositoryError.self) { _ = try await repo.loadAll() }
            #expect(loadError?.description.hasPrefix("cannot decode the item under key 'bad' in namespace 'notes': ") == true)
        }
    }

    @Test("an item stored under a key that is not its id's (a lower-case UUID, another id) is an error, never a duplicate")
    func keyMustBeTheIDsKey() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            // What a Python writer does with str(uuid): the lower-case text.
            let readings = try await Repository<Reading>(store: store, namespace: "readings")
            let reading = Reading(id: UUID(), celsius: 21.5)
            let lower = b(reading.id.uuidString.lowercased())
            try await readings.namespace.put(lower, try embeddedBytes(reading))
            #expect(try await readings.find(by: reading.id) == nil, "the upper-case key holds nothing")
            #expect(try await readings.update(reading.id) { $0.celsius += 1 } == nil)
            try await readings.save(reading)   // a second key for the same id
            for load in [{ try await readings.loadAll().count }, { try await readings.scanPage().items.count }] {
                let error = await #expect(throws: RepositoryError.self) { _ = try await load() }
                guard case .decodingFailed(let namespace, let key, let reason)? = error else {
                    Issue.record("expected decodingFailed, got \(String(describing: error))"); continue
                }
                #expect(namespace == "readings")
                #expect(key == lower)
                #expect(reason.contains(reading.id.uuidString), "names the id's own key")
            }
            try await readings.namespace.delete([lower])
            #expect(try await readings.loadAll() == [reading])

            // A value under key A whose JSON says id B: not returned as B.
            let notes = try await Repository<Note>(store: store, namespace: "notes")
            try await notes.namespace.put(b("a"), try embeddedBytes(Note(id: "b", text: "B", tags: [])))
            for read in [{ try await notes.find(by: "a") }, { try await notes.findVersioned(by: "a")?.item },
                         { try await notes.update("a") { $0.text = "x" } }, { try await notes.loadAll().first }] {
                let error = await #expect(throws: RepositoryError.self) { _ = try await read() }
                guard case .decodingFailed("notes", b("a"), let reason)? = error else {
                    Issue.record("expected decodingFailed of key a, got \(String(describing: error))"); continue
                }
                #expect(reason.hasPrefix("the item's id b has the key 'b', not this one"))
            }
            // Strings are keys byte for byte: "é" precomposed and decomposed are different keys.
            let precomposed = "caf\u{E9}", decomposed = "cafe\u{301}"
            #expect(precomposed == decomposed, "equal Swift strings")
            try await notes.namespace.put(b(decomposed), try embeddedBytes(Note(id: precomposed, text: "", tags: [])))
            await #expect(throws: RepositoryError.self) { _ = try await notes.find(by: decomposed) }
            #expect(try await notes.find(by: precomposed) == nil)
        }
    }

    @Test("a custom id type conforms to RepositoryKey with import ActorKVStore alone; its key is its text")
    func customIDs() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let tickets = try await Repository<Ticket>(store: store, namespace: "tickets")
            try await tickets.save(Ticket(id: TicketID(number: 7), title: "printer"))
            #expect(await tickets.namespace.get(b("T-7")) == b("{\"id\":{\"number\":7},\"title\":\"printer\"}"))
            #expect(try await tickets.update(TicketID(number: 7)) { $0.title = "fixed" }?.title == "fixed")
            #expect(try await tickets.loadAll() == [Ticket(id: TicketID(number: 7), title: "fixed")])
        }
    }

    @Test("update re-reads and retries when the item was written in between; its body may throw any error and decode")
    func updateRetries() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let rows = try await Repository<Row>(store: store, namespace: "rows")
            #expect(try await rows.update(7) { $0.value += 1 } == nil, "no item: nothing written")
            #expect(await rows.count() == 0)
            try await rows.save(Row(id: 7, value: 0))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<8 {
                    group.addTask { for _ in 0..<25 { try await rows.update(7) { $0.value += 1 } } }
                }
                try await group.waitForAll()
            }
            #expect(try await rows.find(by: 7) == Row(id: 7, value: 200))

            // The body decodes JSON and throws an error that is not a StoreError.
            struct Refused: Error {}
            let updated = try await rows.update(7) { row in
                row.value = try JSONDecoder().decode(Int.self, from: Data("41".utf8)) + 1
            }
            #expect(updated == Row(id: 7, value: 42))
            await #expect(throws: Refused.self) { try await rows.update(7) { _ in throw Refused() } }
            #expect(try await rows.find(by: 7) == Row(id: 7, value: 42), "nothing written when the body throws")
        }
    }

    @Test("update gives up with conflict after maxAttempts when every write loses the race, writing nothing")
    func updateGivesUp() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let rows = try await Repository<Row>(store: store, namespace: "rows")
            try await rows.save(Row(id: 1, value: 0))
            let error = await #expect(throws: RepositoryError.self) {
                try await Self.updateWithRival(rows.namespace, rows)
            }
            guard case .conflict(let reason)? = error else { Issue.record("expected a conflict, got \(String(describing: error))"); return }
            #expect(reason.contains("'1' in namespace 'rows'") && reason.contains("3 attempts"))
            #expect(try await rows.find(by: 1) == Row(id: 1, value: -7), "only the rival's writes landed")
        }
    }

    /// Runs `update` on the namespace's own actor, so that its body (which runs on the caller's
    /// actor) can write the item between each attempt's read and its conditional write.
    private static func updateWithRival(_ namespace: isolated Namespace, _ rows: Repository<Row>) async throws {
        let rival = try embeddedBytes(Row(id: 1, value: -7))
        var attempts = 0
        defer { #expect(attempts == 3) }
        try await rows.update(1, maxAttempts: 3) { row in
            attempts += 1
            row.value = 100
            _ = namespace.execute([.put(key: b("1")[...], value: rival[...])])
        }
    }

    @Test("update and the reads can be called from @MainActor code with a closure that is not Sendable")
    func calledFromTheMainActor() async throws {
        let dir = TemporaryDirectory("repo")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let rows = try await Repository<Row>(store: store, namespace: "rows")
            try await rows.save(Row(id: 3, value: 1))
            let model = await RowModel(rows)
            try await model.bump(3)
            #expect(try await rows.find(by: 3) == Row(id: 3, value: 11))
            #expect(await model.bumps == 1)
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
