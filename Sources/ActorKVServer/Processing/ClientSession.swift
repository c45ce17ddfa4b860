import ActorKVProtocol
import ActorKVStore
import Synchronization

/// One client connection's state beyond its bytes: who is connected and what it asked for.
///
/// Created when the event loop accepts the connection and owned by it; commands reach it through
/// their ``CommandContext``. When the connection ends — QUIT, the peer closing or dying, a socket
/// error, a framing error, server shutdown — the loop hands it to
/// ``CommandProcessor/endSession(_:reason:)`` exactly once, after the last of its commands has
/// finished. Whatever a session owns is released there: later features keep their
/// per-connection state here (the RESP protocol version, a MULTI queue and watched namespaces,
/// followed change feeds, owned ephemeral keys), so that one hook undoes all of it.
public final class ClientSession: Sendable {
    /// The connection's id, unique for the server's life (CLIENT ID).
    public let id: UInt64
    /// The peer's credentials as the kernel gave them on accept (nil if they could not be read).
    public let peer: PeerCredentials?
    /// The most a transaction may hold: its MULTI queue's ``QueuedTransaction/weight`` and its
    /// watched names' ``watchWeight(of:)`` together (the server gives `--max-request-bytes`: a
    /// transaction holds no more than one request may).
    public let transactionLimit: Int
    /// When the connection was accepted (monotonic seconds): CLIENT INFO's and LIST's `age`.
    public let connectedAt = monotonicSeconds()
    /// When the connection last sent a request (monotonic milliseconds; its accept until then):
    /// CLIENT LIST's `idle`. Written by the event loop, read by CLIENT LIST on any thread.
    private let lastRequestAt: Atomic<Int64>
    /// The command of the last request it sent (``CommandTrace/bits``): CLIENT LIST's `cmd`.
    private let lastCommand = Atomic<UInt>(0)

    private struct State {
        var name: String?
        var library: LibraryInfo?
        var version: RESPVersion = .resp2
        /// The commands queued since MULTI (nil: not in a transaction).
        var transaction: QueuedTransaction?
        /// The namespaces WATCHed, with the sequence each had when watched.
        var watched: [String: UInt64] = [:]
        /// The sum of the watched names' ``ClientSession/watchWeight(of:)``.
        var watchedWeight = 0
        var closeRequested = false
        /// The namespace and prefix of each CHANGES taken (or being taken) on this connection.
        var follows: Set<FollowKey> = []
        /// Follows started by CHANGES and not yet taken over by the event loop.
        var newFollows: [NewFollow] = []
        /// RESET ended the follows: the event loop stops those it serves (``takeFollowChanges()``).
        var followsEnded = false
        /// The namespaces in which this connection wrote ephemeral keys (`PUT … EPHEMERAL`).
        var ownedIn: Set<String> = []
        /// The namespace last added to ``ownedIn``: a run of ephemeral writes in one namespace
        /// (a lock taken again and again) compares the name rather than hashing it each time.
        var lastOwnedIn: String?

        /// Forgets every watched namespace, and their weight with them.
        mutating func unwatchAll() {
            watched = [:]
            watchedWeight = 0
        }
    }

    private let state = Mutex(State())

    /// A session for connection `id` from `peer`, whose transactions hold at most
    /// `transactionLimit` (see ``transactionLimit``).
    public init(id: UInt64, peer: PeerCredentials?, transactionLimit: Int = ProtocolLimits().maxRequestBytes) {
        self.id = id
        self.peer = peer
        self.transactionLimit = min(transactionLimit, 1 << 48)  // so that adding to a queue's weight cannot overflow
        self.lastRequestAt = Atomic(monotonicMilliseconds())
    }

    /// Notes that the connection sent requests at `milliseconds` (on ``monotonicMilliseconds()``'s
    /// clock), the last of them naming `command` (the event loop, as it parses them).
    func noteRequests(at milliseconds: Int64, lastCommand command: CommandTrace) {
        lastRequestAt.store(milliseconds, ordering: .relaxed)
        lastCommand.store(command.bits, ordering: .relaxed)
    }

    /// Whole seconds since the connection last sent a request (or was accepted), at `now`
    /// (monotonic milliseconds).
    func idleSeconds(now: Int64) -> Int64 {
        max(0, now - lastRequestAt.load(ordering: .relaxed)) / 1000
    }

