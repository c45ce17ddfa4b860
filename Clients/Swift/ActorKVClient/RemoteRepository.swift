import ActorKVProtocol
import Foundation

/// A typed repository over one namespace of a server: the same surface as the embedded
/// `Repository` of ActorKVStore, across processes.
///
/// Items are stored exactly as `Repository` stores them: as JSON with sorted keys (Foundation's
/// `JSONEncoder` with `.sortedKeys`, default strategies), under the key their `id` gives through
/// ``RepositoryKey`` (String: UTF-8; UUID: upper-case text; Int: decimal text). So a namespace
/// written by either one reads back through the other, and other languages can read it too.
///
///     let questions = RemoteRepository<Question>(client: kv, namespace: "questions")
///     try await questions.save(question)
///     let all = try await questions.loadAll()
public struct RemoteRepository<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// The client the requests go through.
    public let client: ActorKVClient
    /// The namespace the items live in.
    public let namespace: String

    /// A repository over `namespace` on `client`'s server. Nothing is sent until the first call;
    /// the namespace is created by the first save.
    public init(client: ActorKVClient, namespace: String) {
        self.client = client
        self.namespace = namespace
    }

    /// Stores `item`, replacing any item with the same id.
    public func save(_ item: T) async throws(ActorKVError) {
        try await client.put(namespace, item.id.repositoryKey, try Self.encode(item))
    }

    /// Stores all `items` as one all-or-nothing batch (a single `BATCH` request).
    public func save(contentsOf items: [T]) async throws(ActorKVError) {
        guard !items.isEmpty else { return }
        var operations: [BatchOperation] = []
        operations.reserveCapacity(items.count)
        for item in items { operations.append(.put(key: item.id.repositoryKey, value: try Self.encode(item))) }
        _ = try await client.batch(namespace, operations)
    }

    /// Removes the item with `id` (nothing happens if there is none).
    public func delete(_ id: T.ID) async throws(ActorKVError) {
        _ = try await client.delete(namespace, [id.repositoryKey])
    }

    /// The item with `id`, or nil. Throws ``ActorKVError/decodingFailed(namespace:key:reason:)`` if
    /// the stored bytes do not decode as `T`.
    public func find(by id: T.ID) async throws(ActorKVError) -> T? {
        let key = id.repositoryKey
        guard let bytes = try await client.get(namespace, key) else { return nil }
        return try decode(bytes, key: key)
    }

    /// Every item, in key order, fetched with `SCAN` pages of 1000.
    public func loadAll() async throws(ActorKVError) -> [T] {
        var items: [T] = []
        var cursor = ScanPage.start
        repeat {
            let page = try await scanPage(cursor: cursor, count: 1000)
            items += page.items
            cursor = page.nextCursor
        } while cursor != ScanPage.start
        return items
    }

    /// One page of items in key order: at most `count` items whose keys come after `cursor` and
    /// start with `prefix` (the text of the ids), and the cursor for the next page
    /// (``ScanPage/start`` after the last), as `SCAN` pages them.
    public func scanPage(cursor: [UInt8] = ScanPage.start, prefix: String = "", count: Int = 100) async throws(ActorKVError) -> (items: [T], nextCursor: [UInt8]) {
        let page = try await client.scanPage(namespace, cursor: cursor, prefix: Array(prefix.utf8), count: count)
        var items: [T] = []
        for entry in page.entries { items.append(try decode(entry.value, key: entry.key)) }
        return (items, page.nextCursor)
    }

    /// The number of items (keys in the namespace).
    public func count() async throws(ActorKVError) -> Int {
        try await client.count(namespace)
    }

    static func encode(_ item: T) throws(ActorKVError) -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return Array(try encoder.encode(item))
        } catch {
            throw .encodingFailed("\(error)")
        }
    }

    private func decode(_ bytes: [UInt8], key: [UInt8]) throws(ActorKVError) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw .decodingFailed(namespace: namespace, key: key, reason: "\(error)")
        }
    }
}
