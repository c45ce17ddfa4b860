import ActorKVClient
import ActorKVTestSupport
import Foundation
import Testing

// This file imports ActorKVClient only, not ActorKVProtocol: `RepositoryKey` must be in scope
// through ActorKVClient's re-export for `TicketID` to compile.

/// A custom id type, as a user declares one.
struct TicketID: Hashable, Codable, RepositoryKey {
    var number: Int
    var repositoryKey: [UInt8] { Array("T-\(number)".utf8) }
    init(number: Int) { self.number = number }
    init?(repositoryKey: [UInt8]) {
        let text = String(decoding: repositoryKey, as: UTF8.self)
        guard text.hasPrefix("T-"), let number = Int(text.dropFirst(2)) else { return nil }
        self.number = number
    }
}

struct Ticket: Codable, Identifiable, Sendable, Equatable {
    var id: TicketID
    var title: String
}

/// The seed's view model shape: `@Observable @MainActor` (without Observation here), with state
/// of its own that `update`'s body reads.
@MainActor
final class QuestionModel {
    let repository: RemoteRepository<Question>
    var bumps = 0
    let step = 10.0
    init(_ repository: RemoteRepository<Question>) { self.repository = repository }

    /// Captures `self` (main-actor state) in a closure that is not Sendable: compiles only
    /// because `update` is `nonisolated(nonsending)`.
    func bump(_ id: String) async throws {
        try await repository.update(id) { $0.score += self.step }
        bumps += 1
    }
}

/// The audit's call, as written: no capture, from a @MainActor function.
@MainActor func noCapture(_ repo: RemoteRepository<Question>, _ id: String) async throws {
    try await repo.update(id) { $0.score += 1 }
}

@Suite("RemoteRepository: keys and isolation")
struct RemoteRepositoryKeyTests {
    @Test("update can be called from @MainActor code with a closure that is not Sendable")
    func updateFromTheMainActor() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Question>(client: kv, namespace: "questions")
            try await repo.save(Question(id: "q1", text: "Why actors?", tags: [], score: 0))
            try await noCapture(repo, "q1")
            let model = await QuestionModel(repo)
            try await model.bump("q1")
            #expect(try await repo.find(by: "q1")?.score == 11)
            #expect(await model.bumps == 1)
        }
    }

    @Test("a custom id type conforms to RepositoryKey with import ActorKVClient alone")
    func customIDs() async throws {
        try await withServer { _, kv in
            let tickets = RemoteRepository<Ticket>(client: kv, namespace: "tickets")
            try await tickets.save(Ticket(id: TicketID(number: 7), title: "printer"))
            #expect(try await kv.getString("tickets", "T-7") == "{\"id\":{\"number\":7},\"title\":\"printer\"}")
            #expect(try await tickets.find(by: TicketID(number: 7))?.title == "printer")
            #expect(try await tickets.update(TicketID(number: 7)) { $0.title = "fixed" }?.title == "fixed")
        }
    }

    @Test("a UUID stored under its lower-case text (Python's str(uuid)) is an error in every read, never a duplicate")
    func lowerCaseUUIDKey() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Event>(client: kv, namespace: "events")
            let event = Event(id: UUID(), name: "written by Python", payload: [:])
            let lower = Array(event.id.uuidString.lowercased().utf8)
            try await kv.put("events", lower, try embeddedFormat(event))
            #expect(try await repo.find(by: event.id) == nil, "the upper-case key holds nothing")
            #expect(try await repo.update(event.id) { $0.name = "x" } == nil)
            try await repo.save(event)   // a second key for the same id
            let reads: [@Sendable () async throws -> Void] = [
                { _ = try await repo.loadAll() },
                { _ = try await repo.scanPage() },
                { for try await _ in repo.changes(from: .snapshot) { return } },
            ]
            for read in reads {
                let error = await expectActorKVError { try await read() }
                guard case .decodingFailed(let namespace, let key, let reason)? = error else {
                    Issue.record("expected decodingFailed, got \(String(describing: error))"); continue
                }
                #expect(namespace == "events")
                #expect(key == lower)
                #expect(reason.contains(event.id.uuidString), "names the id's own key")
                #expect(!reason.contains("(in the") || reason.contains("(in the snapshot at sequence "))
            }

            // A change to the lower-case key, a put and a delete, is refused too (and the
            // iterator goes on to the next change).
            let (_, since) = try #require(try await repo.findVersioned(by: event.id))
            try await kv.put("events", lower, try embeddedFormat(event))
            _ = try await kv.delete("events", [lower])
            let last = Event(id: UUID(), name: "the last change", payload: [:])
            try await repo.save(last)
            var changes = repo.changes(from: .after(since)).makeAsyncIterator()
            var errors: [ActorKVError] = []
            reading: for _ in 0..<10 {
                do throws(ActorKVError) {
                    if case .change(_, let items)? = try await changes.next(), items.contains(where: { $0.id == last.id }) {
                        break reading
                    }
                } catch {
                    errors.append(error)
                }
            }
            #expect(errors.count == 2)
            for error in errors {
                guard case .decodingFailed("events", lower, let reason) = error else { Issue.record("got \(error)"); continue }
                #expect(reason.contains("(in the change at sequence "), "says where to resume: \(reason)")
            }
            #expect(try await repo.loadAll().count == 2)
        }
    }

    @Test("a value under key A whose JSON id is B is refused by find, findVersioned, update and loadAll")
    func keyIDMismatch() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Question>(client: kv, namespace: "questions")
            try await kv.put("questions", "a", try embeddedFormat(Question(id: "b", text: "B", tags: [], score: 0)))
            let reads: [@Sendable () async throws -> Void] = [
                { _ = try await repo.find(by: "a") },
                { _ = try await repo.findVersioned(by: "a") },
                { _ = try await repo.update("a") { $0.score = 1 } },
                { _ = try await repo.loadAll() },
            ]
            for read in reads {
                let error = await expectActorKVError { try await read() }
                guard case .decodingFailed("questions", Array("a".utf8), let reason)? = error else {
                    Issue.record("expected decodingFailed of key a, got \(String(describing: error))"); continue
                }
                #expect(reason.hasPrefix("the item's id b has the key 'b', not this one"))
                #expect(error?.description.hasPrefix("cannot decode the item under key 'a' in namespace 'questions': ") == true)
            }
        }
    }
}
