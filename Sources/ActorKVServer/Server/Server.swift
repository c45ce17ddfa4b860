#if canImport(Glibc)
import Glibc
#endif
import ActorKVEtcd
import ActorKVProtocol
import ActorKVStore
import Foundation
import Synchronization

/// The `actorkvd` process: opens the store, binds the socket, serves until SIGTERM/SIGINT, and
/// shuts down cleanly (finish requests in flight, fsync every namespace, remove the socket).
public final class Server: Sendable {
    /// The configuration served.
    public let configuration: ServerConfiguration
    private let statistics = ServerStatistics()
    private let log: @Sendable (String) -> Void
    private let startedAt = time(nil)
    /// The store, kept until the server object goes: see ``run()``.
    private let openStore = Mutex<Store?>(nil)
    /// The client limit in force: `--max-clients`, or fewer under a low open files limit
    /// (``DescriptorBudget``), set when the server starts.
    private let clientLimit: Atomic<Int>

    /// Creates a server; nothing happens until ``run()``.
    public init(configuration: ServerConfiguration, log: @escaping @Sendable (String) -> Void = ServerLog.line) {
        var configuration = configuration
        configuration.ownUID = getuid()
        self.configuration = configuration
        self.log = log
        clientLimit = Atomic(configuration.maxClients)
    }

    /// A startup failure, printed and turned into exit status 1.
    public struct StartupError: Error, CustomStringConvertible {
        /// What went wrong.
        public let description: String
    }

    /// Serves until a shutdown signal; returns after a clean shutdown. Throws ``StartupError`` if
    /// the server cannot start (socket in use, data directory locked, unsafe or unreadable, …).
    ///
    /// When it returns, everything is durable and closed, but the in-memory data is still held by
    /// this object: a process that exits right away (as `actorkvd` does) skips freeing it, which
    /// with millions of keys takes longer than the rest of the shutdown.
    public func run() async throws {
        let config = configuration
        // Clients, sockets closing in the background (at most 1024), a log per namespace, and
        // 256 for the other files (epoll, snapshots being written, history being read).
        let wanted = DescriptorBudget.wanted(maxClients: config.maxClients, maxNamespaces: config.maxNamespaces)
        let limit = SocketCalls.raiseOpenFileLimit(to: wanted)
        let budget = DescriptorBudget(openFiles: limit, maxClients: config.maxClients, maxNamespaces: config.maxNamespaces)
        clientLimit.store(budget.clients, ordering: .relaxed)
        let namespaceLimit = budget.namespaces
        try checkSocketDirectory()
        let staleSocket = try checkSocketPath()
        let wake: WakeSignal
        do { wake = try WakeSignal() } catch { throw StartupError(description: "\(error)") }
        SignalHandling.install(wake: wake)
        let access = try openAccessControl(wake: wake)
        // The loop's executor exists before the store, whose background work runs on it too
        // (its jobs wait until the loop runs).
        let executor = config.execution == .loop ? LoopExecutor { wake.signal() } : nil
        if !config.etcdEndpoints.isEmpty {
            try await runAgent(wake: wake, access: access, executor: executor, staleSocket: staleSocket, budget: budget)
            return
        }
        let store = try makeStore(executor: executor, namespaceLimit: namespaceLimit, openFiles: limit)
        log("actorkvd starting: socket \(config.socketPath), data \(config.dataDirectory), fsync \(config.durability.rawValue), max clients \(budget.clients), open files limit \(limit)")
        if limit > 0 && limit < wanted {
            log("warning: the open files limit (\(limit), hard limit reached) is below the \(wanted) that --max-clients \(config.maxClients) and --max-namespaces \(config.maxNamespaces) need: namespaces are limited to \(namespaceLimit), and clients to \(budget.clients) (more get -MAXCLIENTS), so that \(budget.spare) descriptors are always left")
        }
        // Descriptors kept for the loop (epoll, the listener) while the namespaces open, however
        // many namespaces there are: a data directory with more than fit still starts, those
        // that do not fit reported unavailable.
        let reserve = SocketCalls.reserveDescriptors(16)
        let unavailable = await store.openAll()
        SocketCalls.release(reserve)
        if SignalHandling.received.load(ordering: .relaxed) != 0 {
            return try await close(store, duringStartup: true)
        }
        let (listener, socketFile) = try bindSocket(replacingStale: staleSocket)
        let processor = CommandProcessor(store: store, settings: settings(clients: budget.clients), access: access) { [self] shows in
            await self.infoText(store, access: access, shows: shows)
        }
        try await serve(listener: listener, socketFile: socketFile, wake: wake, executor: executor, processor: processor, budget: budget) {
            self.log("ready: \(await store.namespaceNames().count) namespaces (\(unavailable.count) unavailable), accepting connections")
        }
        do {
            try await close(store, duringStartup: false, asked: processor.shutdown)
        } catch {
            processor.shutdown.finish(failure: "IOERR \(error)")
            throw error
        }
        processor.shutdown.finish()
    }

