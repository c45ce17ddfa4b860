import ActorKVProtocol

/// One client connection's state. Owned by the event loop thread; never shared.
///
/// Bytes flow: socket → `decoder` → `pending` commands (each request parsed once, as it is
/// decoded) → (one task at a time) the processor →
/// `replies` → encoded into `output` a piece at a time as the socket drains (a large reply is
/// never copied into `output` whole). Only one batch of requests is in
/// flight per connection, so pipelined commands run and reply in order. Requests run while the
/// unread replies fit in `outputLimit`; past it, none run until the client reads (backpressure),
/// but their bytes are still read, undecoded, up to `inputAllowance`: a client that writes its
/// whole pipeline before reading any reply (redis-py's and ruby-redis's pipelines do) gets to
/// finish writing and so to read, where refusing to read would leave both sides waiting on each
/// other. Memory stays bounded however the client behaves: `outputLimit` plus `inputAllowance`.
///
/// Its mutable state is `@exclusivity(unchecked)`: only the loop thread touches a connection, one
/// access at a time (no property is passed `inout` to code that reaches it again), so Swift's
/// run-time exclusivity check on each access only cost time (about 5% of a request's CPU at
/// `redis-benchmark -c 10 -P 1`: the pump reads several of these per step).
final class Connection {
    let id: UInt64
    let fd: Int32
    /// What the connection is beyond its bytes; ended exactly once when the connection closes.
    let session: ClientSession
    /// Why the connection will close once everything queued is sent (see ``closeAfterFlush``).
    @exclusivity(unchecked) var endReason: SessionEnd?
    /// Encoded, unsent reply bytes beyond which no more requests are taken.
    let outputLimit: Int
    /// Request bytes read but not yet run beyond which nothing more is read while requests wait
    /// for the client to read its replies.
    let inputAllowance: Int
    @exclusivity(unchecked) var decoder: RequestDecoder
    /// Bytes were read into `decoder` and not decoded (read while requests could not run), or a
    /// decoding pass stopped early: complete requests may wait there.
    @exclusivity(unchecked) var undecoded = false
    @exclusivity(unchecked) var pending: [Command] = []
    /// The last namespace name its requests gave, for parsing the next ones.
    let namespaceNames = NamespaceNames()
    /// The namespace every pending command is a data command on, noted as each is parsed (nil:
    /// none pending, or they are not all such): that work is merged with other connections'.
    @exclusivity(unchecked) var pendingNamespace: String?
    /// Whether a pending command is not a data command on ``pendingNamespace``.
    @exclusivity(unchecked) var pendingMixed = false
    /// Replies not yet encoded into `output`, a large one perhaps partly.
    @exclusivity(unchecked) var replies = ReplyStream()
    @exclusivity(unchecked) var output: [UInt8] = []
    @exclusivity(unchecked) var outputHead = 0
    /// Bytes at the head of the socket already read by peeking (and decoded), still to be taken
    /// from it: after the next reply is sent, before the next read, and before the loop waits
    /// again at the latest (`EventLoop`'s `readChunk` says why).
    @exclusivity(unchecked) var peekedBytes = 0
    /// Its last read held at most one request: a client that waits for each reply, whose next
    /// read a busy turn peeks at (a pipelining client gains nothing from it but a system call).
    @exclusivity(unchecked) var sendsOneAtATime = true
    @exclusivity(unchecked) var inFlight = false
    /// Edge-triggered epoll: true until a read says there is nothing more.
    @exclusivity(unchecked) var readable = true
    /// epoll reported a hang-up (the peer closed or half-closed): reads go on until they meet
    /// the end of the stream, as a short read no longer means that more will be an event.
    @exclusivity(unchecked) var hangUpSeen = false
    /// The peer sent EOF (it may still read our replies: `nc -N` half-closes).
    @exclusivity(unchecked) var peerClosed = false
    /// Close once everything queued is sent (QUIT, a framing error, shutdown).
    @exclusivity(unchecked) var closeAfterFlush = false
    /// A framing error to send after the replies to the requests before it.
    @exclusivity(unchecked) var protocolError: Reply?
    /// The change feeds this connection follows (CHANGES), in the order they were taken.
    @exclusivity(unchecked) var followers: [Follower] = []
    /// Its followers wait for the next turn's budget (it is in the loop's list of them).
    @exclusivity(unchecked) var followersDeferred = false
    /// epoll reports the socket's writability: only while output waits for room (see
    /// ``EventLoop``'s `flush`), as otherwise every read by the peer would be an event.
    @exclusivity(unchecked) var watchesWritable = false
    /// Its namespace rights, which judge each request as it is parsed; nil when every request
    /// may run (no `--acl`, or the server's own uid).
    let rights: ConnectionRights?

    init(session: ClientSession, fd: Int32, limits: ProtocolLimits, outputLimit: Int, rights: ConnectionRights? = nil) {
        self.id = session.id
        self.session = session
        self.fd = fd
        self.outputLimit = outputLimit
        inputAllowance = limits.maxRequestBytes
        self.rights = rights
        decoder = RequestDecoder(limits: limits)
    }

