import ActorKVProtocol
import Foundation

/// A client of an `actorkvd` server on a Unix-domain socket.
///
/// One client is meant to be shared: it is `Sendable`, and any number of tasks may call it at
/// once. Calls are pipelined over a single connection: each request is written as soon as it is
/// made, without waiting for the replies to earlier ones, and the replies, which the server sends
/// in request order, are handed back to the callers first-in first-out.
///
/// The connection is opened by the first call (a lazy `connect(2)`, which on a local socket
/// completes at once unless the server's queue of connections to accept is full; then the
/// connect waits on a thread of its own, and the calls await it). Its blocking socket I/O runs on two dedicated threads, never on Swift's
/// cooperative pool: a reader thread that decodes replies and resumes the waiting tasks, and a
/// writer thread that sends whatever the kernel's socket buffer could not take at once (a caller
/// first tries a non-blocking send itself, so a lone request costs no thread hop). No lock is held
/// across a blocking call or a round trip.
///
/// If the connection breaks (the server exits or crashes, a read or write fails), every pending
/// call fails with ``ActorKVError/connectionLost(_:)`` and the next call connects again. A call
/// whose task is cancelled still waits for its reply: the request has already been sent.
///
/// Waiting is bounded by ``timeout`` (10 s unless given): a call that goes that long without a
/// byte of reply (a stopped or hung server), or a connection the server does not accept within
/// it, fails with ``ActorKVError/timedOut(_:)``, and the connection is dropped with every call
/// pending on it. A server that refuses the connection (`-MAXCLIENTS`, `-NOPERM connection
/// refused: …`) fails the call with ``ActorKVError/refused(path:code:message:)``. A call that
/// a server with `--acl` denies for want of a right on its namespace throws
/// ``ActorKVError/server(code:message:)`` with `NOPERM` (``ActorKVError/isPermissionDenied``):
/// nothing was applied, and the connection and the calls pipelined with it go on.
///
///     let kv = ActorKVClient(socketPath: "/run/myapp/actorkv.sock")
///     try await kv.put("config", "theme", "dark")
///     let theme = try await kv.getString("config", "theme")   // "dark"
public final class ActorKVClient: Sendable {
    /// The path of the server's Unix socket.
    public let socketPath: String

    /// How long to wait for the server to accept the connection, and how long a call may wait
    /// without a byte of its reply arriving, before failing with ``ActorKVError/timedOut(_:)``;
    /// nil waits forever. A slow reply that keeps arriving (a large value, a long scan page) does
    /// not time out.
    public let timeout: Duration?

    /// The default ``timeout``: 10 seconds, as in the Python client.
    public static let defaultTimeout: Duration = .seconds(10)

    /// The socket of a client created without a `socketPath`: `$ACTORKV_SOCKET` when it is set
    /// and not empty, else `./actorkv.sock` (`actorkvd`'s default), as the `actorkv` tool and
    /// the Python client choose theirs. Read from the environment each time it is asked for.
    public static var defaultSocketPath: String {
        defaultSocketPath(environment: ProcessInfo.processInfo.environment)
    }

    /// ``defaultSocketPath`` as `environment` (a process's environment variables) gives it.
    static func defaultSocketPath(environment: [String: String]) -> String {
        if let path = environment["ACTORKV_SOCKET"], !path.isEmpty { return path }
        return "./actorkv.sock"
    }

    /// Opens the connection and hands it to the calls (see ``Connector``).
    let connector: Connector

    /// A client of the server listening at `socketPath`. Nothing is connected until the first call.
    /// Without a `socketPath`, the client's is ``defaultSocketPath`` at the time it is created:
    /// `$ACTORKV_SOCKET` when set and not empty, else `./actorkv.sock`; a `socketPath` given
    /// is used whatever the environment says.
    /// `timeout` bounds connecting and each wait for a reply (see ``timeout``); nil, zero or a
    /// negative duration waits forever.
    public init(socketPath: String = ActorKVClient.defaultSocketPath, timeout: Duration? = ActorKVClient.defaultTimeout) {
        self.socketPath = socketPath
        self.timeout = timeout.flatMap { $0 > .zero ? $0 : nil }
        connector = Connector(path: socketPath, timeout: self.timeout)
    }

    deinit {
        connector.current?.shutdown(with: .closed)
    }

    // MARK: Raw requests

