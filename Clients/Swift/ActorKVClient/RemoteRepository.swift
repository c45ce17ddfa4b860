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
/// Every item read must be stored under its own id's key, byte for byte: an item whose key is
/// not `item.id.repositoryKey` (a UUID under its lower-case text, as Python's `str(uuid)` writes
/// it; JSON whose `id` names another item) is refused with
/// ``ActorKVError/decodingFailed(namespace:key:reason:)`` rather than returned, since `find(by:)`
/// could never reach it and a `save` of it would make a second copy.
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
    /// the stored bytes do not decode as `T`, or decode as an item with another id.
    public func find(by id: T.ID) async throws(ActorKVError) -> T? {
        let key = id.repositoryKey
        guard let bytes = try await client.get(namespace, key) else { return nil }
        return try decode(bytes, key: key)
    }

    /// Every item, in key order, fetched with `SCAN` pages of 1000. Throws
    /// ``ActorKVError/decodingFailed(namespace:key:reason:)`` for a value that is not an item, or
    /// an item stored under a key that is not its id's (so no two items have the same id).
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

    // MARK: Versions

    /// The item with `id` and its version, or nil. Pass the version to
    /// ``save(_:ifVersion:)`` or ``delete(_:ifVersion:)`` to write only if nobody else has since.
    public func findVersioned(by id: T.ID) async throws(ActorKVError) -> (item: T, version: UInt64)? {
        let key = id.repositoryKey
        guard let found = try await client.getVersioned(namespace, key) else { return nil }
        return (try decode(found.value, key: key), found.version)
    }

    /// Stores `item` only if the stored item's version is `ifVersion` (0: only if there is
    /// none). Returns the new version, or nil when the condition did not hold (nothing written).
    public func save(_ item: T, ifVersion: UInt64) async throws(ActorKVError) -> UInt64? {
        try await client.put(namespace, item.id.repositoryKey, try Self.encode(item), ifVersion: ifVersion)
    }

    /// Removes the item with `id` only if its version is `ifVersion`; returns whether the
    /// condition held.
    public func delete(_ id: T.ID, ifVersion: UInt64) async throws(ActorKVError) -> Bool {
        try await client.delete(namespace, id.repositoryKey, ifVersion: ifVersion)
    }

    /// Reads the item with `id`, lets `body` change it, and writes it back only if nobody wrote
    /// it in between; if someone did, reads again and retries, up to `maxAttempts` times in all
    /// (then throws ``ActorKVError/conflict(_:)``, having written nothing). Returns the item as
    /// written, or nil if there is no item with `id` (nothing is written). `body` may run more
    /// than once, so it must only change the item it is given, and not its id (a changed id throws
    /// ``ActorKVError/encodingFailed(_:)``, nothing written). After each lost race it waits a
    /// random moment (up to 0.5 ms, doubling to 50 ms), so that contending clients take turns.
    ///
    /// It runs on the caller's actor (`nonisolated(nonsending)`), and so does `body`: a
    /// `@MainActor` view model can pass a closure that is not `Sendable`.
    ///
    ///     try await counters.update("visits") { $0.count += 1 }
    ///
    /// Throws an ``ActorKVError`` (those of ``findVersioned(by:)`` and ``save(_:ifVersion:)``,
    /// ``ActorKVError/conflict(_:)``), whatever `body` throws (nothing written), and
    /// `CancellationError` when the task is cancelled while it waits after a lost race (nothing
    /// written by this call).
    @discardableResult
    public nonisolated(nonsending) func update(_ id: T.ID, maxAttempts: Int = 100, _ body: (inout T) throws -> Void) async throws -> T? {
        var pause = 0.5  // ms: a random wait up to this after each lost race, doubled up to 50 ms
        for attempt in 0..<max(1, maxAttempts) {
            if attempt > 0 {
                // Without it, under heavy contention one client can lose every race in a row.
                try await Task.sleep(for: .microseconds(Int.random(in: 0...Int(pause * 1000))))
                pause = min(pause * 2, 50)
            }
            guard let found = try await findVersioned(by: id) else { return nil }
            var item = found.item
            try body(&item)
            guard item.id == id else {
                // Written under the new id with the old one's version, it could replace another item.
                throw ActorKVError.encodingFailed(Self.changedIDReason(from: id, to: item.id))
            }
            if try await save(item, ifVersion: found.version) != nil { return item }
        }
        throw ActorKVError.conflict("the item '\(String(decoding: id.repositoryKey, as: UTF8.self))' in namespace '\(namespace)' was written by others on each of \(max(1, maxAttempts)) attempts")
    }

    // MARK: Changes

    /// The items' changes as they are written (the namespace's changes, `CHANGES`, with keys
    /// decoded as ids and values as items): a saved item comes with its new value, a deleted one
    /// as its id with a nil item. Only ids whose key text starts with `prefix`. See
    /// ``ActorKVClient/changes(_:prefix:from:reconnect:)`` for where it starts, how it resumes
    /// after a broken connection, and what it throws; it also throws
    /// ``ActorKVError/decodingFailed(namespace:key:reason:)`` for bytes that are not an item.
    ///
    ///     for try await change in questions.changes(from: .snapshot) {
    ///         if case .change(_, let items) = change { for c in items { cache[c.id] = c.item } }
    ///     }
    public func changes(prefix: String = "", from start: ChangeStart = .now,
                        reconnect: ReconnectPolicy = .default) -> RepositoryChangeSequence<T> {
        RepositoryChangeSequence(repository: self,
                                 changes: client.changes(namespace, prefix: Array(prefix.utf8), from: start, reconnect: reconnect))
    }

    /// Why an update whose body changed the item's id from `old` to `new` writes nothing.
    static func changedIDReason(from old: T.ID, to new: T.ID) -> String {
        "update's body changed the item's id from '\(String(decoding: old.repositoryKey, as: UTF8.self))' to "
            + "'\(String(decoding: new.repositoryKey, as: UTF8.self))': an update writes the item back under the id it "
            + "read (to move an item, save it under the new id and delete the old one); nothing was written"
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

    /// The item stored under `key`: its JSON decoded, and its id's key checked to be `key`.
    func decode(_ bytes: [UInt8], key: [UInt8]) throws(ActorKVError) -> T {
        let item: T
        do {
            item = try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw .decodingFailed(namespace: namespace, key: key, reason: "\(error)")
        }
        if let mismatch = RepositoryKeyCheck.mismatch(of: item.id, storedUnder: key) {
            throw .decodingFailed(namespace: namespace, key: key, reason: mismatch)
        }
        return item
    }

    /// The id that `key` is the key of (a deleted item's, in a change).
    func id(ofKey key: [UInt8]) throws(ActorKVError) -> T.ID {
        guard let id = T.ID(repositoryKey: key) else {
            throw .decodingFailed(namespace: namespace, key: key, reason: "the key is not a \(T.ID.self) id")
        }
        if let mismatch = RepositoryKeyCheck.mismatch(of: id, storedUnder: key) {
            throw .decodingFailed(namespace: namespace, key: key, reason: mismatch)
        }
        return id
    }
}
