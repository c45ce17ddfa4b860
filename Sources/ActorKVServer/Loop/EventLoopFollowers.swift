#if canImport(Glibc)
import Glibc
#endif
import ActorKVProtocol
import ActorKVStore
import CActorKVSys
import Synchronization

/// The event loop's change feeds: the connections that follow namespaces (CHANGES), served
/// from the shared change tapes and from history within a per-turn budget, judged again when
/// the access rules change, and dropped with `-LAGGING` when they fall too far behind.
extension EventLoop {
    /// Notes that `namespace`'s feed has new deliverable changes; from any thread.
    func feedAdvanced(_ namespace: String) {
        let first = advancedFeeds.withLock { $0.insert(namespace).inserted && $0.count == 1 }
        feedWork.store(true, ordering: .releasing)
        if first && executor?.isLoopThread != true { wake() }
    }

    /// Moves on every connection that follows a namespace whose feed advanced. A connection
    /// that cannot take more output now is only checked for lagging: its turn comes when it
    /// reads.
    func serviceFeeds() {
        // Added to after its list: seen here false, it is set again once what was added can be
        // taken, and the thread that added it wakes the loop (or is the loop, and comes here).
        guard feedWork.exchange(false, ordering: .acquiringAndReleasing) else { return }
        drainHistoryReads()
        let advanced = advancedFeeds.withLock { set -> Set<String> in
            defer { set.removeAll(keepingCapacity: true) }
            return set
        }
        for namespace in advanced {
            tapeRound += 1
            notedTapes.removeAll(keepingCapacity: true)  // notes made between rounds
            defer { forgetTakenFromTapes() }
            for id in followersByNamespace[namespace] ?? FollowingConnections() {
                guard let c = connections[id] else { continue }
                if c.hasRoomForFollowers {
                    // A connection that only follows (nothing to read, run or send) is served
                    // without the rest of a pump, unless serving leaves it something to do.
                    if !draining && c.onlyFollows && !serviceFollowersWithinBudget(c) && !c.hasUnsentOutput { continue }
                    pump(c)
                } else if let lagging = c.followers.first(where: \.isLagging) {
                    drop(c, lagging.laggingReply(for: c.rights), lagging: lagging)
                }
            }
        }
    }

    /// Takes over the follows that the connection's CHANGES commands started, after stopping
    /// those a RESET ended. Called with a batch's replies queued and before any is sent: the
    /// followers stopped send nothing after them (what they sent or queued before goes first,
    /// in the protocol they were in, so the stream stays well framed). Returns false if the
    /// connection was cut off instead (rules reloaded since its CHANGES was judged are applied
    /// before anything is sent).
    func adoptFollows(_ c: Connection) -> Bool {
        let (ended, started) = c.session.takeFollowChanges()
        if ended { releaseFollowers(c) }
        for follow in started {
            nextFollowerID += 1
            c.followers.append(Follower(follow, id: nextFollowerID))
            followersByNamespace[follow.key.namespace, default: FollowingConnections()].insert(c.id)
        }
        return c.followers.isEmpty || !cutOffWithdrawnFollows(c)
    }

    // MARK: - Namespace permissions

    /// A reload asked for by SIGHUP is done here; after any reload (SIGHUP or `ACL LOAD`), the
    /// connections that follow changes are judged again: one that may no longer read a namespace
    /// it follows gets `-NOPERM` and is closed (requests are judged as they are parsed).
    func applyAccessChanges() {
        let reloadAsked = SignalHandling.takeReloadRequest()
        guard let access = processor.access else {
            if reloadAsked { log("SIGHUP: nothing to reload (no --acl file)") }
            return
        }
        if reloadAsked { _ = try? access.reload(for: .signal) }  // logged either way
        let now = access.generation
        guard now != judgedGeneration else { return }
        judgedGeneration = now
        for c in connections.values where !c.followers.isEmpty { cutOffWithdrawnFollows(c) }
    }

    /// Drops the connection if it follows a namespace it may no longer read; returns whether it did.
    @discardableResult
    private func cutOffWithdrawnFollows(_ c: Connection) -> Bool {
        guard let rights = c.rights, !c.closeAfterFlush else { return false }
        for follower in c.followers where !rights.rights(on: follower.key.namespace).contains(.read) {
            let denied = AccessControl.denied(.read, on: follower.key.namespace, for: rights.peer)
            drop(c, ErrorMapping.reply(for: denied), lagging: nil, reason: .accessWithdrawn)
            return true
        }
        return false
    }