    /// The command of the last request the connection sent (``CommandTrace/none`` before any).
    var lastCommandTrace: CommandTrace { CommandTrace(packed: lastCommand.load(ordering: .relaxed)) }

    /// The name the client gave itself (CLIENT SETNAME), if any.
    public var name: String? {
        get { state.withLock { $0.name } }
        set { state.withLock { $0.name = newValue } }
    }

    /// What the client library said of itself (CLIENT SETINFO LIB-NAME / LIB-VER).
    var library: LibraryInfo {
        get { state.withLock { $0.library ?? LibraryInfo() } }
        set { state.withLock { $0.library = newValue } }
    }

    /// The protocol the connection speaks (HELLO switches it): decides what a following
    /// connection may send; the replies' encoding follows the ``Reply/switching(to:_:)`` reply.
    public var version: RESPVersion {
        get { state.withLock { $0.version } }
        set { state.withLock { $0.version = newValue } }
    }

    /// Whether the connection is inside MULTI: its commands are queued, not run.
    public var inTransaction: Bool { state.withLock { $0.transaction != nil } }

    /// Starts queueing (MULTI); false if already inside MULTI.
    func beginTransaction() -> Bool {
        state.withLock { s in
            guard s.transaction == nil else { return false }
            s.transaction = QueuedTransaction()
            return true
        }
    }

    /// Queues a command inside MULTI. False, and noted as refused (EXEC will then abort), if the
    /// queue and the watched names would then weigh more than ``transactionLimit``.
    func queue(_ command: QueuedCommand) -> Bool {
        enqueue(weight: command.weight) { $0.commands.append(command) }
    }

    /// Queues, inside MULTI, a command whose reply is `reply` (PING, ECHO); false as ``queue(_:)``.
    func queue(constantReply reply: Reply) -> Bool {
        enqueue(weight: QueuedTransaction.weight(of: reply)) { $0.constantReplies.append((position: $0.count, reply: reply)) }
    }

    /// Adds a command of `weight` to the transaction with `add`, unless that would pass the limit.
    private func enqueue(weight: Int, _ add: (inout QueuedTransaction) -> Void) -> Bool {
        state.withLock { s in
            guard s.transaction != nil, s.transaction!.weight + s.watchedWeight + weight <= transactionLimit else {
                s.transaction?.aborted = true
                return false
            }
            add(&s.transaction!)
            s.transaction!.weight += weight
            return true
        }
    }

    /// Notes that a command sent inside MULTI was refused: EXEC will apply nothing.
    func refuseQueued() {
        state.withLock { $0.transaction?.aborted = true }
    }

    /// Ends the transaction (EXEC, DISCARD): what was queued and the watched namespaces, which
    /// are forgotten too; nil transaction if there was no MULTI.
    func endTransaction() -> (transaction: QueuedTransaction?, watched: [String: UInt64]) {
        state.withLock { s in
            defer { s.transaction = nil; s.unwatchAll() }
            return (s.transaction, s.watched)
        }
    }

    /// Watches `namespace` as of `sequence` (WATCH); a namespace already watched keeps the
    /// sequence it was first watched at.
    func watch(_ namespace: String, at sequence: UInt64) {
        state.withLock { s in
            guard s.watched[namespace] == nil else { return }
            s.watched[namespace] = sequence
            s.watchedWeight += Self.watchWeight(of: namespace)
        }
    }

    /// Whether watching `namespaces` too would keep the watched names (and the queue) within
    /// ``transactionLimit``.
    func mayWatch(_ namespaces: [String]) -> Bool {
        state.withLock { s in
            var added = 0
            for name in Set(namespaces) where s.watched[name] == nil { added += Self.watchWeight(of: name) }
            return (s.transaction?.weight ?? 0) + s.watchedWeight + added <= transactionLimit
        }
    }

    /// What a watched name is counted against ``transactionLimit``: its bytes, and 128 bytes for
    /// its entry (measured at about 180 bytes of resident memory for a 64-byte name).
    static func watchWeight(of namespace: String) -> Int { namespace.utf8.count + 128 }

    /// Whether no namespace is watched.
    var watchesNothing: Bool { state.withLock { $0.watched.isEmpty } }

    /// Forgets every watched namespace (UNWATCH).
    func unwatchAll() {
        state.withLock { $0.unwatchAll() }
    }

