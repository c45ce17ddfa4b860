#if canImport(Glibc)
import Glibc
#endif
import ActorKVProtocol
import ActorKVStore
import CActorKVSys
import Synchronization

/// The server's network loop: one thread, epoll (edge-triggered) over non-blocking sockets.
///
/// It accepts, reads and decodes requests, runs each turn's requests, and sends the replies. With
/// `--execution loop` (the default) the namespace actors run on its ``LoopExecutor``, so a turn's
/// data commands on an open namespace run right here, synchronously, and the rest in tasks whose
/// jobs also run here, between epoll turns; with `pool` a turn's requests go to one task on
/// Swift's cooperative pool, which posts the replies back through an eventfd. Either way the loop
/// never waits for fsync: it happens on other threads and delays only the clients waiting for it.
///
/// Its mutable state is `@exclusivity(unchecked)` (that of its ``ReactorRegistry`` too, but the
/// `jobs` and `thread` other threads use): only the loop thread touches it, one access at a
/// time, and the runtime's check of each access (a thread-local lookup) was 4% of the server's
/// own CPU at one request a turn, most of it for the timers and deadlines looked at every turn.
///
/// This file holds the turn and each connection's requests and replies; its other facets are
/// extensions in EventLoopAccepting.swift, EventLoopFollowers.swift (change feeds),
/// EventLoopLingering.swift and EventLoopReactor.swift (cluster mode's jobs and timers).
final class EventLoop: @unchecked Sendable {
    // Everything below except `completions`, `wakeSignal` and `stopRequested` is touched only by the loop thread.
    let epollFD: Int32
    /// The eventfd that wakes the loop (also written by the signal handler); never closed while written.
    let wakeSignal: WakeSignal
    let listener: Int32
    let configuration: ServerConfiguration
    let processor: CommandProcessor
    let statistics: ServerStatistics
    let log: @Sendable (String) -> Void
    @exclusivity(unchecked) var connections: [UInt64: Connection] = [:]
    /// Connections the server has finished with, half-closed, whose unread input is discarded
    /// until the peer closes or the deadline passes (a lingering close; see ``linger(_:id:)``).
    @exclusivity(unchecked) var lingering: [UInt64: (fd: Int32, deadline: Double)] = [:]
    @exclusivity(unchecked) private var ready: [UInt64] = []
    /// This turn's budget for serving followers, and the following connections put off to
    /// later turns for want of it.
    @exclusivity(unchecked) var followerTurns = FollowerTurns()
    @exclusivity(unchecked) var nextID: UInt64 = 16
    /// One read per connection per turn at most this big (as Redis does): it bounds how much work
    /// one client adds to a turn, and so how long the others wait for theirs.
    @exclusivity(unchecked) var readBuffer = [UInt8](repeating: 0, count: 16 * 1024)
    /// Whether this turn's first read of each connection peeks (``readChunk(_:decoding:peeking:)``),
    /// as ``peeksReads(events:waited:)`` decided when epoll answered.
    @exclusivity(unchecked) private var peekingTurn = false
    /// When this turn began (monotonic milliseconds, coarse): when the requests read in it came,
    /// for CLIENT LIST's `idle` (one clock reading a turn, not one a request).
    @exclusivity(unchecked) private var turnMilliseconds = monotonicMilliseconds(coarse: true)
    /// Connections that may hold peeked bytes (``Connection/peekedBytes``), all taken before
    /// the loop waits again.
    @exclusivity(unchecked) private var peekedConnections: [Connection] = []
    private let completions = Mutex<[CommandProcessor.Done]>([])
    @exclusivity(unchecked) private var outgoing: [CommandProcessor.Work] = []
    /// The replies a turn's work had ready at once, emptied: kept for the next turn's, so that
    /// a turn allocates no array for them.
    @exclusivity(unchecked) private var readyNow: [CommandProcessor.Done] = []
    /// Sessions whose connection closed while a command of theirs was still running: ended when
    /// its replies come back (or when the loop stops), so the hook runs after their last command.
    @exclusivity(unchecked) private var endedInFlight: [UInt64: (session: ClientSession, reason: SessionEnd)] = [:]
    /// How many sessions were ended only once their command in flight finished (for tests).
    let sessionsEndedAfterFlight = Atomic<Int>(0)
    /// Runs the namespace actors' work on this thread (nil with `--execution pool`).
    let executor: LoopExecutor?
    private let stopRequested = Atomic<Bool>(false)
    @exclusivity(unchecked) var draining = false
    /// A descriptor held in reserve for running out of them: see ``refuseForWantOfDescriptors()``.
    @exclusivity(unchecked) var reserveFD: Int32 = -1
    /// While the listener is out of epoll after accept failed: when to put it back.
    @exclusivity(unchecked) var acceptPausedUntil: Double?
    /// Connections refused since accept last succeeded; the shortage is logged when it starts.
    @exclusivity(unchecked) var refusedForDescriptors = 0
    /// The connections following each namespace's changes, in the order they connected.
    @exclusivity(unchecked) var followersByNamespace: [String: FollowingConnections] = [:]
    /// The last ``Follower/id`` given.
    @exclusivity(unchecked) var nextFollowerID: UInt64 = 0
    /// The ``AccessControl/generation`` whose rules the followers were last judged by.
    @exclusivity(unchecked) var judgedGeneration: UInt64 = 0
    /// Namespaces whose feeds have new deliverable changes; filled from any thread.
    let advancedFeeds = Mutex<Set<String>>([])
    /// Reads of change history that finished; filled from any thread.
    let historyReads = Mutex<[HistoryRead]>([])
    /// Set, after either list above is added to, until ``serviceFeeds()`` next takes both: a turn
    /// with nothing for followers takes neither lock (two per call, two calls a turn).
    let feedWork = Atomic<Bool>(false)
    /// Encoded change messages shared by followers of the local engine.
    @exclusivity(unchecked) var changeTapes: ChangeTapes
    /// The rounds in which the loop serves the followers of one namespace whose feed moved, and
    /// the tapes whose users were noted in the current one (``ChangeTape/noteTaken(through:in:)``),
    /// with their feeds.
    @exclusivity(unchecked) var tapeRound: UInt64 = 0
    @exclusivity(unchecked) var notedTapes: [(tape: ChangeTape, feed: ChangeFeed)] = []
    /// Connections closing after a last error (LAGGING) that a stalled peer may never read:
    /// closed at this deadline if still open.
    @exclusivity(unchecked) var closingDeadlines: [UInt64: Double] = [:]
    /// What the loop runs as cluster mode's ``ActorKVEtcd/Reactor`` (EventLoopReactor.swift).
    let reactor = ReactorRegistry()