    /// Starts a turn: renews the followers' budget, and first serves the connections put off
    /// in earlier turns, in the order they were put off, as many as the budget allows.
    func serviceDeferredFollowers() {
        followerTurns.startTurn()
        while let id = followerTurns.nextPutOff() {
            guard let c = connections[id] else { continue }
            c.followersDeferred = false
            pump(c)
        }
    }

    /// Serves the connection's followers if this turn's budget is not spent; otherwise they
    /// are put off, and served first in a later turn. Returns whether serving them again may
    /// queue more.
    func serviceFollowersWithinBudget(_ c: Connection) -> Bool {
        guard !followerTurns.isSpent else {
            if !c.followersDeferred {
                c.followersDeferred = true
                followerTurns.putOff(c.id)
            }
            return false
        }
        let (again, bytes) = serviceFollowers(c)
        followerTurns.charge(bytes: bytes)
        return again
    }

    /// Gives each follower of the connection a turn: sends its next messages from a tape or
    /// queues them (about ``followerTurnBytes``), or starts a read of history. Returns whether
    /// serving them again may queue more: replies were queued (to be encoded first), or a
    /// follower's share ran out; and the bytes given to them all. A follower that reached the
    /// end of its feed is not asked again this turn: its feed's next change wakes it
    /// (``serviceFeeds()``).
    private func serviceFollowers(_ c: Connection) -> (again: Bool, bytes: Int) {
        var again = false
        var total = 0
        for follower in c.followers {
            if follower.isLagging {
                drop(c, follower.laggingReply(for: c.rights), lagging: follower)
                return (true, total)
            }
            adoptTape(follower, on: c)
            var bytes = 0
            defer { total += bytes }
            turn: while true {
                guard bytes < Self.followerTurnBytes else {
                    again = true
                    break turn
                }
                if c.replies.isEmpty, let slice = follower.nextFromTape(maxBytes: Self.followerTurnBytes - bytes) {
                    // What the socket did not take is queued; flushing it learns whether it failed.
                    if !deliver(slice, of: follower.tape!, on: c) { again = true }
                    follower.feed.countSent(slice.messages)
                    bytes += slice.range.count
                    continue
                }
                switch follower.next() {
                case .messages(let messages):
                    guard !messages.isEmpty else { continue }
                    bytes += messages.reduce(0) { $0 + Self.size(of: $1) }
                    send(messages, of: follower, on: c)
                    again = true
                    // Queued replies must be sent before a tape's bytes are added after them.
                    break turn
                case .readHistory(let after, let through):
                    startHistoryRead(c, follower, after: after, through: through)
                    break turn
                case .lagging:
                    drop(c, follower.laggingReply(for: c.rights), lagging: follower)
                    return (true, total + bytes)
                case .failed(let error):
                    drop(c, ErrorMapping.reply(for: error), lagging: nil)
                    return (true, total + bytes)
                case .idle:
                    break turn
                }
            }
            noteTaken(by: follower)
        }
        return (again, total)
    }

    /// Notes on the follower's tape, once per round, that it has taken every change through its
    /// cursor.
    private func noteTaken(by follower: Follower) {
        guard let tape = follower.tape, let feed = follower.localFeed, follower.tapeRound != tapeRound else { return }
        follower.tapeRound = tapeRound
        if tape.noteTaken(through: follower.cursor, in: tapeRound) { notedTapes.append((tape, feed)) }
    }

    /// Ends a round: each tape noted in it forgets what all its users have taken, and when
    /// those users are all its feed's followers (whatever their prefixes and protocol
    /// versions), the feed lets go of the changes all of them have taken.
    private func forgetTakenFromTapes() {
        var feed: ChangeFeed?
        var users = 0
        var taken = UInt64.max
        var oneFeed = true
        for (tape, tapeFeed) in notedTapes {
            guard let through = tape.forgetTaken(in: tapeRound) else { continue }
            if let feed, feed !== tapeFeed { oneFeed = false }
            feed = tapeFeed
            users += tape.users
            taken = min(taken, through)
        }
        if oneFeed, let feed, users == feed.followers { feed.release(through: taken) }
        notedTapes.removeAll(keepingCapacity: true)
    }

    /// Sends a slice of a tape's bytes to the connection straight from the tape when nothing
    /// else waits to be sent, and queues what the socket does not take (a failed send is met
    /// again, and handled, when the queue is flushed). Returns whether the socket took them all.
    private func deliver(_ slice: ChangeTape.Slice, of tape: ChangeTape, on c: Connection) -> Bool {
        tape.withBytes(in: slice.range) { bytes in
            var sent = 0
            if !c.hasUnsentOutput, let taken = try? SocketCalls.send(c.fd, bytes) { sent = taken }
            guard sent < bytes.count else { return true }
            c.appendOutput(UnsafeRawBufferPointer(rebasing: bytes[sent...]))
            return false
        }
    }

