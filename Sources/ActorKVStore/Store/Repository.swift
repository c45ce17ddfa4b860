import ActorKVProtocol
import Foundation

/// A typed repository over one namespace: the in-process actor-repository API, with O(1)
/// durable writes instead of a whole-file rewrite per save.
///
/// Items are stored as JSON (sorted keys) under the key their `id` gives (see ``RepositoryKey``).
/// Every item read must be stored under its own id's key, byte for byte: one found under another
/// key (a UUID under its lower-case text, as Python's `str(uuid)` writes it; JSON whose `id` names
/// another item) is refused with ``RepositoryError/decodingFailed(namespace:key:reason:)``, so
/// `loadAll` never returns two items with the same id.
///
/// Moving from the seed's `LocalRepository<Question>(filename:)` changes how it is made and how
/// it is called:
///
///     let store = try Store(directory: "./data")
///     let repo = try await Repository<Question>(store: store, namespace: "questions")
///     let all = try await repo.loadAll()     // LocalRepository: await repo.loadAll()
///
/// `init`, `find(by:)` and `loadAll()` are `async throws` (a stored value may not decode),
/// `save` and `delete` are `async throws`, and the store is closed at the end
/// (`await store.close()`). For shared state across processes, `RemoteRepository<Question>` in
/// ActorKVClient has the same calls.
public struct Repository<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// The namespace the items live in: the one the repository was made with. Made from a store,
    /// the repository follows the namespace's name: once this one is removed, renamed away or
    /// replaced (``Namespace/isDetached``: `removeNamespace`, or a `renameNamespace` or
    /// `copyNamespace` onto its name), each call uses the namespace the name names then (a write
    /// creates it; a read of a name that names nothing finds nothing).
    public let namespace: Namespace
    /// The store it was made from; nil when made from a namespace, which it keeps.
    private let store: Store?

    /// A repository over `namespace` of `store`, created on first use.
    public init(store: Store, namespace name: String) async throws {
        namespace = try await store.namespace(name)
        self.store = store
    }

    /// A repository over an open namespace (kept whatever happens to it: see ``namespace``).
    public init(namespace: Namespace) {
        self.namespace = namespace
        store = nil
    }

    /// The namespace to write to now (see ``namespace``).
    private func writable() async throws(StoreError) -> Namespace {
        guard namespace.isDetached, let store else { return namespace }
        return try await store.namespace(namespace.name)
    }

    /// The namespace to read now (see ``namespace``); nil when its name names none any more.
    private func readable() async throws(RepositoryError) -> Namespace? {
        guard namespace.isDetached, let store else { return namespace }
        do { return try await store.existingNamespace(namespace.name) } catch {
            throw .unavailable(namespace: namespace.name, reason: error.message)
        }
    }

    /// Stores `item`, replacing any item with the same id; durable per the store's policy.
    public func save(_ item: T) async throws {
        try await writable().put(item.id.repositoryKey, try Self.encode(item))
    }

    /// Stores all `items` as one all-or-nothing batch.
    public func save(contentsOf items: [T]) async throws {
        guard !items.isEmpty else { return }
        try await writable().apply(try items.map { .put(key: $0.id.repositoryKey, value: try Self.encode($0)) })
    }

    /// Removes the item with `id` (nothing happens if there is none).
    public func delete(_ id: T.ID) async throws {
        try await writable().delete([id.repositoryKey])
    }

    /// The item with `id`, or nil. Throws ``RepositoryError/decodingFailed(namespace:key:reason:)``
    /// if the stored bytes do not decode as `T`, or decode as an item with another id. An id whose
    /// key no item can have (empty, or longer than a key may be) finds nothing here, where
    /// `RemoteRepository`'s server refuses it (`BADKEY`); saving under it throws in both.
    public func find(by id: T.ID) async throws(RepositoryError) -> T? {
        let key = id.repositoryKey
        guard let bytes = try await readable()?.get(key) else { return nil }
        return try decode(bytes, key: key)
    }

    /// Every item, in key order. Throws ``RepositoryError/decodingFailed(namespace:key:reason:)``
    /// for a value that is not an item, or an item stored under a key that is not its id's (so no
    /// two items have the same id).
    public func loadAll() async throws(RepositoryError) -> [T] {
        var items: [T] = []
        var cursor = ScanCursor.start
        repeat {
            let page = try await scanPage(after: cursor, limit: 1000)
            items += page.items
            cursor = page.next
        } while cursor != .start
        return items
    }

    /// One page of items in key order: at most `limit` items (a limit below 1 counts as 1) whose
    /// keys come after `cursor` and start with `prefix` (the text of the ids, see
    /// `RepositoryKey`), and the cursor for the next page (``ScanCursor/start`` after the last).
    /// Every item present for the whole scan is returned exactly once across the pages, even
    /// while others write. Throws what ``loadAll()`` throws.
    public func scanPage(after cursor: ScanCursor = .start, prefix: String = "", limit: Int = 100) async throws(RepositoryError) -> (items: [T], next: ScanCursor) {
        guard let namespace = try await readable() else { return ([], .start) }
        let page = await namespace.scan(from: cursor, prefix: Array(prefix.utf8), limit: limit)
        var items: [T] = []
        items.reserveCapacity(page.entries.count)
        for entry in page.entries { items.append(try decode(entry.value, key: entry.key)) }
        return (items, page.next)
    }

    /// The number of items (0 also when the name, followed as ``namespace`` says, names a
    /// namespace that cannot be opened).
    public func count() async -> Int { await (try? readable())??.count() ?? 0 }

    // MARK: Versions

    /// The item with `id` and its version, or nil. Pass the version to ``save(_:ifVersion:)``
    /// to write only if nobody else has since. Throws what ``find(by:)`` throws.
    public func findVersioned(by id: T.ID) async throws(RepositoryError) -> (item: T, version: UInt64)? {
        let key = id.repositoryKey
        guard let found = try await readable()?.versioned(key) else { return nil }
        return (try decode(found.value, key: key), found.version)
    }

    /// Stores `item` only if the stored item's version is `ifVersion` (0: only if there is
    /// none). Returns the new version, or nil when the condition did not hold (nothing written).
    @discardableResult
    public func save(_ item: T, ifVersion: UInt64) async throws -> UInt64? {
        try await writable().put(item.id.repositoryKey, try Self.encode(item), ifVersion: ifVersion)
    }

    /// Reads the item with `id`, lets `body` change it, and writes it back only if nobody wrote
    /// it in between; if someone did, reads again and retries, up to `maxAttempts` times in all
    /// (then throws ``RepositoryError/conflict(_:)``, having written nothing). Returns the item as
    /// written, or nil if there is no item with `id` (nothing is written). `body` may run more
    /// than once, so it must only change the item it is given, and not its id (a changed id throws
    /// an `EncodingError`, nothing written). The same call as
    /// `RemoteRepository.update`; between processes sharing a namespace through a server, and
    /// between tasks here, a write can come between the read and the write (an `await`).
    ///
    /// It runs on the caller's actor (`nonisolated(nonsending)`), and so does `body`: a
    /// `@MainActor` view model can pass a closure that is not `Sendable`, and `body` may decode,
    /// throw any error, and touch the caller's state.
    ///
    ///     try await counters.update("visits") { $0.count += 1 }
    ///
    /// Throws ``RepositoryError`` (the stored item does not decode, or the conflict), a
    /// ``StoreError`` from the write, or whatever `body` throws (nothing written).
    @discardableResult
    public nonisolated(nonsending) func update(_ id: T.ID, maxAttempts: Int = 100, _ body: (inout T) throws -> Void) async throws -> T? {
        for _ in 0..<max(1, maxAttempts) {
            guard let found = try await findVersioned(by: id) else { return nil }
            var item = found.item
            try body(&item)
            guard item.id == id else {
                // Written under the new id with the old one's version, it could replace another item.
                throw EncodingError.invalidValue(item, EncodingError.Context(
                    codingPath: [], debugDescription: "update's body changed the item's id from "
                        + "'\(String(decoding: id.repositoryKey, as: UTF8.self))' to '\(String(decoding: item.id.repositoryKey, as: UTF8.self))': "
                        + "an update writes the item back under the id it read (to move an item, save it under the new id "
                        + "and delete the old one); nothing was written"))
            }
            if try await save(item, ifVersion: found.version) != nil { return item }
            await Task.yield()  // let the writer that won run on before reading again
        }
        throw RepositoryError.conflict("the item '\(String(decoding: id.repositoryKey, as: UTF8.self))' in namespace '\(namespace.name)' was written by others on each of \(max(1, maxAttempts)) attempts")
    }

    static func encode(_ item: T) throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return Array(try encoder.encode(item))
    }

    /// The item stored under `key`: its JSON decoded, and its id's key checked to be `key`.
    func decode(_ bytes: [UInt8], key: [UInt8]) throws(RepositoryError) -> T {
        let item: T
        do {
            item = try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            throw .decodingFailed(namespace: namespace.name, key: key, reason: "\(error)")
        }
        if let mismatch = RepositoryKeyCheck.mismatch(of: item.id, storedUnder: key) {
            throw .decodingFailed(namespace: namespace.name, key: key, reason: mismatch)
        }
        return item
    }
}