    /// Back to a new connection's state (RESET): RESP2, no name, no transaction, nothing watched,
    /// nothing followed (as Redis's RESET unsubscribes from everything). The follows the event
    /// loop serves stop when it takes this command's replies (``takeFollowChanges()``), before
    /// it sends any of them, so no change message comes after `+RESET`; those started in this
    /// batch and not yet taken over end here. Owned ephemeral keys stay.
    func reset() {
        let started = state.withLock { s -> [NewFollow] in
            s.name = nil
            s.library = nil
            s.version = .resp2
            s.transaction = nil
            s.unwatchAll()
            if !s.follows.isEmpty { s.followsEnded = true }
            s.follows.removeAll()
            defer { s.newFollows.removeAll() }
            return s.newFollows
        }
        for follow in started { follow.start.feed.removeFollower() }
    }

    /// Whether the client asked to close (QUIT): nothing it sent after that runs.
    public var closeRequested: Bool { state.withLock { $0.closeRequested } }

    /// Marks the session as closing after the reply being made (QUIT).
    func requestClose() { state.withLock { $0.closeRequested = true } }

    /// Whether the connection follows changes (a CHANGES was taken or is being taken, and no
    /// RESET came since): then, on RESP2, it accepts only the commands flagged
    /// ``CommandFlags/allowedWhileFollowing``.
    public var isFollowing: Bool { state.withLock { !$0.follows.isEmpty } }

    /// The most namespace-and-prefix pairs one connection follows at once: each is a follower
    /// the server serves every change of its namespace to (a few KiB, and work per change).
    public static let maximumFollows = 1024

    /// What claiming a follow found (``reserveFollow(_:)``).
    enum FollowClaim: Equatable {
        /// Claimed: the CHANGES may start.
        case claimed
        /// The connection already follows this namespace and prefix.
        case alreadyFollowed
        /// The connection follows ``ClientSession/maximumFollows`` already.
        case tooMany
    }

    /// Claims `key` for a CHANGES about to start, unless the connection follows it already or
    /// follows ``maximumFollows`` pairs.
    func reserveFollow(_ key: FollowKey) -> FollowClaim {
        state.withLock { s in
            guard !s.follows.contains(key) else { return .alreadyFollowed }
            guard s.follows.count < Self.maximumFollows else { return .tooMany }
            s.follows.insert(key)
            return .claimed
        }
    }

    /// Gives back a claim whose CHANGES was refused.
    func releaseFollow(_ key: FollowKey) {
        state.withLock { _ = $0.follows.remove(key) }
    }

    /// Hands a started follow to the event loop, which takes it after the CHANGES reply.
    func addFollow(_ follow: NewFollow) {
        state.withLock { $0.newFollows.append(follow) }
    }

    /// Notes that the connection writes ephemeral keys in `namespace` (before it writes them, so
    /// that the end of the session finds them).
    func noteOwnedKeys(in namespace: String) {
        state.withLock { s in
            guard s.lastOwnedIn != namespace else { return }
            s.ownedIn.insert(namespace)
            s.lastOwnedIn = namespace
        }
    }

    /// The namespaces in which the connection wrote ephemeral keys, once (its end releases them).
    func takeOwnedNamespaces() -> Set<String> {
        state.withLock { s in
            defer { s.ownedIn.removeAll(); s.lastOwnedIn = nil }
            return s.ownedIn
        }
    }

    /// The follows started since the last call (the event loop serves them from now on).
    func takeNewFollows() -> [NewFollow] {
        state.withLock { s in
            defer { s.newFollows.removeAll() }
            return s.newFollows
        }
    }

    /// For the event loop, once it has a batch's replies: whether RESET ended the follows it
    /// serves (it stops them), and the follows started since (it serves them from now on).
    /// One lock for both, as it asks after every batch.
    func takeFollowChanges() -> (ended: Bool, started: [NewFollow]) {
        state.withLock { s in
            defer {
                s.followsEnded = false
                s.newFollows.removeAll()
            }
            return (s.followsEnded, s.newFollows)
        }
    }
}

/// What a client library says of itself (Redis's CLIENT SETINFO), shown by CLIENT INFO.
struct LibraryInfo: Sendable, Equatable {
    var name = ""
    var version = ""
}

/// What a CHANGES follows: a namespace, and a key prefix within it.
struct FollowKey: Hashable, Sendable {
    let namespace: String
    let prefix: [UInt8]
}

/// A CHANGES that started: what it follows and where the store says it starts.
struct NewFollow: Sendable {
    let key: FollowKey
    let start: FollowStart
}