    /// A finished read of history for one follower of one connection.
    struct HistoryRead: Sendable {
        let connection: UInt64
        /// The follower's ``Follower/id``: one stopped by RESET meanwhile is no longer found.
        let follower: UInt64
        let result: Result<ChangeHistory.Chunk, StoreError>
    }

    static let listenerToken: UInt64 = 1
    private static let wakeToken: UInt64 = 2
    private static let outputChunk = 64 * 1024
    private static let readsPerTurn = 16
    /// The commands a connection's pending list makes room for when it starts filling.
    private static let pendingCapacity = 16
    /// Reply entries (``Command/replyWeight``) one connection may have in flight.
    private static let replyBudget = 10_000
    /// Most room kept in ``readyNow`` between turns (a connection's entry each).
    private static let keptReady = 1024
    static let lingerSeconds = 2.0
    /// How long a connection dropped with `-LAGGING` has to read what was queued for it.
    static let lastWordsSeconds = 10.0
    /// About how many bytes of changes one follower is given per turn (then the others', and
    /// the socket, get theirs).
    static let followerTurnBytes = 64 * 1024
    /// Bytes of history read from the log files at a time for a follower catching up.
    static let historyReadBytes = 256 * 1024
    /// The most sockets lingering at once (``DescriptorBudget/lingering``).
    let lingeringLimit: Int

