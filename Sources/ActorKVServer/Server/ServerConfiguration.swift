import ActorKVProtocol
import ActorKVEtcd
import ActorKVStore

/// Everything `actorkvd` can be told, with the defaults it runs with when told nothing.
public struct ServerConfiguration: Sendable {
    /// The Unix socket path.
    public var socketPath = "./actorkv.sock"
    /// The data directory (created 0700 if missing).
    public var dataDirectory = "./actorkv-data"
    /// The fsync policy.
    public var durability = DurabilityPolicy.everysec
    /// The socket file's permission bits.
    public var socketMode: UInt32 = 0o600
    /// The most clients connected at once.
    public var maxClients = 10_000
    /// The most namespaces the data directory may hold (each keeps its log open): a write that
    /// would create one more is refused.
    public var maxNamespaces = 1024
    /// Framing limits (inline line, bulk length, arguments, request size).
    public var protocolLimits = ProtocolLimits()
    /// The largest value a PUT may store.
    public var maxValueBytes = StoreLimits.defaultMaxValueBytes
    /// Encoded replies a client may leave unread before the server stops reading its requests.
    public var maxOutputBytes = 1 << 20
    /// Snapshot policy.
    public var compaction = CompactionPolicy()
    /// How many of each namespace's latest changes the log keeps for `CHANGES … FROM`.
    public var changesHistory = 100_000
    /// The most bytes of log each namespace keeps for that history.
    public var changesHistoryBytes = 64 << 20
    /// Bytes of recent changes held in memory per followed namespace; a follower further behind
    /// is dropped with `-LAGGING`.
    public var changesLagBytes = 16 << 20
    /// If not empty (or `allowGIDs` is not), only these uids (and the server's own) may connect.
    public var allowUIDs: Set<UInt32> = []
    /// If not empty (or `allowUIDs` is not), members of these gids (primary or supplementary
    /// group of the connecting process) may connect too.
    public var allowGIDs: Set<UInt32> = []
    /// The uid the server runs as (always allowed, every right on every namespace).
    public var ownUID: UInt32 = 0
    /// The namespace-permission file (`--acl`); nil: every admitted client has every right.
    public var accessFile: String?
    /// Run even if other users can write to the data directory.
    public var allowSharedDataDirectory = false
    /// How long a shutdown waits for requests in flight.
    public var shutdownGraceSeconds = 5.0
    /// Where namespace actors run requests.
    public var execution = Execution.loop
    /// Cluster mode: the etcd members' client URLs (`--etcd`); empty: the data is local.
    public var etcdEndpoints: [String] = []
    /// Cluster mode: the flags of local data that were given, and have no effect (said at start).
    public var ignoredLocalFlags: [String] = []
    /// Cluster mode: what every etcd key of ActorKV's starts with (`--etcd-prefix`).
    public var etcdPrefix = "actorkv/"
    /// Cluster mode: seconds an agent's connection lease lives unrenewed (`--ephemeral-ttl`):
    /// how long a dead agent's ephemeral keys outlive it.
    public var ephemeralTTL = 10

    /// Where the server runs the namespace actors' work for its clients.
    public enum Execution: String, Sendable {
        /// On the event-loop thread when the actor is free: no thread hand-off per request.
        case loop
        /// On Swift's cooperative pool: namespaces in parallel on every core, at the cost of two
        /// thread hand-offs per turn of the loop.
        case pool
    }

    /// The defaults.
    public init() {}

    /// Whether connections are filtered by peer credentials.
    public var restrictsPeers: Bool { !allowUIDs.isEmpty || !allowGIDs.isEmpty }

    /// Whether a peer with this uid, primary gid and supplementary groups may connect. The
    /// groups are asked for only when the uid and gid do not already decide.
    public func allows(uid: UInt32, gid: UInt32, groups: () -> [UInt32] = { [] }) -> Bool {
        if !restrictsPeers || uid == ownUID || allowUIDs.contains(uid) || allowGIDs.contains(gid) { return true }
        return !allowGIDs.isEmpty && groups().contains(where: allowGIDs.contains)
    }

    /// The engine options these settings imply, the namespaces running on the event loop's
    /// `executor` (its ``LoopExecutor/serial`` side; their background work on the executor), or
    /// as default actors on Swift's global executor when it is nil.
    func storeOptions(log: @escaping @Sendable (String) -> Void, executor: LoopExecutor?) -> StoreOptions {
        storeOptions(log: log, taskExecutor: executor, serialExecutor: executor?.serial)
    }