    /// Sends one request (`arguments[0]` is the command name) and returns its reply.
    ///
    /// An error reply (`-CODE message`) is thrown as ``ActorKVError/server(code:message:)``; any
    /// other reply is returned as is. The typed methods below are built on this.
    public func send(_ arguments: [[UInt8]]) async throws(ActorKVError) -> Reply {
        var request: [UInt8] = []
        RequestEncoder.encode(arguments, into: &request)
        switch try await deliver(request) {
        case .reply(.error(let text)): throw ActorKVError.fromErrorReply(text)
        case .reply(let reply): return reply
        case .failed(let error), .notSent(let error): throw error
        }
    }

    /// Sends an encoded request and returns what came of it: its reply, or the failure of the
    /// connection after it was sent (or may have been). A request that was not sent (its
    /// connection failed or began closing between being looked up and being used) is retried on
    /// a fresh connection, a bounded number of times, then thrown, as is a refusal to connect.
    private func deliver(_ request: [UInt8]) async throws(ActorKVError) -> SendResult {
        var attempts = 0
        while true {
            let connection = try await connector.connection()
            let result = await connection.send(request)
            guard case .notSent(let error) = result else { return result }
            // A refusal is the server's answer to connecting; do not ask again at once.
            if case .refused = error { throw error }
            attempts += 1
            if attempts == 3 { throw error }
        }
    }

    /// Sends one request given as strings (their UTF-8 bytes); see ``send(_:)-([[UInt8]])``.
    public func send(_ arguments: [String]) async throws(ActorKVError) -> Reply {
        try await send(arguments.map { Array($0.utf8) })
    }

    /// The number of requests sent on the current connection whose replies have not arrived yet
    /// (for tests and diagnostics).
    var pendingRequestCount: Int { connector.current?.pendingCount ?? 0 }

    /// Closes the connection gracefully: sends `QUIT`, waits until the replies to every request
    /// sent before it have arrived, then closes the socket. Calls made after `close()` starts open
    /// a new connection. Never throws: a connection that is already broken is just dropped.
    ///
    /// Never hangs: a server that does not answer is given ``timeout`` (as any call), and a client
    /// without a timeout waits at most ``defaultTimeout`` here; then the connection is dropped,
    /// failing the calls still waiting with ``ActorKVError/timedOut(_:)`` or ``ActorKVError/closed``.
    public func close() async {
        guard let connection = connector.take() else { return }
        var request: [UInt8] = []
        RequestEncoder.encode(["QUIT"], into: &request)
        // With a timeout, the connection's reader fails the QUIT when the server stops answering.
        let bound: Task<Void, Never>? = timeout != nil ? nil : Task {
            try? await Task.sleep(for: Self.defaultTimeout)
            if !Task.isCancelled { connection.shutdown(with: .closed) }
        }
        _ = await connection.send(request, last: true)
        bound?.cancel()
        connection.shutdown(with: .closed)
    }

    // MARK: Keys and values

    /// The value stored under `key` in `namespace`, or nil if there is none.
    public func get(_ namespace: String, _ key: [UInt8]) async throws(ActorKVError) -> [UInt8]? {
        let reply = try await send([Array("GET".utf8), Array(namespace.utf8), key])
        switch reply {
        case .bulk(let value): return value
        case .null: return nil
        default: throw Self.unexpected(reply, for: "GET")
        }
    }

    /// The value stored under the UTF-8 bytes of `key`, or nil if there is none.
    public func get(_ namespace: String, _ key: String) async throws(ActorKVError) -> [UInt8]? {
        try await get(namespace, Array(key.utf8))
    }

