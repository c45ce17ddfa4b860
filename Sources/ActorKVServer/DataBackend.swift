import ActorKVEtcd
import ActorKVStore

/// Where the server keeps its data: the local store (``ActorKVStore/Store``, files in the data
/// directory) or, in cluster mode (`--etcd`), an etcd cluster (``ActorKVEtcd/EtcdStore``).
/// Commands reach data only through this: the protocol, the command table, the sessions and the
/// namespace permissions are the same over both.
public protocol DataBackend: Sendable {
    /// Runs `operations` in order on namespace `name`: their outcomes, and what to wait for
    /// before acknowledging their writes.
    func execute(_ operations: [Operation], inNamespace name: String) async -> Execution
    /// The namespaces, in name order.
    func listNamespaces() async throws(StoreError) -> [String]
    /// The sequence of the last write to namespace `name` (0: none), which WATCH remembers.
    func lastSequence(of name: String) async throws(StoreError) -> UInt64
    /// COMPACT: writes a snapshot of `name` and drops the log it covers.
    func compact(_ name: String) async throws(StoreError)
    /// Deletes the ephemeral keys of connection `owner` in `namespaces` (its connection ended).
    func releaseOwner(_ owner: UInt64, in namespaces: [String]) async
    /// Starts following namespace `name`'s changes (CHANGES).
    func follow(_ name: String, from start: FollowFrom) async throws(StoreError) -> FollowStart
    /// Told when a namespace has new changes for its followers.
    var changeListener: ChangeListener { get }
    /// Where background work (the release of ephemeral keys) runs; nil: Swift's global executor.
    var backgroundExecutor: (any TaskExecutor)? { get }
    /// Whether the data commands of different connections on one namespace run as one run
    /// (the local engine: one actor hop, one log write for all), rather than each connection's
    /// on its own, concurrently (cluster mode: each is a round trip to etcd).
    var mergesConnections: Bool { get }
}

extension Store: DataBackend {
    public func listNamespaces() async throws(StoreError) -> [String] { namespaceNames() }

    public func lastSequence(of name: String) async throws(StoreError) -> UInt64 {
        try await existingNamespace(name)?.sequence ?? 0
    }

    public func compact(_ name: String) async throws(StoreError) {
        do { try await existingNamespace(name)?.compact() } catch let error as StoreError { throw error } catch {
            throw StoreError(.io, "\(error)")
        }
    }

    public func releaseOwner(_ owner: UInt64, in namespaces: [String]) async {
        for name in namespaces {
            _ = await (try? existingNamespace(name))?.releaseOwner(owner)
        }
    }

    public nonisolated var backgroundExecutor: (any TaskExecutor)? { options.backgroundExecutor }
    public nonisolated var mergesConnections: Bool { true }
}

/// Cluster mode's back end: what the local engine does through a log, done through etcd (the
/// mapping is in protocol.md, "Cluster mode"). A write is acknowledged once etcd has committed
/// it, so there is nothing more to wait for.
public final class ClusterBackend: DataBackend {
    /// The data in etcd.
    public let store: EtcdStore
    /// Never told: changes are not followed in cluster mode yet.
    public let changeListener = ChangeListener()

    /// The back end of `store`.
    public init(store: EtcdStore) { self.store = store }

    public func execute(_ operations: [Operation], inNamespace name: String) async -> Execution {
        Execution(outcomes: await store.execute(operations, inNamespace: name), durability: .immediate)
    }

    public func listNamespaces() async throws(StoreError) -> [String] {
        do { return try await store.namespaceNames() } catch { throw error.storeError }
    }

    public func lastSequence(of name: String) async throws(StoreError) -> UInt64 {
        throw Self.unsupported("WATCH")
    }

    /// etcd compacts the whole cluster's history at once, keeping `--changes-history` revisions.
    public func compact(_ name: String) async throws(StoreError) {
        do { try await store.compact() } catch { throw error.storeError }
    }

    public func releaseOwner(_ owner: UInt64, in namespaces: [String]) async {
        await store.leases.release(owner)
    }

    public func follow(_ name: String, from start: FollowFrom) async throws(StoreError) -> FollowStart {
        throw Self.unsupported("CHANGES")
    }

    public var backgroundExecutor: (any TaskExecutor)? { nil }
    public var mergesConnections: Bool { false }

    private static func unsupported(_ command: String) -> StoreError {
        StoreError(.invalidArgument, "\(command) is not supported in cluster mode yet (protocol.md, \"Cluster mode\")")
    }
}
