import Foundation

// The "swift-actor-persistence" LocalRepository (see /work/shared/seed-pattern.md), re-implemented
// faithfully as the baseline ActorKV is measured against: an actor with a [ID: T] cache that
// JSON-encodes the whole array and rewrites the file with `.atomic` on every save. Kept in the
// bench folder only; its known faults (O(n) save, `try?` on load, no fsync, blocking I/O on the
// cooperative pool, trap on duplicate ids) are deliberately left as they are.
//
// Differences from the skill's text, none of which changes the cost of a save:
// - not `public`, and `directory` has no `.documentsDirectory` default (the bench always passes one);
// - `T: Sendable`, which Swift 6 strict concurrency needs to pass items into the actor.

actor SeedLocalRepository<T: Codable & Identifiable & Sendable> where T.ID: Hashable & Codable {
    private var cache: [T.ID: T] = [:]
    private let fileURL: URL

    init(directory: URL, filename: String = "data.json") {
        self.fileURL = directory.appendingPathComponent(filename)
        self.cache = Self.loadSynchronously(from: fileURL)
    }

    // MARK: - Public API

    func save(_ item: T) throws {
        cache[item.id] = item
        try persistToFile()
    }

    func delete(_ id: T.ID) throws {
        cache[id] = nil
        try persistToFile()
    }

    func find(by id: T.ID) -> T? {
        cache[id]
    }

    func loadAll() -> [T] {
        Array(cache.values)
    }

    // MARK: - Private

    private func persistToFile() throws {
        let data = try JSONEncoder().encode(Array(cache.values))
        try data.write(to: fileURL, options: .atomic)
    }

    private static func loadSynchronously(from url: URL) -> [T.ID: T] {
        guard let data = try? Data(contentsOf: url),
              let items = try? JSONDecoder().decode([T].self, from: data) else {
            return [:]
        }
        return Dictionary(uniqueKeysWithValues: items.map { ($0.id, $0) })
    }
}