    /// Gives a follower of the local engine the tape of its feed, prefix and the connection's
    /// protocol version (which HELLO may have changed since it last had one).
    private func adoptTape(_ follower: Follower, on c: Connection) {
        guard follower.canUseTape, follower.tape?.version != c.replies.version, let feed = follower.localFeed else { return }
        if let old = follower.tape { changeTapes.release(old, feed: ObjectIdentifier(feed)) }
        follower.tape = changeTapes.adopt(feed: feed, prefix: follower.key.prefix, version: c.replies.version, cursor: follower.cursor)
    }

    /// Queues a follower's messages on its connection, counting them for INFO.
    private func send(_ messages: [Reply], of follower: Follower, on c: Connection) {
        follower.feed.countSent(messages.count)
        c.enqueue(messages)
    }

    /// About how many bytes a message takes on the wire (for sharing turns, not for limits).
    private static func size(of message: Reply) -> Int {
        switch message {
        case .array(let elements), .map(let elements), .push(let elements), .pairs(let elements): return elements.reduce(8) { $0 + size(of: $1) }
        case .switching(_, let inner): return size(of: inner)
        case .bulk(let bytes): return bytes.count + 8
        case .bulks(let strings, _): return strings.encodedSize + 8
        case .simple, .error, .integer, .null, .nullArray, .double, .boolean, .nothing: return 24
        }
    }

    /// Reads the follower's history from the log files off the loop; the result comes back
    /// through ``historyReads``.
    private func startHistoryRead(_ c: Connection, _ follower: Follower, after: UInt64, through: UInt64) {
        guard let namespace = follower.source else { return }
        follower.readingHistory = true
        let (connection, id, position) = (c.id, follower.id, follower.historyPosition)
        Task(executorPreference: executor) {
            let result: Result<ChangeHistory.Chunk, StoreError>
            do throws(StoreError) {
                result = .success(try await namespace.readHistory(after: after, through: through, maxBytes: Self.historyReadBytes, from: position))
            } catch {
                result = .failure(error)
            }
            self.historyReads.withLock { $0.append(HistoryRead(connection: connection, follower: id, result: result)) }
            self.feedWork.store(true, ordering: .releasing)
            if self.executor?.isLoopThread != true { self.wake() }
        }
    }

    /// Hands finished reads of history to their followers.
    private func drainHistoryReads() {
        let reads = historyReads.withLock { reads -> [HistoryRead] in
            defer { reads.removeAll() }
            return reads
        }
        for read in reads {
            guard let c = connections[read.connection],
                  let follower = c.followers.first(where: { $0.id == read.follower }) else { continue }
            follower.readingHistory = false
            switch read.result {
            case .success(let chunk):
                follower.historyPosition = chunk.next
                send(follower.take(chunk.changes), of: follower, on: c)
                pump(c)
            case .failure(let error) where error.code == .compacted:
                drop(c, follower.laggingReply(for: c.rights), lagging: follower)
            case .failure(let error):
                drop(c, ErrorMapping.reply(for: error), lagging: nil)
            }
        }
    }

    /// Ends a following connection that cannot go on: stops its follows, queues `reply` after
    /// what is queued, and closes once that is sent (or at a deadline, if the peer never reads).
    private func drop(_ c: Connection, _ reply: Reply, lagging follower: Follower?, reason: SessionEnd = .lagging) {
        follower?.feed.countDropped()
        releaseFollowers(c)
        c.clearPending()
        c.enqueue([reply])
        c.close(afterFlushFor: reason)
        closingDeadlines[c.id] = monotonicSeconds() + Self.lastWordsSeconds
        pump(c)
    }

    /// Stops the connection's follows (it closes, was dropped, or sent RESET).
    func releaseFollowers(_ c: Connection) {
        for follower in c.followers {
            follower.feed.removeFollower()
            if let tape = follower.tape { changeTapes.release(tape, feed: ObjectIdentifier(follower.feed)) }
            let namespace = follower.key.namespace
            followersByNamespace[namespace]?.remove(c.id)
            if followersByNamespace[namespace]?.isEmpty == true { followersByNamespace[namespace] = nil }
        }
        c.followers.removeAll()
    }

    /// Closes connections whose last words (``drop(_:_:lagging:)``) were not read in time.
    func expireClosing() {
        guard !closingDeadlines.isEmpty else { return }
        let now = monotonicSeconds()
        for (id, deadline) in closingDeadlines where deadline < now {
            closingDeadlines[id] = nil
            if let c = connections[id] { closeConnection(c, reason: c.endReason ?? .lagging) }
        }
    }
}