/// A failure of a typed ``Repository`` about its items (the store's own failures, such as a
/// write that could not be made durable, are ``StoreError``).
public enum RepositoryError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The bytes under `key` in `namespace` are not an item: they do not decode as the item type
    /// (`reason` is the decoder's error), or they decode as an item whose id's key is not `key`
    /// (`reason` names the id and its key; see ``RepositoryKey``).
    case decodingFailed(namespace: String, key: [UInt8], reason: String)
    /// ``Repository/update(_:maxAttempts:_:)`` found the item written by someone else between
    /// its read and its conditional write on every one of its attempts; nothing was written by
    /// it. The text says which item and how many attempts.
    case conflict(String)
    /// The namespace the repository's name names now (after the one it was made with was
    /// renamed away or replaced) could not be opened: `reason` is the store's error.
    case unavailable(namespace: String, reason: String)

    /// A one-line explanation, e.g. `cannot decode the item under key 'q1' in namespace 'questions': …`.
    public var description: String {
        switch self {
        case .decodingFailed(let namespace, let key, let reason):
            return "cannot decode the item under key '\(String(decoding: key, as: UTF8.self))' in namespace "
                + "'\(namespace)': \(reason)"
        case .conflict(let reason):
            return "conflict: \(reason)"
        case .unavailable(let namespace, let reason):
            return "namespace '\(namespace)' cannot be read: \(reason)"
        }
    }
}
