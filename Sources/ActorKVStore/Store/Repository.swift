import ActorKVProtocol
import Foundation

/// A typed repository over one namespace: the in-process actor-repository API, with O(1)
/// durable writes instead of a whole-file rewrite per save.
///
/// Items are stored as JSON (sorted keys) under the key their `id` gives (see `RepositoryKey`).
/// Moving from a `LocalRepository<Question>(filename:)` is one line:
///
///     let repo = try await Repository<Question>(store: store, namespace: "questions")
///
/// and to shared state across processes, `RemoteRepository<Question>` in ActorKVClient.
public struct Repository<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// The namespace the items live in.
    public let namespace: Namespace

    /// A repository over `namespace` of `store`, created on first use.
    public init(store: Store, namespace name: String) async throws {
        namespace = try await store.namespace(name)
    }

    /// A repository over an open namespace.
    public init(namespace: Namespace) {
        self.namespace = namespace
    }

    /// Stores `item`, replacing any item with the same id; durable per the store's policy.
    public func save(_ item: T) async throws {
        try await namespace.put(item.id.repositoryKey, try Self.encode(item))
    }

    /// Stores all `items` as one all-or-nothing batch.
    public func save(contentsOf items: [T]) async throws {
        guard !items.isEmpty else { return }
        try await namespace.apply(try items.map { .put(key: $0.id.repositoryKey, value: try Self.encode($0)) })
    }

    /// Removes the item with `id` (nothing happens if there is none).
    public func delete(_ id: T.ID) async throws {
        try await namespace.delete([id.repositoryKey])
    }

    /// The item with `id`, or nil. Throws if the stored bytes do not decode as `T`.
    public func find(by id: T.ID) async throws -> T? {
        guard let bytes = await namespace.get(id.repositoryKey) else { return nil }
        return try Self.decode(bytes)
    }

    /// Every item, in key order.
    public func loadAll() async throws -> [T] {
        var items: [T] = []
        var cursor = ScanCursor.start
        repeat {
            let page = try await scanPage(after: cursor, limit: 1000)
            items += page.items
            cursor = page.next
        } while cursor != .start
        return items
    }

    /// One page of items in key order: at most `limit` items whose keys come after `cursor` and
    /// start with `prefix` (the text of the ids, see `RepositoryKey`), and the cursor for the next
    /// page (``ScanCursor/start`` after the last). Every item present for the whole scan is
    /// returned exactly once across the pages, even while others write.
    public func scanPage(after cursor: ScanCursor = .start, prefix: String = "", limit: Int = 100) async throws -> (items: [T], next: ScanCursor) {
        let page = await namespace.scan(from: cursor, prefix: Array(prefix.utf8), limit: limit)
        return (try page.entries.map { try Self.decode($0.value) }, page.next)
    }

    /// The number of items.
    public func count() async -> Int { await namespace.count() }

    static func encode(_ item: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(item))
    }

    static func decode(_ bytes: [UInt8]) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(bytes))
    }
}
