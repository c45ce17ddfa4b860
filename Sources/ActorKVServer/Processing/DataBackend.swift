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
    /// ``execute(_:inNamespace:)`` done at once on the event loop's thread when the back end can
    /// (the local engine, its namespace open and running on the loop's executor); nil when it
    /// cannot, and then `execute` does it.
    func executeNow(_ operations: [Operation], inNamespace name: String) -> Execution?
    /// The namespaces, in name order.
    func listNamespaces() async throws(StoreError) -> [String]
    /// The namespaces that hold at least one key, in name order: Redis's keys (KEYS, SCAN of
    /// the keyspace, DBSIZE).
    func listNamespacesHoldingKeys() async throws(StoreError) -> [String]
    /// What WATCH remembers of namespace `name`: a point after which any write to it makes
    /// ``changed(_:since:)`` true, and fails the guard (``ActorKVStore/BatchStep/unchangedSince(_:)``)
    /// of a transaction on it.
    func watchPoint(of name: String) async throws(StoreError) -> UInt64
    /// Whether namespace `name` was written after `point` (a ``watchPoint(of:)``); true when
    /// that cannot be known (the namespace cannot be read).
    func changed(_ name: String, since point: UInt64) async -> Bool
    /// COMPACT: writes a snapshot of `name` and drops the log it covers.
    func compact(_ name: String) async throws(StoreError)
    /// UNLINK: removes namespace `name` (its keys; for the local engine its files and its place
    /// among the namespaces too); whether it existed.
    func removeNamespace(_ name: String) async throws(StoreError) -> Bool
    /// RENAME and RENAMENX (without `replacing`): namespace `source`'s keys become `target`'s.
    func renameNamespace(_ source: String, to target: String, replacing: Bool) async throws(StoreError) -> Store.RenameOutcome
    /// COPY (`replacing` with REPLACE): namespace `target` holds a copy of `source`'s keys.
    func copyNamespace(_ source: String, to target: String, replacing: Bool) async throws(StoreError) -> Store.CopyOutcome
    /// WAITAOF: whether every write acknowledged so far is on stable storage; with `waiting`,
    /// made so first (``ActorKVStore/Store/writtenIsDurable(waiting:)``).
    func writtenIsDurable(waiting: Bool) async throws(StoreError) -> Bool
    /// BACKUP: writes every namespace, as of one moment, to the new directory `path`.
    func backup(to path: String) async throws(StoreError) -> BackupSummary
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
    /// Told that the server's event loop runs as `reactor` from now on (cluster mode drives
    /// its connections to etcd there).
    func attach(to reactor: any Reactor)
    /// Told that the reactor stops (on its thread).
    func detachFromReactor()
}

extension DataBackend {
    /// Never at once.
    public func executeNow(_ operations: [Operation], inNamespace name: String) -> Execution? { nil }

    /// ``execute(_:inNamespace:)`` from a task: at once (``executeNow(_:inNamespace:)``, no actor
    /// hop) when the task runs on `loop`'s thread, where the namespaces run; otherwise, or when
    /// the back end cannot, through the actors.
    func execute(_ operations: [Operation], inNamespace name: String, on loop: LoopExecutor?) async -> Execution {
        if let loop, loop.isLoopThread, let execution = executeNow(operations, inNamespace: name) { return execution }
        return await execute(operations, inNamespace: name)
    }

    /// How many keys namespace `name` holds, when the back end can tell at once, on the event
    /// loop's thread (``executeNow(_:inNamespace:)``); nil when it cannot.
    func keyCountNow(inNamespace name: String) -> Int? {
        guard case .integer(let count)? = executeNow([.count], inNamespace: name)?.outcomes.first else { return nil }
        return count
    }

    /// Nothing to drive.
    public func attach(to reactor: any Reactor) {}
    /// Nothing to let go of.
    public func detachFromReactor() {}
}

extension Store: DataBackend {
    public func listNamespaces() async throws(StoreError) -> [String] { namespaceNames() }

    /// Those of ``listNamespaces()`` that hold a key now; a namespace that is unavailable (its
    /// files unreadable) is among them, its keys being in its files.
    public func listNamespacesHoldingKeys() async throws(StoreError) -> [String] {
        var names: [String] = []
        for name in namespaceNames() {
            let namespace: Namespace?
            do { namespace = try await existingNamespace(name) } catch {
                names.append(name)
                continue
            }
            if let namespace, await namespace.count() > 0 { names.append(name) }
        }
        return names
    }

    /// The sequence of the namespace's last write (its sequence floor if it does not exist).
    public func watchPoint(of name: String) async throws(StoreError) -> UInt64 {
        try await lastSequence(ofNamespace: name)
    }