    /// The engine options these settings imply; the namespaces run on `serialExecutor` and their
    /// background work on `taskExecutor`, or as default actors on Swift's global executor when
    /// these are nil.
    public func storeOptions(log: @escaping @Sendable (String) -> Void, taskExecutor: (any TaskExecutor)? = nil,
                             serialExecutor: (any SerialExecutor)? = nil) -> StoreOptions {
        var options = StoreOptions(durability: durability, compaction: compaction,
                                   limits: StoreLimits(maxValueBytes: maxValueBytes),
                                   allowSharedDirectory: allowSharedDataDirectory, log: log)
        options.changesHistory = changesHistory
        options.changesHistoryBytes = changesHistoryBytes
        options.changesLagBytes = changesLagBytes
        options.maxNamespaces = maxNamespaces
        options.removesEmptyNamespacesForRoom = true
        options.backgroundExecutor = taskExecutor
        options.serialExecutor = serialExecutor
        return options
    }
}

/// What the command line asked for.
public enum CommandLineRequest: Sendable {
    /// Serve with this configuration.
    case run(ServerConfiguration)
    /// Print the usage text.
    case help
    /// Print the version.
    case version
    /// Check the data directory offline (`--check`) and exit.
    case check(ServerConfiguration)
}

/// A command line that cannot be run; `actorkvd` prints it with the usage and exits 2.
public struct UsageError: Error, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let description: String
}

extension ServerConfiguration {
    /// The usage text printed by `--help`.
    public static let usage = """
    actorkvd: the ActorKV server. Shares namespaced key-value state between local processes over a
    Unix-domain socket, speaking a Redis-compatible protocol (see protocol.md).

    Usage: actorkvd [options]

      --socket PATH              Unix socket to listen on                  (default ./actorkv.sock)
      --data-dir DIR             where namespaces are stored, created 0700 (default ./actorkv-data)
      --fsync POLICY             always | everysec | no                    (default everysec)
      --socket-mode OCTAL        permission bits of the socket, with a write bit
                                 (connecting takes write permission)       (default 600)
      --max-clients N            most connections at once (a low ulimit -n
                                 allows fewer: said at start)              (default 10000)
      --max-namespaces N         most namespaces; a write that would create one
                                 more first removes namespaces that hold no key
                                 and that nobody follows, else gets -ERR (each
                                 keeps its log open, so a low ulimit -n allows
                                 fewer: said at start and in the -ERR; local
                                 data only: an etcd agent keeps none open) (default 1024)
      --max-value-bytes N        largest value a PUT may store, at most
                                 --max-bulk-bytes (left at its default, it
                                 is lowered to that)                       (default 33554432, 32 MiB)
      --max-bulk-bytes N         largest bulk string in a request          (default 67108864, 64 MiB)
      --max-inline-bytes N       longest inline (typed) request line       (default 65536)
      --max-arguments N          most arguments in one request             (default 1048576)
      --max-request-bytes N      largest multibulk request in total (and 56
                                 bytes for each argument of one with more
                                 than 64); also the most requests read ahead
                                 per client while its replies wait to be
                                 read, and the most a transaction (WATCH,
                                 MULTI queue) holds                        (default 134217728, 128 MiB)
      --max-output-bytes N       unread replies buffered per client before its
                                 requests stop being run (backpressure)    (default 1048576, 1 MiB)
      --snapshot-interval SECS   snapshot namespaces changed this long ago; 0 = off (default 60)
      --compact-ratio R          snapshot when the log exceeds R x live data (default 2)
      --compact-min-bytes N      ... and is at least N bytes               (default 67108864, 64 MiB)
      --changes-history N        latest changes per namespace the log keeps for
                                 CHANGES ... FROM, across compactions; 0 = none (default 100000)
      --changes-history-bytes N  ... in at most N bytes of log per namespace (large
                                 values keep fewer changes); 0 = none      (default 67108864, 64 MiB)
      --changes-lag-bytes N      recent changes held in memory per followed namespace; a
                                 follower further behind gets -LAGGING     (default 16777216, 16 MiB)
      --allow-uid LIST           comma-separated uids allowed to connect (checked with SO_PEERCRED)
      --allow-gid LIST           comma-separated gids allowed to connect (primary or supplementary)
                                 (with either list, only those and the server's own uid may connect;
                                 ids are 0 to 4294967294: 4294967295 means no user or group)
      --acl FILE                 namespace permissions: which uids and groups may read, write
                                 or administer which namespaces (README "Who may do what");
                                 reloaded on SIGHUP and by ACL LOAD; without it, every client
                                 that may connect has every right. The file and its directory
                                 must be the server user's or root's, not writable by others
                                 (a world-writable directory only if sticky, as /tmp)
      --allow-shared-data-dir    run even if other users may write to or own the data directory
      --shutdown-grace SECS      how long SIGTERM or SHUTDOWN waits for requests in flight (default 5)
      --execution MODE           where namespace actors run requests: loop (the event-loop
                                 thread, fewest hand-offs) | pool (Swift's cooperative pool,
                                 namespaces in parallel across cores)       (default loop)
      --etcd URL[,URL...]        cluster mode: keep the data in an etcd cluster (its v3 JSON
                                 gateway, http://host:port of each member; etcd 3.4+) instead
                                 of --data-dir; local clients see the same protocol
                                 (protocol.md "Cluster mode", README "Several machines")
      --etcd-prefix PREFIX       cluster mode: etcd keys start with PREFIX  (default actorkv/)
      --ephemeral-ttl SECS       cluster mode: how long a connection's EPHEMERAL keys outlive
                                 an agent that died (its etcd lease's TTL)  (default 10)
      --check                    check every namespace in --data-dir without serving or
                                 changing its files: prints one line per namespace, exits 0 if
                                 all would open, 1 if any would be refused (stop the server first)
      --help                     print this text
      --version                  print the version

    Signals: SIGTERM or SIGINT stop accepting, finish requests in flight (requests read but not
    started get -SHUTDOWN), fsync every namespace, remove the socket and exit 0 (1 if a final
    fsync failed: the log names the namespaces); so does a client's SHUTDOWN (redis-cli
    shutdown), whose connection closes once that is done. SIGHUP reloads the --acl file (a file
    with a mistake is logged and the rules in force are kept).

    Environment: actorkvd re-executes itself once with GLIBC_TUNABLES=glibc.malloc.tcache_count=512
    added (faster allocation for its batches of requests); a tcache_count of your own is kept,
    and ACTORKV_MALLOC_TUNING=off turns this off.
    """