    /// Whether replies are waiting to be encoded or sent.
    var hasUnsentOutput: Bool { !replies.isEmpty || outputHead < output.count }

    /// Whether this connection may take more requests now: nothing in flight, every reply encoded,
    /// and the unsent bytes under the limit.
    var canDispatch: Bool {
        !inFlight && !closeAfterFlush && replies.isEmpty && output.count - outputHead < outputLimit
    }

    /// Whether requests may be read (not decoded) while they cannot run: the client has not read
    /// its replies, and the bytes waiting are under ``inputAllowance``.
    var canReadAhead: Bool {
        !inFlight && !closeAfterFlush && protocolError == nil && readable && !peerClosed
            && decoder.bufferedByteCount < inputAllowance
    }

    /// Whether followers may queue more: every reply encoded and the unsent bytes under the limit.
    var hasRoomForFollowers: Bool {
        !closeAfterFlush && replies.isEmpty && output.count - outputHead < outputLimit
    }

    /// Whether the connection waits on nothing but its followers: no request to read, parse or
    /// run, no error to report, not closing.
    var onlyFollows: Bool {
        !readable && !peerClosed && !inFlight && pending.isEmpty && !undecoded && protocolError == nil && !closeAfterFlush
    }

    /// Whether nothing is left to do before closing.
    var isIdle: Bool { !inFlight && pending.isEmpty && !undecoded && !hasUnsentOutput }

    /// Queues a parsed command (bound to this connection's session: see ``Command/bound(to:)``),
    /// noting whether the pending ones can still be merged.
    func appendPending(_ command: consuming Command) {
        if command.isOwned { command = command.bound(to: session) }
        if !pendingMixed {
            if let namespace = command.dataNamespace, pendingNamespace == nil || pendingNamespace == namespace {
                pendingNamespace = namespace
            } else {
                pendingMixed = true
            }
        }
        pending.append(command)
    }

    /// Takes the first `count` pending commands, and the namespace they are all data commands
    /// on, if they are.
    func takePending(_ count: Int) -> (commands: [Command], namespace: String?) {
        let namespace = pendingMixed ? nil : pendingNamespace
        guard count < pending.count else {
            var taken: [Command] = []
            swap(&taken, &pending)
            pendingNamespace = nil
            pendingMixed = false
            return (taken, namespace)
        }
        // The rest keep what was noted: still one namespace's, or (if mixed) handled one by one.
        let taken = Array(pending[..<count])
        pending.removeFirst(count)
        return (taken, namespace)
    }

    /// Makes one unit of work of every pending command if they are all data commands on one
    /// namespace (nil otherwise, and nothing is taken). They are moved out of ``pending`` in
    /// place, which keeps its room (up to ``keptPendingCapacity`` commands) for the next
    /// turn's: a connection's turn then allocates no array for its commands and frees none
    /// (the free alone was 5% of the server's own CPU for one client's GET).
    func takePendingData() -> CommandProcessor.Work? {
        guard !pendingMixed, let namespace = pendingNamespace else { return nil }
        let work = CommandProcessor.Work(session: session, draining: &pending, namespace: namespace)
        pending.removeAll(keepingCapacityUpTo: Self.keptPendingCapacity)
        pendingNamespace = nil
        return work
    }

    /// Pending commands whose room a connection keeps between turns.
    static let keptPendingCapacity = 256

    /// Drops every pending command (after QUIT, or answered with -SHUTDOWN).
    func clearPending() {
        pending.removeAll()
        pendingNamespace = nil
        pendingMixed = false
    }

    /// Sends what is queued, then closes, for `reason` (an earlier reason stands).
    func close(afterFlushFor reason: SessionEnd) {
        closeAfterFlush = true
        if endReason == nil { endReason = reason }
    }

    /// Queues replies to be sent in order.
    func enqueue(_ new: consuming [Reply]) {
        replies.append(contentsOf: new)
    }

    /// Output buffer capacity kept between bursts; larger buffers are freed once sent.
    private static let retainedCapacity = 256 * 1024

    /// Encodes queued replies into `output` until about `chunk` bytes are waiting (a large bulk
    /// is cut there and continued on a later call).
    func encodeReplies(upTo chunk: Int) {
        reclaimSentOutput()
        replies.encode(into: &output, upTo: outputHead + chunk)
    }

    /// Appends bytes already encoded (a follower's messages copied from a tape) after what is
    /// waiting; only when no reply is queued, which would have to go first.
    func appendOutput(_ bytes: UnsafeRawBufferPointer) {
        precondition(replies.isEmpty, "encoded bytes would overtake queued replies")
        reclaimSentOutput()
        output.append(contentsOf: bytes)
    }

    /// Frees the sent front of `output` when that is cheap: all of it was sent, or at least half.
    private func reclaimSentOutput() {
        if outputHead == output.count {
            output.removeAll(keepingCapacity: output.capacity <= Self.retainedCapacity)
            outputHead = 0
        } else if outputHead >= output.count / 2 {
            output.removeFirst(outputHead)
            outputHead = 0
        }
    }
}