    /// Whether the namespace's last sequence is another.
    public func changed(_ name: String, since point: UInt64) async -> Bool {
        guard let last = try? await lastSequence(ofNamespace: name) else { return true }
        return last != point
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
    /// Told when a follower's etcd watch has brought changes.
    public let changeListener = ChangeListener()
    /// Bytes of changes one follower's watch buffers before it stops reading (etcd then holds
    /// the rest: a slow follower is delayed, not dropped).
    public let followerBufferBytes: Int

    /// The back end of `store`, each follower buffering at most `followerBufferBytes`.
    public init(store: EtcdStore, followerBufferBytes: Int = 1 << 20) {
        self.store = store
        self.followerBufferBytes = followerBufferBytes
    }

    public func execute(_ operations: [Operation], inNamespace name: String) async -> Execution {
        Execution(outcomes: await store.execute(operations, inNamespace: name), durability: .immediate)
    }

    public func listNamespaces() async throws(StoreError) -> [String] {
        do { return try await store.namespaceNames() } catch { throw error.storeError }
    }

    /// ``listNamespaces()``: in etcd, a namespace is there only while it holds a key.
    public func listNamespacesHoldingKeys() async throws(StoreError) -> [String] {
        try await listNamespaces()
    }

    /// The cluster's revision now: every later write, to any key, has a higher one. (One small
    /// request: the revision of the namespace's last change would be a read of all its keys,
    /// sorted.)
    public func watchPoint(of name: String) async throws(StoreError) -> UInt64 {
        do { return UInt64(try await store.revision()) } catch { throw error.storeError }
    }

    /// Whether the revision of the namespace's last change (``ActorKVEtcd/EtcdStore/lastChange(of:)``)
    /// is after `point`.
    public func changed(_ name: String, since point: UInt64) async -> Bool {
        guard let last = try? await store.lastChange(of: name) else { return true }
        return last > point
    }

    /// Deletes the namespace's keys in one `txn` (``ActorKVEtcd/EtcdStore/removeNamespace(_:)``).
    public func removeNamespace(_ name: String) async throws(StoreError) -> Bool {
        do { return try await store.removeNamespace(name) } catch { throw error.storeError }
    }

    /// etcd compacts the whole cluster's history at once, keeping `--changes-history` revisions.
    public func compact(_ name: String) async throws(StoreError) {
        do { try await store.compact() } catch { throw error.storeError }
    }

    /// Not mapped: a namespace's keys would move in one `txn`, which etcd bounds (`--max-txn-ops`).
    public func renameNamespace(_ source: String, to target: String, replacing: Bool) async throws(StoreError) -> Store.RenameOutcome {
        throw StoreError(.invalidArgument, "RENAME and RENAMENX are not available in cluster mode: an etcd transaction holds a bounded number of operations (--max-txn-ops), and a namespace's keys would all move in one; nothing was renamed")
    }

    /// Not mapped: a namespace's keys would be written in one `txn`, which etcd bounds (`--max-txn-ops`).
    public func copyNamespace(_ source: String, to target: String, replacing: Bool) async throws(StoreError) -> Store.CopyOutcome {
        throw StoreError(.invalidArgument, "COPY is not available in cluster mode: an etcd transaction holds a bounded number of operations (--max-txn-ops), and a namespace's keys would all be written in one; nothing was copied")
    }

    /// etcd acknowledges a write once a majority of its members have it in their fsync'd logs.
    public func writtenIsDurable(waiting: Bool) async throws(StoreError) -> Bool { true }

    /// An agent keeps no data of its own: etcd's `etcdctl snapshot save` backs the cluster up.
    public func backup(to path: String) async throws(StoreError) -> BackupSummary {
        throw StoreError(.invalidArgument, "BACKUP writes a server's own data directory, and an agent of an etcd cluster (--etcd) keeps none: back the cluster up with etcdctl snapshot save")
    }

    public func releaseOwner(_ owner: UInt64, in namespaces: [String]) async {
        await store.leases.release(owner)
    }

    /// An etcd watch of the namespace, one per follower (``ActorKVEtcd/EtcdChangeStream``).
    public func follow(_ name: String, from start: FollowFrom) async throws(StoreError) -> FollowStart {
        do { return try await store.follow(name, from: start, limitBytes: followerBufferBytes, listener: changeListener) } catch {
            throw error.storeError
        }
    }

    public var backgroundExecutor: (any TaskExecutor)? { nil }
    public var mergesConnections: Bool { false }

    /// etcd's answers are read on the server's event loop (``ActorKVEtcd/EtcdClient/attach(to:)``).
    public func attach(to reactor: any Reactor) { store.client.attach(to: reactor) }

    public func detachFromReactor() { store.client.detachFromReactor() }
}