    /// The store of `--data-dir`, its namespaces not opened yet; a directory that cannot be used
    /// is a ``StartupError`` (with the flag that allows a shared one, when that is why).
    private func makeStore(executor: LoopExecutor?, namespaceLimit: Int, openFiles: Int) throws -> Store {
        var options = configuration.storeOptions(log: log, executor: executor)
        options.maxNamespaces = namespaceLimit
        if namespaceLimit < configuration.maxNamespaces {
            options.maxNamespacesSource = Self.descriptorBound(namespaceLimit, openFiles: openFiles, configured: configuration.maxNamespaces)
        }
        let store: Store
        do { store = try Store(directory: configuration.dataDirectory, options: options) } catch {
            let hint = error.code == .unsafeDirectory ? " (--allow-shared-data-dir)" : ""
            throw StartupError(description: error.message + hint)
        }
        openStore.withLock { $0 = store }
        return store
    }

    /// Closes `store` after a shutdown signal (`duringStartup`: one that came while the
    /// namespaces opened); a namespace whose log may not be on disk is a ``ShutdownError``.
    private func close(_ store: Store, duringStartup: Bool, asked request: ShutdownRequest? = nil) async throws {
        let notDurable = await store.close()
        guard notDurable.isEmpty else {
            throw ShutdownError(description: duringStartup
                ? "shut down during startup, but the logs of \(notDurable.joined(separator: ", ")) may not be on disk"
                : "shut down, but the logs of \(notDurable.count) namespace(s) may not be on disk (their fsync failed; see above): \(notDurable.joined(separator: ", "))")
        }
        log(duringStartup ? "shut down cleanly during startup (\(Self.cause(request))); every namespace fsync'd"
                          : "shut down cleanly (\(Self.cause(request))); every namespace fsync'd")
    }

    /// What stopped the server, for the log: the signal, or the client that sent SHUTDOWN.
    private static func cause(_ request: ShutdownRequest?) -> String {
        let signal = SignalHandling.received.load(ordering: .relaxed)
        if signal == 0, let asker = request?.asker { return "SHUTDOWN from \(asker)" }
        return "signal \(signal)"
    }

    /// What CONFIG GET answers: the configuration's, with the client limit in force.
    private func settings(clients: Int) -> [(name: String, value: String)] {
        var inForce = configuration
        inForce.maxClients = clients
        return inForce.redisSettings
    }

    /// What bounds the namespaces when the open files limit, not `--max-namespaces`, does: named
    /// in the refusal of one more namespace and in the startup warning.
    static func descriptorBound(_ namespaceLimit: Int, openFiles: Int, configured: Int) -> String {
        "the open files limit, ulimit -n \(openFiles), leaves descriptors for \(namespaceLimit) namespaces, fewer than --max-namespaces \(configured)"
    }