    init(listener: Int32, wakeSignal: WakeSignal, executor: LoopExecutor?, configuration: ServerConfiguration, processor: CommandProcessor,
         statistics: ServerStatistics, log: @escaping @Sendable (String) -> Void,
         lingeringLimit: Int = DescriptorBudget.lingeringWanted) throws(SocketCalls.Failure) {
        self.listener = listener
        self.lingeringLimit = lingeringLimit
        self.configuration = configuration
        changeTapes = ChangeTapes(byteBudget: configuration.changesLagBytes)
        self.processor = processor
        self.statistics = statistics
        self.log = log
        epollFD = actorkv_epoll_create()
        guard epollFD >= 0 else { throw SocketCalls.Failure(what: "epoll_create1", code: errno) }
        self.wakeSignal = wakeSignal
        self.executor = executor
        try register(listener, token: Self.listenerToken, events: ACTORKV_EPOLLIN)
        try register(wakeSignal.fd, token: Self.wakeToken, events: ACTORKV_EPOLLIN)
        reserveFD = SocketCalls.openReserve()
        processor.backend.changeListener.set { [weak self] namespace in self?.feedAdvanced(namespace) }
        processor.clients.setWake { wakeSignal.signal() }
        processor.shutdown.setWake { wakeSignal.signal() }
    }

    deinit { if reserveFD >= 0 { SocketCalls.close(reserveFD) } }

    /// Where the processor hands replies (``post(_:)``): made once, not a closure per turn.
    private lazy var deliverReplies: @Sendable ([CommandProcessor.Done]) -> Void = { [weak self] done in self?.post(done) }