    /// The value stored under `key` decoded as UTF-8 (invalid sequences become U+FFFD), or nil.
    public func getString(_ namespace: String, _ key: String) async throws(ActorKVError) -> String? {
        try await get(namespace, Array(key.utf8)).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Stores `value` under `key` in `namespace` (created if needed), replacing any value there.
    /// Returns once the server has applied it, durable per the server's `--fsync` policy.
    ///
    /// - `ttl`: the key expires that long from now (`PX`, in whole milliseconds rounded up; the
    ///   server refuses zero or less, and a deadline past `Int64.max` milliseconds since the
    ///   epoch, with `ERR`, nothing written). An expired key is gone for every read at once.
    ///   Without a `ttl`, any expiry the key had is removed. See ``pttl(_:_:)-([UInt8])``.
    /// - `ephemeral`: the key belongs to this client's connection (`EPHEMERAL`): the server
    ///   deletes it when that connection closes, for whatever reason (``close()``, a broken or
    ///   timed-out connection, after which the next call reconnects without saying so, or this
    ///   process's exit). Without it, the key is persistent, whoever owned it before. For a key
    ///   that lives exactly as long as something holds it, use a client of its own, as
    ///   ``acquireLock(_:_:timeout:ttl:)-([UInt8])`` does.
    public func put(_ namespace: String, _ key: [UInt8], _ value: [UInt8], ttl: Duration? = nil,
                    ephemeral: Bool = false) async throws(ActorKVError) {
        let reply = try await send(Self.putArguments(namespace, key, value, ttl: ttl, ephemeral: ephemeral, ifVersion: nil))
        try Self.expectOK(reply, for: "PUT")
    }

    /// Stores the UTF-8 bytes of `value` under the UTF-8 bytes of `key`; see
    /// ``put(_:_:_:ttl:ephemeral:)-(_,[UInt8],[UInt8],_,_)``.
    public func put(_ namespace: String, _ key: String, _ value: String, ttl: Duration? = nil,
                    ephemeral: Bool = false) async throws(ActorKVError) {
        try await put(namespace, Array(key.utf8), Array(value.utf8), ttl: ttl, ephemeral: ephemeral)
    }

    /// Stores `value` under the UTF-8 bytes of `key`; see ``put(_:_:_:ttl:ephemeral:)-(_,[UInt8],[UInt8],_,_)``.
    public func put(_ namespace: String, _ key: String, _ value: [UInt8], ttl: Duration? = nil,
                    ephemeral: Bool = false) async throws(ActorKVError) {
        try await put(namespace, Array(key.utf8), value, ttl: ttl, ephemeral: ephemeral)
    }

    /// Removes `keys` from `namespace`; returns how many of them existed.
    public func delete(_ namespace: String, _ keys: [[UInt8]]) async throws(ActorKVError) -> Int {
        try await integer(["DEL", namespace], keys)
    }

    /// Removes the UTF-8 bytes of each of `keys`; returns how many of them existed.
    public func delete(_ namespace: String, _ keys: [String]) async throws(ActorKVError) -> Int {
        try await delete(namespace, keys.map { Array($0.utf8) })
    }

    /// Removes one key; returns whether it existed.
    @discardableResult
    public func delete(_ namespace: String, _ key: String) async throws(ActorKVError) -> Bool {
        try await delete(namespace, [Array(key.utf8)]) == 1
    }

    /// How many of `keys` exist in `namespace` (a key listed twice counts twice).
    public func exists(_ namespace: String, _ keys: [[UInt8]]) async throws(ActorKVError) -> Int {
        try await integer(["EXISTS", namespace], keys)
    }

    /// How many of the UTF-8 bytes of `keys` exist in `namespace`.
    public func exists(_ namespace: String, _ keys: [String]) async throws(ActorKVError) -> Int {
        try await exists(namespace, keys.map { Array($0.utf8) })
    }

    /// Whether `key` exists in `namespace`.
    public func exists(_ namespace: String, _ key: String) async throws(ActorKVError) -> Bool {
        try await exists(namespace, [Array(key.utf8)]) == 1
    }

    /// The number of keys in `namespace` (0 if it does not exist).
    public func count(_ namespace: String) async throws(ActorKVError) -> Int {
        try await integer(["COUNT", namespace], [])
    }

    /// The bytes `namespace` takes in the server's memory (MEMORY USAGE): an estimate from the
    /// namespace's exact counts of keys, bytes and lifetimes, within a few percent for many keys;
    /// nil when it holds no key. Throws the server's error through an agent of an etcd cluster,
    /// which does not hold the keys. See protocol.md, "MEMORY USAGE".
    public func memoryUsage(of namespace: String) async throws(ActorKVError) -> Int? {
        let reply = try await send([Array("MEMORY".utf8), Array("USAGE".utf8), Array(namespace.utf8)])
        switch reply {
        case .integer(let bytes): return Int(bytes)
        case .null: return nil
        default: throw Self.unexpected(reply, for: "MEMORY USAGE")
        }
    }

    // MARK: Scans

    /// Every entry of `namespace` whose key starts with `prefix`, in key order, fetched lazily
    /// `pageSize` entries at a time (one `SCAN` per page, following the cursor until it is `0`).
    ///
    ///     for try await entry in kv.scan("users", prefix: "user:") { print(entry.keyString) }
    ///
    /// A scan sees a consistent order but not a snapshot: keys written while it runs may or may
    /// not appear; keys that exist throughout appear exactly once. `pageSize` is 1 to 100,000.
    public func scan(_ namespace: String, prefix: [UInt8] = [], pageSize: Int = 100) -> ScanSequence {
        ScanSequence(client: self, namespace: namespace, prefix: prefix, pageSize: pageSize)
    }

    /// Every entry whose key starts with the UTF-8 bytes of `prefix`; see ``scan(_:prefix:pageSize:)-([UInt8])``.
    public func scan(_ namespace: String, prefix: String, pageSize: Int = 100) -> ScanSequence {
        scan(namespace, prefix: Array(prefix.utf8), pageSize: pageSize)
    }

    /// One page of a scan: up to `count` entries after `cursor` (``ScanPage/start`` to begin) whose
    /// keys start with `prefix`, and the cursor of the next page.
    public func scanPage(_ namespace: String, cursor: [UInt8] = ScanPage.start, prefix: [UInt8] = [],
                         count: Int = 100) async throws(ActorKVError) -> ScanPage {
        var arguments = [Array("SCAN".utf8), Array(namespace.utf8), cursor]
        if !prefix.isEmpty { arguments += [Array("PREFIX".utf8), prefix] }
        arguments += [Array("COUNT".utf8), Array(String(count).utf8)]
        let reply = try await send(arguments)
        guard case .array(let parts) = reply, parts.count == 2, case .bulk(let next) = parts[0],
              case .array(let flat) = parts[1], flat.count % 2 == 0 else {
            throw Self.unexpected(reply, for: "SCAN")
        }
        var entries: [ScanEntry] = []
        entries.reserveCapacity(flat.count / 2)
        var i = 0
        while i < flat.count {
            guard case .bulk(let key) = flat[i], case .bulk(let value) = flat[i + 1] else {
                throw Self.unexpected(reply, for: "SCAN")
            }
            entries.append(ScanEntry(key: key, value: value))
            i += 2
        }
        return ScanPage(entries: entries, nextCursor: next)
    }

    // MARK: Batches

    /// Applies `operations` to `namespace` in order, all or nothing, as one durable write.
    /// Returns one result per operation, or nil when an ``BatchOperation/ifVersion(key:version:)``
    /// guard did not hold (nothing was applied). If the server refuses the batch (it throws),
    /// nothing was applied either.
    public func batch(_ namespace: String, _ operations: [BatchOperation]) async throws(ActorKVError) -> [BatchResult]? {
        guard !operations.isEmpty else { return [] }
        var arguments = [Array("BATCH".utf8), Array(namespace.utf8)]
        arguments.reserveCapacity(2 + operations.count * 3)
        for operation in operations {
            switch operation {
            case .put(let key, let value): arguments += [Array("PUT".utf8), key, value]
            case .delete(let key): arguments += [Array("DEL".utf8), key]
            case .ifVersion(let key, let version): arguments += [Array("IFVERSION".utf8), key, Array(String(version).utf8)]
            case .increment(let key, let delta): arguments += [Array("INCR".utf8), key, Array(String(delta).utf8)]
            }
        }
        let reply = try await send(arguments)
        if case .null = reply { return nil }
        guard case .array(let elements) = reply, elements.count == operations.count else {
            throw Self.unexpected(reply, for: "BATCH")
        }
        var results: [BatchResult] = []
        results.reserveCapacity(elements.count)
        for (element, operation) in zip(elements, operations) {
            switch (element, operation) {
            case (.simple("OK"), .put): results.append(.stored)
            case (.integer(let n), .delete): results.append(.deleted(n == 1))
            case (.simple("OK"), .ifVersion): results.append(.held)
            case (.integer(let n), .increment): results.append(.counted(n))
            default: throw Self.unexpected(reply, for: "BATCH")
            }
        }
        return results
    }

    // MARK: Server

    /// Checks the connection: returns "PONG".
    @discardableResult
    public func ping() async throws(ActorKVError) -> String {
        let reply = try await send([Array("PING".utf8)])
        switch reply {
        case .simple(let text): return text
        case .bulk(let bytes): return String(decoding: bytes, as: UTF8.self)
        default: throw Self.unexpected(reply, for: "PING")
        }
    }

    /// Sends `PING message`; the server echoes `message` back.
    public func ping(_ message: [UInt8]) async throws(ActorKVError) -> [UInt8] {
        let reply = try await send([Array("PING".utf8), message])
        guard case .bulk(let bytes) = reply else { throw Self.unexpected(reply, for: "PING") }
        return bytes
    }

    /// The server's `INFO` text: `# Section` headers and `name:value` lines.
    public func info() async throws(ActorKVError) -> String {
        let reply = try await send([Array("INFO".utf8)])
        guard case .bulk(let bytes) = reply else { throw Self.unexpected(reply, for: "INFO") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `CLIENT LIST`: one line per open connection, as `CLIENT INFO` gives its own (`id=… name=…
    /// age=… idle=… flags=… cmd=… uid=… gid=… pid=…`), each ended by a newline. Only the server's
    /// own uid may ask under `--acl`. ``clients()`` reads the lines.
    public func clientList() async throws(ActorKVError) -> String {
        let reply = try await send([Array("CLIENT".utf8), Array("LIST".utf8)])
        guard case .bulk(let bytes) = reply else { throw Self.unexpected(reply, for: "CLIENT LIST") }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `CLIENT LIST`, read: the open connections in id order, each with its id, name, age, idle
    /// time, last command and peer (``ConnectedClient``). Only the server's own uid may ask under
    /// `--acl`.
    public func clients() async throws(ActorKVError) -> [ConnectedClient] {
        ConnectedClient.list(try await clientList())
    }

    /// `CLIENT KILL ID id`: closes connection `id` at once, which releases what it held (its
    /// ephemeral keys, its locks); returns whether it was open. Only the server's own uid may ask
    /// under `--acl`.
    @discardableResult
    public func killClient(_ id: UInt64) async throws(ActorKVError) -> Bool {
        let reply = try await send(["CLIENT", "KILL", "ID", String(id)])
        guard case .integer(let killed) = reply else { throw Self.unexpected(reply, for: "CLIENT KILL") }
        return killed > 0
    }

    /// Writes a snapshot of `namespace` and truncates its log (a no-op for a namespace that does
    /// not exist).
    public func compact(_ namespace: String) async throws(ActorKVError) {
        let reply = try await send([Array("COMPACT".utf8), Array(namespace.utf8)])
        try Self.expectOK(reply, for: "COMPACT")
    }

    /// Waits until every write acknowledged so far (this client's and every other's) is on
    /// stable storage, the server fsyncing what is not yet, whatever its `--fsync` policy
    /// (`WAITAOF 1 0 timeout`); returns false if `timeoutMilliseconds` (0: none) passed first.
    /// Under `everysec` or `no`, call it after a write that must survive a power loss before the
    /// program goes on. See protocol.md, "WAITAOF".
    @discardableResult
    public func waitDurable(timeoutMilliseconds: Int = 0) async throws(ActorKVError) -> Bool {
        let reply = try await send(["WAITAOF", "1", "0", String(max(0, timeoutMilliseconds))].map { Array($0.utf8) })
        guard case .array(let counts) = reply, counts.count == 2, case .integer(let local) = counts[0] else {
            throw Self.unexpected(reply, for: "WAITAOF")
        }
        return local == 1
    }

    /// Removes `namespaces` (UNLINK): each one's keys, files and place among the namespaces;
    /// returns how many of them existed. A name used again afterwards numbers its versions on
    /// after every one it had, so a version read before guards nothing. See protocol.md, "UNLINK".
    @discardableResult
    public func removeNamespaces(_ namespaces: [String]) async throws(ActorKVError) -> Int {
        try await integer(["UNLINK"], namespaces.map { Array($0.utf8) })
    }

    /// Renames `namespace` to `newName` (RENAME, or RENAMENX without `replacing`): its keys,
    /// with their deadlines and its own, become `newName`'s, whose keys are dropped, atomically
    /// and durably. Returns false, doing nothing, when not `replacing` and `newName` holds a key;
    /// throws the server's `ERR no such key` when `namespace` holds none. See protocol.md,
    /// "RENAME, RENAMENX".
    @discardableResult
    public func renameNamespace(_ namespace: String, to newName: String, replacing: Bool = true) async throws(ActorKVError) -> Bool {
        let reply = try await send([replacing ? "RENAME" : "RENAMENX", namespace, newName].map { Array($0.utf8) })
        switch reply {
        case .simple("OK"), .integer(1): return true
        case .integer(0): return false
        default: throw Self.unexpected(reply, for: replacing ? "RENAME" : "RENAMENX")
        }
    }

    /// Copies `namespace` to `newName` (COPY, with REPLACE when `replacing`): `newName` holds
    /// its keys, with their deadlines and its own, as of one moment, atomically and durably;
    /// `namespace` is unchanged. Returns false, doing nothing, when `namespace` holds no key or,
    /// not `replacing`, `newName` holds one. See protocol.md, "COPY".
    @discardableResult
    public func copyNamespace(_ namespace: String, to newName: String, replacing: Bool = false) async throws(ActorKVError) -> Bool {
        let words = ["COPY", namespace, newName] + (replacing ? ["REPLACE"] : [])
        let reply = try await send(words.map { Array($0.utf8) })
        switch reply {
        case .integer(1): return true
        case .integer(0): return false
        default: throw Self.unexpected(reply, for: "COPY")
        }
    }

    /// Removes one namespace (UNLINK); returns whether it existed.
    @discardableResult
    public func removeNamespace(_ namespace: String) async throws(ActorKVError) -> Bool {
        try await removeNamespaces([namespace]) == 1
    }

    /// Writes a backup of every namespace, as of one moment, to the new directory `path`, which
    /// the server creates (its parent must exist; a relative path is taken from this process's
    /// working directory, since the server does not share it), and returns the absolute path.
    /// The directory is a data directory: `actorkvd --data-dir` serves it as it is. Only the
    /// server's own uid may ask under `--acl`. Waits up to the client's timeout, which a large
    /// store may need longer than the default: a client made with `timeout: nil` waits as long
    /// as the backup takes. See protocol.md, "Backups".
    @discardableResult
    public func backup(to path: String) async throws(ActorKVError) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        let reply = try await send([Array("BACKUP".utf8), Array(absolute.utf8)])
        try Self.expectOK(reply, for: "BACKUP")
        return absolute
    }

    /// Asks the server to shut down (`SHUTDOWN`, what `redis-cli shutdown` sends) and returns
    /// once it has: the server closes this connection, with no reply, after it has finished the
    /// requests in flight, fsync'd every namespace and removed its socket. Throws the server's
    /// refusal (`NOPERM` under `--acl`: only the server's own uid may) or, should the shutdown
    /// fail to make every namespace durable, its `IOERR`. See protocol.md, "SHUTDOWN".
    public func shutdown() async throws(ActorKVError) {
        var request: [UInt8] = []
        RequestEncoder.encode([Array("SHUTDOWN".utf8)], into: &request)
        switch try await deliver(request) {
        case .reply(.error(let text)): throw ActorKVError.fromErrorReply(text)
        case .reply(let reply): throw Self.unexpected(reply, for: "SHUTDOWN")
        case .failed(.connectionLost): return  // the server closed it, having shut down
        case .failed(let error), .notSent(let error): throw error
        }
    }

    /// The names of the namespaces that exist.
    public func namespaces() async throws(ActorKVError) -> [String] {
        let reply = try await send([Array("NAMESPACES".utf8)])
        guard case .array(let elements) = reply else { throw Self.unexpected(reply, for: "NAMESPACES") }
        var names: [String] = []
        for element in elements {
            guard case .bulk(let bytes) = element else { throw Self.unexpected(reply, for: "NAMESPACES") }
            names.append(String(decoding: bytes, as: UTF8.self))
        }
        return names
    }

    // MARK: Reply checks

    private func integer(_ head: [String], _ keys: [[UInt8]]) async throws(ActorKVError) -> Int {
        let reply = try await send(head.map { Array($0.utf8) } + keys)
        guard case .integer(let n) = reply else { throw Self.unexpected(reply, for: head[0]) }
        return Int(n)
    }

    static func expectOK(_ reply: Reply, for command: String) throws(ActorKVError) {
        guard case .simple("OK") = reply else { throw unexpected(reply, for: command) }
    }

    static func unexpected(_ reply: Reply, for command: String) -> ActorKVError {
        let shown: String
        switch reply {
        case .simple(let text): shown = "+\(text)"
        case .error(let text): shown = "-\(text)"
        case .integer(let n): shown = ":\(n)"
        case .bulk(let bytes): shown = "a \(bytes.count)-byte bulk string"
        case .null, .nullArray: shown = "a null"
        case .array(let elements): shown = "an array of \(elements.count)"
        case .map(let elements): shown = "a map of \(elements.count / 2)"
        case .pairs(let elements): shown = "an array of \(elements.count / 2) pairs"
        case .bulks(let strings, let asMap): shown = asMap ? "a map of \(strings.count / 2)" : "an array of \(strings.count)"
        case .push(let elements): shown = "a push message of \(elements.count)"
        case .double(let value): shown = ",\(value)"
        case .boolean(let value): shown = value ? "#t" : "#f"
        case .switching(_, let inner): return unexpected(inner, for: command)
        case .nothing: shown = "no reply"
        }
        return .protocolViolation("unexpected reply to \(command): \(shown)")
    }
}