    /// Runs the event loop on a thread of its own until a shutdown signal, then removes the
    /// socket; `ready` is called once the loop exists.
    private func serve(listener: Int32, socketFile: (device: UInt64, inode: UInt64)?, wake: WakeSignal, executor: LoopExecutor?,
                       processor: CommandProcessor, budget: DescriptorBudget, ready: () async -> Void) async throws {
        var config = configuration
        config.maxClients = budget.clients
        let loop: EventLoop
        do {
            loop = try EventLoop(listener: listener, wakeSignal: wake, executor: executor, configuration: config, processor: processor,
                                 statistics: statistics, log: log, lingeringLimit: budget.lingering)
        } catch {
            throw StartupError(description: "\(error)")
        }
        await ready()
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                loop.run()
                done.resume()
            }
            thread.name = "actorkvd-event-loop"
            thread.start()
        }
        // Only our own socket file: another server may have bound a new one at the path since.
        if let bound = socketFile, let now = SocketCalls.identity(config.socketPath), bound == now {
            unlink(config.socketPath)
        }
        SocketCalls.close(listener)
    }

    /// Cluster mode (`--etcd`): serves the socket as an agent of the etcd cluster, with no data
    /// directory. It starts whether or not etcd answers (commands get `-UNAVAILABLE` until it
    /// does); at shutdown it revokes its connections' leases (their ephemeral keys go).
    private func runAgent(wake: WakeSignal, access: AccessControl?, executor: LoopExecutor?, staleSocket: Bool,
                          budget: DescriptorBudget) async throws {
        let config = configuration
        let endpoints: [EtcdEndpoint]
        do { endpoints = try config.etcdEndpoints.map { (url) throws(EtcdError) in try EtcdEndpoint(url: url) } } catch {
            throw StartupError(description: "--etcd: \(error.message)")
        }
        let store = EtcdStore(client: EtcdClient(endpoints: endpoints), prefix: config.etcdPrefix,
                              limits: StoreLimits(maxValueBytes: config.maxValueBytes), ephemeralTTL: config.ephemeralTTL,
                              changesHistory: config.changesHistory, log: log)
        log("actorkvd starting as an etcd agent: socket \(config.socketPath), etcd \(config.etcdEndpoints.joined(separator: ",")), prefix \(config.etcdPrefix), ephemeral TTL \(config.ephemeralTTL) s, max clients \(budget.clients)")
        if !config.ignoredLocalFlags.isEmpty {
            log("warning: \(config.ignoredLocalFlags.joined(separator: ", ")) given, but the data is in etcd: no effect in cluster mode")
        }
        do { log("etcd revision \(try await store.revision()) at \(store.client.currentEndpoint)") } catch {
            log("warning: etcd does not answer yet (\(error.message)); commands get -UNAVAILABLE until it does")
        }
        let (listener, socketFile) = try bindSocket(replacingStale: staleSocket)
        let backend = ClusterBackend(store: store, followerBufferBytes: min(config.changesLagBytes, 1 << 20))
        let processor = CommandProcessor(backend: backend, settings: settings(clients: budget.clients), access: access) { [self] shows in
            await self.agentInfoText(store, access: access)
        }
        try await serve(listener: listener, socketFile: socketFile, wake: wake, executor: executor, processor: processor, budget: budget) {
            self.log("ready: serving the etcd cluster's data, accepting connections")
        }
        await store.close()
        log("shut down cleanly (\(Self.cause(processor.shutdown))); connection leases revoked")
        processor.shutdown.finish()
    }

    /// A shutdown that could not make every namespace's log durable: exit status 1.
    public struct ShutdownError: Error, CustomStringConvertible {
        /// What was not made durable.
        public let description: String
    }

    /// Refuses a socket directory whose entries another user could replace (``PrivateDirectory``).
    private func checkSocketDirectory() throws {
        let directory = PrivateDirectory.containing(configuration.socketPath)
        if let problem = PrivateDirectory.problem(directory, role: "socket directory", holding: "the socket") {
            throw StartupError(description: problem)
        }
    }

    /// Checks the socket path before anything else is touched; returns whether a stale socket
    /// (left by a crash, nobody answering) is there to be replaced.
    private func checkSocketPath() throws -> Bool {
        let path = configuration.socketPath
        guard SocketCalls.address(path) != nil else {
            throw StartupError(description: "socket path \(path) is longer than the 107 bytes a Unix socket path may have")
        }
        var st = stat()
        guard fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return false }
        guard st.st_mode & S_IFMT == S_IFSOCK else {
            throw StartupError(description: "\(path) exists and is not a socket; refusing to replace it")
        }
        return try Self.staleness(of: path)
    }

    /// Whether the socket file at `path` is stale (true), gone (false), or must be left alone (throws).
    /// Only a refused connection proves that nobody listens: a socket the server may not connect to
    /// (EACCES), say, can belong to a live server.
    private static func staleness(of path: String) throws -> Bool {
        switch SocketCalls.probe(path) {
        case .stale: return true
        case .absent: return false
        case .listening: throw StartupError(description: "another server is already listening on \(path)")
        case .unknown(let code):
            throw StartupError(description: "cannot tell whether a server listens on \(path) (connect: \(String(cString: strerror(code)))); refusing to replace it")
        }
    }

    /// Binds the socket; returns it and the identity of the socket file it made.
    private func bindSocket(replacingStale stale: Bool) throws -> (fd: Int32, file: (device: UInt64, inode: UInt64)?) {
        let path = configuration.socketPath
        // Recovery may have taken a while: look again right before replacing anything.
        if stale, try Self.staleness(of: path) {
            unlink(path)
            log("removed stale socket \(path) left by a previous run")
        }
        do {
            let fd = try SocketCalls.socket()
            // bind creates the socket file with the mode the umask leaves: set it so that the
            // file is born with --socket-mode. (A chmod afterwards would go by path, and follow a
            // symbolic link someone put there meanwhile.)
            let previous = umask(mode_t(~configuration.socketMode & 0o777))
            defer { umask(previous) }
            try SocketCalls.listen(fd, path: path, backlog: 1024)
            return (fd, SocketCalls.identity(path))
        } catch {
            throw StartupError(description: "cannot listen on \(path): \(error)")
        }
    }

    /// Loads the `--acl` file (nil without one); a missing, unreadable or mistaken file stops
    /// the start: never "allow all".
    private func openAccessControl(wake: WakeSignal) throws -> AccessControl? {
        guard let path = configuration.accessFile else { return nil }
        do {
            let access = try AccessControl(path: path, ownUID: configuration.ownUID, log: log) { wake.signal() }
            log("namespace permissions: \(access.ruleCount) rules from \(path) (uid \(configuration.ownUID), the server's own, has every right)")
            return access
        } catch {
            throw StartupError(description: "--acl: \(error)")
        }
    }

    /// INFO's server, clients and access sections; `storage` are the lines after `socket:` that
    /// say where the data is.
    private func commonInfoLines(storage: [String], access: AccessControl?) -> [String] {
        var lines: [String] = [
            "# Server",
            "actorkv_version:\(ActorKVVersion.string)",
            "process_id:\(getpid())",
            "uptime_in_seconds:\(time(nil) - startedAt)",
            "socket:\(configuration.socketPath)",
        ] + storage + [
            "",
            "# Clients",
            "connected_clients:\(statistics.connectedClients.load(ordering: .relaxed))",
            "max_clients:\(clientLimit.load(ordering: .relaxed))",
            "total_connections_received:\(statistics.totalConnections.load(ordering: .relaxed))",
            "rejected_connections:\(statistics.rejectedConnections.load(ordering: .relaxed))",
            "total_commands_processed:\(statistics.commandsProcessed.load(ordering: .relaxed))",
            "protocol_errors:\(statistics.protocolErrors.load(ordering: .relaxed))",
            "blocked_clients:0",
        ]
        // Redis's names, for redis-cli --stat and clients that read them: the resident set size.
        let resident = ServerStatistics.residentBytes()
        lines += ["", "# Memory", "used_memory:\(resident)", "used_memory_human:\(ServerStatistics.humanBytes(resident))",
                  "used_memory_rss:\(resident)", "used_memory_rss_human:\(ServerStatistics.humanBytes(resident))"]
        // Redis's, for clients that ask a server's role before writing to it (ROLE's answer too).
        lines += ["", "# Replication", "role:master", "connected_slaves:0"]
        if let access {
            lines += ["", "# Access", "acl_file:\(access.path)", "acl_rules:\(access.ruleCount)", "acl_reloads:\(access.generation)"]
        }
        return lines
    }

    /// INFO in cluster mode: the common sections and the cluster's (members, leader, revision,
    /// the agent's round-trip time to etcd).
    private func agentInfoText(_ store: EtcdStore, access: AccessControl?) async -> [UInt8] {
        var lines = commonInfoLines(storage: ["mode:cluster"], access: access)
        lines += ["", "# Cluster"] + (await store.clusterFacts()).map { "\($0.0):\($0.1)" }
        return Array((lines.joined(separator: "\r\n") + "\r\n").utf8)
    }

    /// A namespace's name as part of an INFO field name: a `:` in it written `%3A`, since an
    /// INFO line's field ends at its first `:` (a name holds no `%`, so this reads back exactly).
    static func infoField(_ name: String) -> String {
        name.contains(":") ? name.replacingOccurrences(of: ":", with: "%3A") : name
    }

    private func infoText(_ store: Store, access: AccessControl?, shows: @Sendable (String) -> Bool) async -> [UInt8] {
        let namespaces = await store.statistics().filter { shows($0.name) }
        var lines = commonInfoLines(storage: ["data_dir:\(configuration.dataDirectory)", "fsync:\(configuration.durability.rawValue)"],
                                    access: access)
        lines += [
            "",
            "# Namespaces",
            "namespaces:\(namespaces.count)",
        ]
        for ns in namespaces {
            lines.append("ns_\(Self.infoField(ns.name)):keys=\(ns.keys),live_bytes=\(ns.liveBytes),log_bytes=\(ns.logBytes),history_bytes=\(ns.historyBytes),last_sequence=\(ns.lastSequence),snapshot_sequence=\(ns.snapshotSequence),snapshot_time=\(ns.snapshotTime),records_replayed=\(ns.recordsReplayed),torn_bytes_cut=\(ns.tornBytesCut),compactions=\(ns.compactions),io_errors=\(ns.ioErrors),oldest_sequence=\(ns.oldestSequence),followers=\(ns.followers),changes_sent=\(ns.changesSent),followers_dropped=\(ns.followersDropped),changes_held=\(ns.changesHeld),expiring_keys=\(ns.expiringKeys),ephemeral_keys=\(ns.ephemeralKeys),deadline_ms=\(ns.deadline),status=\(ns.failure == nil ? "ok" : "durability_lost")")
        }
        for name in await store.namespaceNames() where shows(name) && !namespaces.contains(where: { $0.name == name }) {
            if let error = await store.unavailability(of: name) {
                lines.append("ns_\(Self.infoField(name)):status=unavailable,error=\(error.message.replacingNewlines)")
            }
        }
        // Redis's keyspace line (redis-cli --stat counts db0:keys): the keys of the namespaces shown.
        let (keys, expiring) = namespaces.reduce((0, 0)) { ($0.0 + $1.keys, $0.1 + $1.expiringKeys) }
        lines += ["", "# Keyspace"] + (keys > 0 ? ["db0:keys=\(keys),expires=\(expiring),avg_ttl=0"] : [])
        return Array((lines.joined(separator: "\r\n") + "\r\n").utf8)
    }
}