    /// Parses `actorkvd`'s arguments (without the program name).
    public static func parse(_ arguments: [String]) throws(UsageError) -> CommandLineRequest {
        var config = ServerConfiguration()
        var rest = arguments[...]
        var check = false
        var given: Set<String> = []
        while let flag = rest.popFirst() {
            if flag == "--help" || flag == "-h" { return .help }
            if flag == "--version" { return .version }
            if flag == "--check" { check = true; continue }
            if flag == "--allow-shared-data-dir" { config.allowSharedDataDirectory = true; given.insert(flag); continue }
            guard let value = rest.popFirst() else {
                throw UsageError(description: flag.hasPrefix("--") && knownFlags.contains(flag)
                                 ? "\(flag) needs a value" : "unknown option '\(flag)'")
            }
            try apply(flag, value, to: &config)
            given.insert(flag)  // given twice, the last one counts, as with most commands
        }
        try fitValueLimit(&config, given: given.contains("--max-value-bytes"))
        try checkMode(&config, given: given, check: check)
        return check ? .check(config) : .run(config)
    }

    /// The flags that only local data uses, which cluster mode (`--etcd`) would ignore.
    static let localDataFlags = ["--data-dir", "--fsync", "--snapshot-interval", "--compact-ratio", "--compact-min-bytes",
                                 "--allow-shared-data-dir", "--changes-history-bytes"]
    /// The flags that only cluster mode uses.
    static let clusterFlags = ["--etcd-prefix", "--ephemeral-ttl"]

    /// Refuses the flags of cluster mode without `--etcd`, and `--check` (of a data directory)
    /// with it; notes the flags of local data given with `--etcd` (``ignoredLocalFlags``), which
    /// the start then warns of: scripts that start a server either way may pass them.
    private static func checkMode(_ config: inout ServerConfiguration, given: Set<String>, check: Bool) throws(UsageError) {
        if config.etcdEndpoints.isEmpty {
            if let flag = clusterFlags.first(where: given.contains) {
                throw UsageError(description: "\(flag) is for cluster mode and needs --etcd; without it the data is local")
            }
        } else {
            if check { throw UsageError(description: "--check reads a local data directory; with --etcd there is none (check etcd with etcdctl)") }
            config.ignoredLocalFlags = localDataFlags.filter(given.contains)
        }
    }