    private func register(_ fd: Int32, token: UInt64, events: UInt32) throws(SocketCalls.Failure) {
        guard actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_ADD, fd, events, token) == 0 else {
            throw SocketCalls.Failure(what: "epoll_ctl", code: errno)
        }
    }

    /// Asks the loop to stop accepting, finish in-flight requests, flush replies and return.
    /// Safe from any thread, and from a signal handler's helper thread.
    func requestStop() {
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        wake()
    }

    func wake() { wakeSignal.signal() }

    /// Runs until a stop is requested and every connection is finished; blocks the calling thread.
    func run() {
        let capacity = 256
        let events = UnsafeMutableRawPointer.allocate(byteCount: actorkv_epoll_buffer_size(Int32(capacity)), alignment: 8)
        defer { events.deallocate() }
        var drainDeadline = 0.0
        executor?.attachToCurrentThread()
        startReactor()
        while true {
            serviceDeferredFollowers()
            let busy = !ready.isEmpty || !outgoing.isEmpty || executor?.hasPending == true || followerTurns.hasPutOff
            let timeout: Int32 = busy ? 0 : (draining || acceptPausedUntil != nil ? 50 : (lingering.isEmpty && closingDeadlines.isEmpty ? -1 : 250))
            takeAllPeeked()
            let n = actorkv_epoll_wait(epollFD, events, Int32(capacity), untilNextTimer(timeout))
            if n < 0 && errno != EINTR { log("epoll_wait failed: \(String(cString: strerror(errno)))"); break }
            turnMilliseconds = monotonicMilliseconds(coarse: true)
            // Without the loop's executor (`--execution pool`) replies come back from other
            // threads after the turn has taken its peeked bytes: peeking would gain nothing.
            peekingTurn = executor != nil && Self.peeksReads(events: Int(n), waited: timeout != 0)
            for i in 0..<max(0, Int(n)) {
                handle(token: actorkv_epoll_token(events, Int32(i)), flags: actorkv_epoll_flags(events, Int32(i)))
            }
            runDueTimers()
            serviceReady()
            settle()
            expireLingering(force: false)
            expireClosing()
            resumeAcceptingIfDue()
            if !draining && (stopRequested.load(ordering: .sequentiallyConsistent) || SignalHandling.received.load(ordering: .relaxed) != 0
                             || processor.shutdown.isRequested) {
                beginDrain()
                drainDeadline = monotonicSeconds() + configuration.shutdownGraceSeconds
            }
            if draining && connections.values.allSatisfy({ !$0.inFlight && !$0.hasUnsentOutput }) { break }
            if draining && monotonicSeconds() > drainDeadline {
                let busy = connections.values.filter { $0.inFlight || $0.hasUnsentOutput }.count
                log("shutting down: --shutdown-grace (\(configuration.shutdownGraceSeconds) s) ran out with \(busy) connection(s) "
                    + "still running requests or not reading their replies; closing them")
                break
            }
        }
        stopReactor()
        for connection in connections.values { closeConnection(connection, reason: .shutdown) }
        for (_, ended) in endedInFlight { processor.endSession(ended.session, reason: ended.reason) }
        endedInFlight.removeAll()
        executor?.detach()
        expireLingering(force: true)
        SocketCalls.close(epollFD)
    }

    private func handle(token: UInt64, flags: UInt32) {
        switch token {
        case Self.listenerToken: acceptAll()
        case Self.wakeToken:
            wakeSignal.drain()
            runReactorJobs()
            applyAccessChanges()
            closeKilled()
            drainCompletions()
            serviceFeeds()
        case ReactorRegistry.firstToken...:
            reactorEvent(token, flags: flags)
        default:
            guard let connection = connections[token] else { discardInput(token); return }
            if flags & (ACTORKV_EPOLLIN | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLHUP | ACTORKV_EPOLLERR) != 0 {
                connection.readable = true
            }
            if flags & (ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLHUP | ACTORKV_EPOLLERR) != 0 {
                connection.hangUpSeen = true
            }
            pump(connection)
        }
    }

    private func beginDrain() {
        draining = true
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_DEL, listener, 0, 0)
        let unread = connections.values.filter { !$0.inFlight && $0.hasUnsentOutput }.count
        log("shutting down: no longer accepting; finishing the requests in flight on \(connections.values.filter(\.inFlight).count) "
            + "connections and sending the replies \(unread) more have not read yet (for up to \(configuration.shutdownGraceSeconds) s: "
            + "--shutdown-grace), answering requests read but not started with -SHUTDOWN")
        for connection in connections.values {
            connection.close(afterFlushFor: .shutdown)
            pump(connection)
        }
    }

    /// Closes the connections CLIENT KILL named: at once, whatever they were doing (a command
    /// in flight finishes unanswered, then the session ends and releases what it held).
    private func closeKilled() {
        for id in processor.clients.takeKills() {
            if let connection = connections[id] { closeConnection(connection, reason: .killed) }
        }
    }

    // MARK: - Per connection

    /// Moves a connection forward as far as it can go without blocking.
    func pump(_ c: Connection) {
        var reads = 0
        while true {
            guard flush(c) else { return }
            if draining && !c.inFlight && !c.pending.isEmpty {
                refuseForShutdown(c)
            } else if c.canDispatch && !c.pending.isEmpty {
                dispatch(c)
            } else if c.canDispatch && c.undecoded && !draining {
                // Before the followers: requests a follower read ahead while its output was full
                // (a RESET, a PING) run at the next room, not after all the changes it is behind.
                decode(c, upTo: readBuffer.count)
            } else if !c.followers.isEmpty && c.hasRoomForFollowers && serviceFollowersWithinBudget(c) {
                continue
            } else if c.canDispatch && c.protocolError == nil && c.readable && !c.peerClosed && !draining {
                if reads == Self.readsPerTurn { ready.append(c.id); return }
                reads += 1
                guard readChunk(c, peeking: reads == 1 && peekingTurn && c.sendsOneAtATime) else { return }
            } else if c.canReadAhead && !draining {
                // Its replies wait for the client to read them: read on without running anything,
                // so that a client still writing its pipeline can finish and read them.
                if reads == Self.readsPerTurn { ready.append(c.id); return }
                reads += 1
                guard readChunk(c, decoding: false) else { return }
            } else {
                break
            }
        }
        if c.isIdle, let error = c.protocolError {
            c.protocolError = nil
            c.enqueue([error])
            c.close(afterFlushFor: .protocolError)
            guard flush(c) else { return }
        }
        if c.isIdle && c.peerClosed {
            closeConnection(c, reason: c.endReason ?? .peerClosed)
        } else if c.isIdle && c.closeAfterFlush {
            closeConnection(c, reason: c.endReason ?? .quit, lingering: true)
        }
    }

    /// Answers each request read but not started with `-SHUTDOWN`, after the replies before it:
    /// the client learns that they were not run rather than meeting the end of the stream.
    private func refuseForShutdown(_ c: Connection) {
        c.enqueue(Array(repeating: ErrorMapping.shuttingDown, count: c.pending.count))
        c.clearPending()
    }

    /// Reads one chunk and (with `decoding`) decodes the requests in it; false if the
    /// connection was closed.
    ///
    /// With `peeking`, the chunk is peeked at, not taken from the socket: taking a client's
    /// request gives its socket buffer room back, and the kernel then wakes a client thread
    /// asleep in a blocking read of its replies (redis-py's by default, the Swift client's)
    /// to find nothing yet: a wakeup of another CPU for nothing, a fifth of the server's CPU
    /// under ten clients spinning on a lock (`perf`: `read` → `unix_write_space` → a wakeup). Peeked
    /// bytes are taken once a reply is sent to the connection (``flush(_:)``), when the client
    /// is being woken anyway, or before its next read, or before the loop waits again. Only a
    /// busy turn peeks (``peeksReads(events:waited:)``), only its first read of a connection,
    /// and only of one whose last read held one request (``Connection/sendsOneAtATime``:
    /// peeking at a pipeline of 16 GETs cost 5% of their rate); a chunk that fills the buffer
    /// is taken at once (a client streaming requests is not waiting).
    private func readChunk(_ c: Connection, decoding: Bool = true, peeking: Bool = false) -> Bool {
        guard takePeeked(c) else { return false }
        let result: Int?
        do {
            result = try readBuffer.withUnsafeMutableBytes { (raw) throws(SocketCalls.Failure) in
                try SocketCalls.read(c.fd, into: raw, peeking: peeking)
            }
        } catch {
            closeConnection(c, reason: .socketError)
            return false
        }
        guard let n = result else { c.readable = false; return true }
        if n == 0 { c.peerClosed = true; return true }
        // A read that did not fill the buffer took everything the socket held: the next bytes
        // (or the peer's close) are a new epoll event, so no second read to meet EAGAIN. Once a
        // hang-up was reported, reads go on to meet the end of the stream.
        if n < readBuffer.count && !c.hangUpSeen { c.readable = false }
        readBuffer.withUnsafeBytes { c.decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        if peeking {
            c.peekedBytes = n
            peekedConnections.append(c)
            // A full buffer is a stream of requests, not one awaiting its reply: taken at once
            // (after the append above: taking reuses the read buffer).
            if n == readBuffer.count { guard takePeeked(c) else { return false } }
        }
        if decoding {
            let pendingBefore = c.pending.count
            decode(c, upTo: .max)
            c.sendsOneAtATime = c.pending.count - pendingBefore <= 1
        } else {
            c.undecoded = true
        }
        return true
    }

    /// Whether a turn peeks at requests rather than reading them (``readChunk(_:decoding:peeking:)``):
    /// when epoll reported two or more events, or the loop did not wait (work was ready), so
    /// other clients' work keeps the CPUs busy and a needless wakeup costs a context switch.
    /// A turn that woke for one event reads as before: a lone client's early wakeup is cheap
    /// then (on this project's 2-core VM, peeking there cost one client's locks a fifth of
    /// their rate: HOTPATHS.md round 51), and peeking would only add a system call.
    static func peeksReads(events: Int, waited: Bool) -> Bool {
        events >= 2 || !waited
    }

    /// Takes the connection's peeked bytes out of its socket (their requests were decoded when
    /// peeked); false if the connection was closed. A take that does not find them all closes
    /// the connection: nothing else reads its socket, so that cannot happen.
    private func takePeeked(_ c: Connection) -> Bool {
        let count = c.peekedBytes
        guard count > 0 else { return true }
        c.peekedBytes = 0
        let taken: Int?
        do {
            taken = try readBuffer.withUnsafeMutableBytes { (raw) throws(SocketCalls.Failure) in
                try SocketCalls.read(c.fd, into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<count]))
            }
        } catch {
            closeConnection(c, reason: .socketError)
            return false
        }
        guard taken == count else {
            log("connection \(c.id): \(taken ?? 0) of \(count) peeked bytes were left to take; closing it")
            closeConnection(c, reason: .socketError)
            return false
        }
        return true
    }

    /// Takes every peeked byte still in a socket, before the loop waits: left there, a peeked
    /// request would be peeked again after the next event.
    private func takeAllPeeked() {
        guard !peekedConnections.isEmpty else { return }
        for c in peekedConnections { _ = takePeeked(c) }
        peekedConnections.removeAll(keepingCapacity: true)
    }

    /// Decodes the complete requests buffered in the connection's decoder into its pending
    /// commands, stopping once about `limit` bytes were taken (a backlog read ahead is decoded a
    /// read's worth at a time, as if read then: ``Connection/undecoded`` says whether more may wait).
    private func decode(_ c: Connection, upTo limit: Int) {
        let start = c.decoder.bufferedByteCount
        c.undecoded = false
        var trace = CommandTrace.none, decoded = false
        // For CLIENT LIST: when the connection last sent a request, and which command.
        defer { if decoded { c.session.noteRequests(at: turnMilliseconds, lastCommand: trace) } }
        do {
            while let request = try c.decoder.nextRequest() {
                // Room for a typical pipeline at once, rather than growing 1, 2, 4, 8, 16 (each
                // step a new buffer and a copy) for every batch handed over.
                if c.pending.capacity == 0 { c.pending.reserveCapacity(Self.pendingCapacity) }
                c.appendPending(Command(parsing: request, rights: c.rights, names: c.namespaceNames, trace: &trace))
                decoded = true
                if start - c.decoder.bufferedByteCount >= limit { c.undecoded = true; return }
            }
        } catch {
            statistics.protocolErrors.add(1, ordering: .relaxed)
            c.protocolError = ErrorMapping.reply(for: error)
        }
    }

    /// Queues a connection's parsed commands; all queued this turn start together in
    /// ``startOutgoing()``. At most ``replyBudget`` reply entries' worth at a time (and always at
    /// least one request): the rest wait until these replies are sent, under the same backpressure
    /// as requests not yet read, so a few bytes of pipelined SCANs cannot build gigabytes of replies.
    private func dispatch(_ c: Connection) {
        var taken = c.pending.count
        if taken > 1 {
            var weight = 0
            for (index, command) in c.pending.enumerated() {
                weight += Self.replyWeight(of: command) { processor.backend.keyCountNow(inNamespace: $0) }
                if weight > Self.replyBudget && index > 0 { taken = index; break }
            }
        }
        statistics.commandsProcessed.add(taken, ordering: .relaxed)
        c.inFlight = true
        // A following connection's commands are checked one by one (only some are allowed); a
        // transaction read whole runs as one data command unless the connection watches a namespace.
        let plain = c.followers.isEmpty && !c.session.inTransaction
        if plain && taken == c.pending.count, let work = c.takePendingData() {
            outgoing.append(work)
            return
        }
        let (commands, namespace) = c.takePending(taken)
        outgoing.append(CommandProcessor.Work(session: c.session, commands: commands, namespace: plain ? namespace : nil,
                                              mergingTransaction: plain && namespace == nil && c.session.watchesNothing))
    }

    /// `command`'s ``Command/replyWeight``, but a read of a whole namespace (HGETALL, HKEYS, HVALS)
    /// weighs the keys the namespace holds now, plus one, when `keyCount` can tell at once (the
    /// local engine, the namespace open): so pipelined reads of small namespaces run together,
    /// where each would otherwise wait for the reply before it to be sent (a turn each), and one
    /// of a namespace larger than the budget still runs alone. The count is taken before the
    /// requests before it in the pipeline run: a bound of about the budget, not an exact one.
    static func replyWeight(of command: Command, keyCount: (String) -> Int?) -> Int {
        let weight = command.replyWeight
        guard weight == Command.wholeNamespaceWeight, case .data(let namespace, _, _) = command,
              let keys = keyCount(namespace) else { return weight }
        return keys + 1
    }

    /// Runs this turn's requests, from every connection (``CommandProcessor/start(batch:executor:deliver:)``),
    /// or, without a ``LoopExecutor``, hands them to one task.
    private func startOutgoing() {
        guard !outgoing.isEmpty else { return }
        var batch: [CommandProcessor.Work] = []
        swap(&batch, &outgoing)
        guard let executor else {
            let (processor, deliver) = (self.processor, deliverReplies)
            Task { await processor.process(batch: batch, deliver: deliver) }
            return
        }
        // Not copied out first: a copy of the processor retains (and then releases) each of its
        // references, every turn.
        var ready: [CommandProcessor.Done] = []
        swap(&ready, &readyNow)
        self.processor.start(batch: batch, executor: executor, deliver: deliverReplies, into: &ready)
        // Nothing kept the array itself: its buffer is reused for the next turn's work. (Nothing
        // `start` calls queues work; if that ever changes, the queued work must not be lost.)
        if outgoing.isEmpty {
            batch.removeAll(keepingCapacity: true)
            outgoing = batch
        }
        // The replies ready at once go to their connections here, not through the queue that
        // tasks post to (a lock taken twice, and the loop's weak reference loaded, per turn).
        complete(&ready)
        // Their replies were moved out: what is left is ids, kept as room for the next turn.
        ready.removeAll(keepingCapacityUpTo: Self.keptReady)
        readyNow = ready
    }

    /// Starts this turn's requests and, with a ``LoopExecutor``, runs them here and sends their
    /// replies. Requests read while sending (a client's next ones) wait for the next turn, which
    /// polls epoll without sleeping first, so every connection gets its turn.
    private func settle() {
        startOutgoing()
        guard let executor else { return }
        executor.runPending()
        drainCompletions()
        serviceFeeds()
    }

    /// Hands replies to the loop; from any thread. The loop thread itself drains them in
    /// ``settle()`` before it waits again, so only other threads wake it.
    private func post(_ done: [CommandProcessor.Done]) {
        let wasEmpty = completions.withLock { queue -> Bool in
            guard queue.isEmpty else {
                queue.append(contentsOf: done)
                return false
            }
            queue = done  // adopted, not copied into a new buffer
            return true
        }
        if wasEmpty && executor?.isLoopThread != true { wake() }
    }

    private func drainCompletions() {
        // Taking the array (not copying it and keeping its capacity) allocates nothing.
        var done = completions.withLock { queue -> [CommandProcessor.Done] in
            var taken: [CommandProcessor.Done] = []
            swap(&queue, &taken)
            return taken
        }
        complete(&done)
    }

    /// Hands each connection its replies (moved out of `done`) and moves it on.
    private func complete(_ done: inout [CommandProcessor.Done]) {
        for index in done.indices {
            guard let c = connections[done[index].connection] else {
                if let ended = endedInFlight.removeValue(forKey: done[index].connection) {
                    processor.endSession(ended.session, reason: ended.reason)
                    sessionsEndedAfterFlight.add(1, ordering: .relaxed)
                }
                continue
            }
            c.inFlight = false
            // Moved, not copied: the connection must own its replies alone, or clearing each
            // one as it is encoded would copy the whole array first.
            var replies: [Reply] = []
            swap(&replies, &done[index].replies)
            c.enqueue(consume replies)
            if done[index].quit {
                // Nothing read after QUIT is run or answered, a framing error included.
                c.clearPending()
                c.protocolError = nil
                c.close(afterFlushFor: .quit)
            }
            // A connection cut off (its rights withdrawn meanwhile) has been pumped, perhaps closed.
            guard adoptFollows(c) else { continue }
            pump(c)
        }
    }

    /// Sends what the socket takes, then encodes queued replies up to the output limit so the
    /// connection may read on; false if the connection was closed. While bytes are left unsent,
    /// epoll also reports the socket's writability (its next room is an event); once all are
    /// sent, it stops, so a peer reading replies does not wake the loop.
    private func flush(_ c: Connection) -> Bool {
        while c.hasUnsentOutput {
            c.encodeReplies(upTo: Self.outputChunk)
            let sent: Int
            do {
                sent = try c.output.withUnsafeBytes { (raw) throws(SocketCalls.Failure) in
                    try SocketCalls.send(c.fd, UnsafeRawBufferPointer(rebasing: raw[c.outputHead...]))
                }
            } catch {
                closeConnection(c, reason: .socketError)
                return false
            }
            if sent == 0 {
                c.encodeReplies(upTo: c.outputLimit)
                watchWritable(c, true)
                return true
            }
            c.outputHead += sent
            // The client is being woken for its reply: its peeked requests are taken now.
            guard takePeeked(c) else { return false }
        }
        watchWritable(c, false)
        return true
    }

    /// epoll's interest in a connection: always input and hang-up; writability only while
    /// output waits for room (edge-triggered, so arming it reports room that is already there).
    static let connectionEvents = ACTORKV_EPOLLIN | ACTORKV_EPOLLRDHUP | ACTORKV_EPOLLET

    private func watchWritable(_ c: Connection, _ watch: Bool) {
        guard c.watchesWritable != watch else { return }
        c.watchesWritable = watch
        _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_MOD, c.fd, Self.connectionEvents | (watch ? ACTORKV_EPOLLOUT : 0), c.id)
    }

    private func serviceReady() {
        guard !ready.isEmpty else { return }
        let ids = ready
        ready.removeAll()
        for id in ids { if let c = connections[id] { pump(c) } }
    }

    /// Forgets a connection and closes its socket, or with `lingering`, hands it to ``linger(_:id:)``,
    /// and ends its session (once its command in flight, if any, has finished).
    func closeConnection(_ c: Connection, reason: SessionEnd, lingering: Bool = false) {
        guard connections.removeValue(forKey: c.id) != nil else { return }
        processor.clients.remove(c.id)
        // Taken as if read: a socket closed with unread bytes in it reports ECONNRESET to its
        // peer (after the replies already sent) where it reported the end of the stream.
        _ = takePeeked(c)
        statistics.connectedClients.subtract(1, ordering: .relaxed)
        releaseFollowers(c)
        closingDeadlines[c.id] = nil
        if c.inFlight {
            endedInFlight[c.id] = (c.session, reason)
        } else {
            processor.endSession(c.session, reason: reason)
        }
        if processor.shutdown.isRequested && processor.shutdown.hold(c.fd, of: c.id) {
            // It asked for the shutdown: its socket is closed once the server has shut down.
            _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_DEL, c.fd, 0, 0)
        } else if lingering {
            _ = actorkv_epoll_ctl(epollFD, ACTORKV_EPOLL_CTL_DEL, c.fd, 0, 0)
            linger(c.fd, id: c.id)
        } else {
            SocketCalls.close(c.fd)
        }
    }
}

/// Seconds on a monotonic clock.
func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Milliseconds on the monotonic clock of ``monotonicSeconds()``; with `coarse`, its cheaper
/// reading, up to a few milliseconds behind (the kernel's last tick).
func monotonicMilliseconds(coarse: Bool = false) -> Int64 {
    var ts = timespec()
    clock_gettime(coarse ? CLOCK_MONOTONIC_COARSE : CLOCK_MONOTONIC, &ts)
    return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
}