    /// Keeps the value limit within the bulk limit, so that a value too long is refused as one
    /// (`-TOOBIG`, the connection kept), never as a protocol error that closes the connection:
    /// left at its default, it is lowered to the bulk limit; given larger, it is refused.
    private static func fitValueLimit(_ config: inout ServerConfiguration, given: Bool) throws(UsageError) {
        let bulk = config.protocolLimits.maxBulkLength
        guard config.maxValueBytes > bulk else { return }
        guard !given else {
            throw UsageError(description: "--max-value-bytes \(config.maxValueBytes) is more than --max-bulk-bytes \(bulk): a value "
                             + "between the two would be refused as a protocol error, closing the connection, rather than "
                             + "with -TOOBIG; give --max-value-bytes at most \(bulk)")
        }
        config.maxValueBytes = bulk
    }

    private static let knownFlags: Set<String> = [
        "--socket", "--data-dir", "--fsync", "--socket-mode", "--max-clients", "--max-namespaces", "--max-value-bytes", "--max-bulk-bytes",
        "--max-inline-bytes", "--max-arguments", "--max-request-bytes", "--max-output-bytes", "--snapshot-interval", "--compact-ratio",
        "--compact-min-bytes", "--allow-uid", "--allow-gid", "--shutdown-grace", "--execution", "--changes-history", "--changes-history-bytes",
        "--changes-lag-bytes", "--acl", "--etcd", "--etcd-prefix", "--ephemeral-ttl",
    ]

    private static func apply(_ flag: String, _ value: String, to c: inout ServerConfiguration) throws(UsageError) {
        switch flag {
        case "--socket": c.socketPath = try nonEmpty(flag, value)
        case "--data-dir": c.dataDirectory = try nonEmpty(flag, value)
        case "--fsync": c.durability = try choice(flag, value, "always, everysec or no")
        case "--socket-mode": c.socketMode = try socketMode(value)
        case "--max-clients": c.maxClients = try positive(flag, value)
        case "--max-namespaces": c.maxNamespaces = try positive(flag, value)
        case "--max-value-bytes": c.maxValueBytes = try positive(flag, value)
        case "--max-bulk-bytes": c.protocolLimits.maxBulkLength = try positive(flag, value)
        case "--max-inline-bytes": c.protocolLimits.maxInlineLength = try positive(flag, value)
        case "--max-arguments": c.protocolLimits.maxArguments = try positive(flag, value)
        case "--max-request-bytes": c.protocolLimits.maxRequestBytes = try positive(flag, value)
        case "--max-output-bytes": c.maxOutputBytes = try positive(flag, value)
        case "--snapshot-interval": c.compaction.interval = try seconds(flag, value)
        case "--compact-ratio": c.compaction.logToLiveRatio = try seconds(flag, value)
        case "--compact-min-bytes": c.compaction.minimumLogBytes = try positive(flag, value)
        case "--changes-history":
            guard let n = Int(value), n >= 0 else {
                throw UsageError(description: "--changes-history must be a non-negative integer (got '\(value)')")
            }
            c.changesHistory = n
        case "--changes-history-bytes":
            guard let n = Int(value), n >= 0 else {
                throw UsageError(description: "--changes-history-bytes must be a non-negative integer (got '\(value)')")
            }
            c.changesHistoryBytes = n
        case "--changes-lag-bytes": c.changesLagBytes = try positive(flag, value)
        case "--allow-uid": c.allowUIDs = try idList(flag, value, kind: "user")
        case "--acl": c.accessFile = try nonEmpty(flag, value)
        case "--allow-gid": c.allowGIDs = try idList(flag, value, kind: "group")
        case "--shutdown-grace": c.shutdownGraceSeconds = try seconds(flag, value)
        case "--execution": c.execution = try choice(flag, value, "loop or pool")
        case "--etcd":
            do { c.etcdEndpoints = try EtcdEndpoint.list(value).map(\.description) } catch {
                throw UsageError(description: "--etcd: \(error.message)")
            }
        case "--etcd-prefix": c.etcdPrefix = try nonEmpty(flag, value)
        case "--ephemeral-ttl": c.ephemeralTTL = try positive(flag, value)
        default: throw UsageError(description: "unknown option '\(flag)'")
        }
    }

    private static func nonEmpty(_ flag: String, _ value: String) throws(UsageError) -> String {
        guard !value.isEmpty else { throw UsageError(description: "\(flag) must not be empty") }
        return value
    }

    /// The value of a flag that takes one of a few words (`expected` lists them for the error).
    private static func choice<Choice: RawRepresentable<String>>(_ flag: String, _ value: String, _ expected: String) throws(UsageError) -> Choice {
        guard let choice = Choice(rawValue: value) else { throw UsageError(description: "\(flag) must be \(expected) (got '\(value)')") }
        return choice
    }

    private static func positive(_ flag: String, _ value: String) throws(UsageError) -> Int {
        guard let n = Int(value), n > 0 else { throw UsageError(description: "\(flag) must be a positive integer (got '\(value)')") }
        return n
    }

    private static func seconds(_ flag: String, _ value: String) throws(UsageError) -> Double {
        guard let n = Double(value), n >= 0, n.isFinite else { throw UsageError(description: "\(flag) must be a non-negative number (got '\(value)')") }
        return n
    }

    /// `--socket-mode`'s permission bits: octal, at most 777, and with a write bit, since
    /// connecting to a Unix socket takes write permission (a mode without one, such as 0, would
    /// let no one connect, not even the server's own user).
    private static func socketMode(_ value: String) throws(UsageError) -> UInt32 {
        guard let mode = UInt32(value, radix: 8), mode <= 0o777 else {
            throw UsageError(description: "--socket-mode must be octal permission bits like 600 (got '\(value)')")
        }
        guard mode & 0o222 != 0 else {
            throw UsageError(description: "--socket-mode \(value) lets no one connect, not even the server's own user (connecting to a Unix socket takes write permission); give at least the owner read and write, like 600")
        }
        return mode
    }

    /// The ids of `--allow-uid` or `--allow-gid` (`kind`: "user" or "group"): comma-separated
    /// decimal numbers, none empty, none 4294967295 ((uid_t)-1 and (gid_t)-1 mean "no user"
    /// and "no group" to the kernel, and no process has them).
    private static func idList(_ flag: String, _ value: String, kind: String) throws(UsageError) -> Set<UInt32> {
        guard !value.isEmpty else { throw UsageError(description: "\(flag) needs at least one id") }
        var ids: Set<UInt32> = []
        for part in value.split(separator: ",", omittingEmptySubsequences: false) {
            guard !part.isEmpty else { throw UsageError(description: "\(flag) has an empty item in '\(value)' (ids are separated by single commas)") }
            guard let id = UInt32(part) else {
                throw UsageError(description: "\(flag) takes comma-separated numeric ids (got '\(value)')")
            }
            guard id != UInt32.max else {
                throw UsageError(description: "\(flag) \(part) is (\(kind == "user" ? "uid" : "gid")_t)-1, which means no \(kind): no process has it; ids are 0 to 4294967294")
            }
            ids.insert(id)
        }
        return ids
    }
}

extension ServerConfiguration {
    /// What `CONFIG GET` answers, under Redis's parameter names: the settings Redis tools ask
    /// for on connecting (redis-benchmark: `save`, `appendonly`; job-queue libraries:
    /// `maxmemory-policy`), with this server's real values.
    var redisSettings: [(name: String, value: String)] {
        [
            ("save", ""),  // no RDB: the log is the store
            ("appendonly", "yes"),
            ("appendfsync", durability.rawValue),
            ("databases", "1"),
            ("maxclients", String(maxClients)),
            ("proto-max-bulk-len", String(protocolLimits.maxBulkLength)),
            ("client-query-buffer-limit", String(protocolLimits.maxRequestBytes)),
            ("unixsocket", socketPath),
            ("unixsocketperm", String(socketMode, radix: 8)),
            ("dir", dataDirectory),
            ("port", "0"),
            ("timeout", "0"),
            ("maxmemory", "0"),  // no limit: the live data is held in full
            ("maxmemory-policy", "noeviction"),  // nothing is ever evicted (job queues check this)
        ]
    }
}
