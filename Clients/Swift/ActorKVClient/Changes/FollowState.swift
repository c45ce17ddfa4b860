import ActorKVProtocol

/// What a follow has seen and what it asks for next: reads the messages of `CHANGES` (protocol.md)
/// and turns them into events, keeping the position to resume from. No I/O: the
/// ``ChangeFollower`` feeds it one reply at a time and acts on each ``Step``.
struct FollowState: Sendable {
    /// Where the current connection is in its stream.
    enum Phase: Sendable, Equatable {
        /// `CHANGES` was sent; its answer, the `changes` message, has not come yet.
        case awaitingHeader
        /// Receiving the pages of a snapshot at `sequence`; `pages` have come so far.
        case snapshot(sequence: UInt64, pages: Int)
        /// Receiving changes (and `synced`).
        case following
    }

    /// What to do after a reply.
    enum Step: Sendable, Equatable {
        /// Hand these events to the consumer (perhaps none).
        case deliver([ChangeEvent])
        /// Send ``request`` again on this connection (after `COMPACTED`, now asking for a snapshot).
        case resend
        /// End this connection and resume on a new one, after the reconnection delay.
        case reconnect(ActorKVError)
        /// End the follow with this error.
        case fail(ActorKVError)
    }

    let namespace: String
    let prefix: [UInt8]
    /// Whether `COMPACTED` (or a `FROM` after the namespace's last sequence) starts a new
    /// snapshot instead of failing.
    let resnapshots: Bool
    /// Every change through this sequence has been delivered, or passed over as outside the
    /// prefix: a new connection resumes with `FROM position`. Nil until the server has said
    /// where a stream that starts now begins.
    private(set) var position: UInt64?
    /// Whether the next `CHANGES` asks for a snapshot: one was asked for and is not complete.
    private(set) var needsSnapshot: Bool
    private(set) var phase = Phase.awaitingHeader
    private let namespaceBytes: [UInt8]

    init(namespace: String, prefix: [UInt8], start: ChangeStart, resnapshots: Bool) {
        self.namespace = namespace
        self.prefix = prefix
        self.resnapshots = resnapshots
        namespaceBytes = Array(namespace.utf8)
        switch start {
        case .now: needsSnapshot = false
        case .after(let sequence): needsSnapshot = false; position = sequence
        case .snapshot: needsSnapshot = true
        }
    }

    /// Whether the current connection has had the server's answer to its `CHANGES`.
    var isStreaming: Bool { phase != .awaitingHeader }

    /// The `CHANGES` to send on a new connection: from the snapshot if one is still needed, else
    /// after ``position``, else from now.
    var request: [[UInt8]] {
        var arguments = [Array("CHANGES".utf8), namespaceBytes]
        if !prefix.isEmpty { arguments += [Array("PREFIX".utf8), prefix] }
        if needsSnapshot {
            arguments.append(Array("SNAPSHOT".utf8))
        } else if let position {
            arguments += [Array("FROM".utf8), Array(String(position).utf8)]
        }
        return arguments
    }

    /// A new connection is about to send ``request``.
    mutating func connectionStarted() {
        phase = .awaitingHeader
    }

    /// Reads one reply of the server.
    mutating func handle(_ reply: Reply) -> Step {
        switch reply {
        case .error(let text):
            return handleError(text)
        case .array(let parts) where parts.count == 3 || parts.count == 4:
            guard case .bulk(let kind) = parts[0], case .bulk(let name) = parts[1],
                  case .integer(let number) = parts[2], number >= 0 else { break }
            guard name == namespaceBytes else {
                return violation("a message about namespace '\(String(decoding: name, as: UTF8.self))' on a stream of '\(namespace)'")
            }
            let sequence = UInt64(number)
            switch (String(decoding: kind, as: UTF8.self), parts.count) {
            case ("changes", 3): return header(sequence)
            case ("snapshot", 4): return snapshotPage(sequence, parts[3])
            case ("change", 4): return change(sequence, parts[3])
            case ("synced", 3): return synced(sequence)
            default: break
            }
        default:
            break
        }
        return violation("unexpected message on a change stream: \(ActorKVClient.unexpected(reply, for: "CHANGES"))")
    }

    private mutating func header(_ sequence: UInt64) -> Step {
        guard phase == .awaitingHeader else { return violation("a second 'changes' message on one connection") }
        if needsSnapshot {
            phase = .snapshot(sequence: sequence, pages: 0)
            return .deliver([])
        }
        // FROM 0 (nothing seen yet) starts where the namespace's life began, which a name used
        // again after a removal numbers after the removal's change.
        if let position, position != sequence, position != 0 {
            return violation("asked for the changes after \(position), the server starts after \(sequence)")
        }
        position = sequence
        phase = .following
        return .deliver([])
    }

    private mutating func snapshotPage(_ sequence: UInt64, _ payload: Reply) -> Step {
        guard case .snapshot(let at, let pages) = phase, at == sequence else {
            return violation("a 'snapshot' message at sequence \(sequence) outside the snapshot asked for")
        }
        guard case .array(let flat) = payload, flat.count % 2 == 0 else { return violation("a malformed 'snapshot' message") }
        var entries: [ScanEntry] = []
        entries.reserveCapacity(flat.count / 2)
        var i = 0
        while i < flat.count {
            guard case .bulk(let key) = flat[i], case .bulk(let value) = flat[i + 1] else {
                return violation("a 'snapshot' message whose pairs are not two bulk strings")
            }
            entries.append(ScanEntry(key: key, value: value))
            i += 2
        }
        phase = .snapshot(sequence: at, pages: pages + 1)
        return .deliver([.snapshot(SnapshotPage(sequence: at, entries: entries, isFirst: pages == 0))])
    }

    private mutating func change(_ sequence: UInt64, _ payload: Reply) -> Step {
        endSnapshot()
        guard phase == .following, let position else { return violation("a 'change' message before the stream's start") }
        guard sequence > position else {
            return violation("change \(sequence) after change \(position) (changes come once, in order)")
        }
        guard case .array(let flat) = payload, flat.count % 2 == 0, !flat.isEmpty else {
            return violation("a malformed 'change' message")
        }
        var keys: [ChangedKey] = []
        keys.reserveCapacity(flat.count / 2)
        var i = 0
        while i < flat.count {
            guard case .bulk(let key) = flat[i] else { return violation("a 'change' message with a key that is not a bulk string") }
            switch flat[i + 1] {
            case .bulk(let value): keys.append(ChangedKey(key: key, value: value))
            case .null: keys.append(ChangedKey(key: key, value: nil))
            default: return violation("a 'change' message with a value that is neither a bulk string nor null")
            }
            i += 2
        }
        self.position = sequence
        return .deliver([.change(ChangeRecord(sequence: sequence, namespace: namespace, keys: keys))])
    }

    private mutating func synced(_ sequence: UInt64) -> Step {
        endSnapshot()
        guard phase == .following, let position else { return violation("a 'synced' message before the stream's start") }
        guard sequence >= position else { return violation("synced at \(sequence) after change \(position)") }
        self.position = sequence
        return .deliver([.synced(sequence)])
    }

    /// The first message after the snapshot's pages completes it: the stream is at its sequence.
    private mutating func endSnapshot() {
        guard case .snapshot(let sequence, _) = phase else { return }
        position = sequence
        needsSnapshot = false
        phase = .following
    }

    private mutating func handleError(_ text: String) -> Step {
        let error = ActorKVError.fromErrorReply(text)
        guard case .server(let code, let message) = error else { return .fail(error) }
        switch WireErrorCode(rawValue: code) {
        case .compacted?:
            if resnapshots { return startSnapshotAgain() }
            let oldest = message.split(separator: " ").last.flatMap { UInt64($0) } ?? 0
            return .fail(.compacted(namespace: namespace, requested: position ?? 0, oldestAvailable: oldest))
        case .err? where message.hasPrefix("FROM sequence ") && message.contains("is after the last sequence"):
            // The server never wrote the changes this stream has seen (its data was replaced).
            return resnapshots ? startSnapshotAgain() : .fail(error)
        case .lagging?, .shutdown?, .unavailable?:
            // Dropped for falling behind, the server is stopping, or (cluster mode) the agent
            // lost etcd or cannot reach it yet: resume on a new connection.
            return .reconnect(.connectionLost("the server ended the change stream: \(text)"))
        case .noPerm?:
            // The read right is missing (never given, or withdrawn by a reload, after which the
            // server closes the stream): a new connection would be refused the same way.
            return .fail(error)
        default:
            return .fail(error)
        }
    }

    private mutating func startSnapshotAgain() -> Step {
        needsSnapshot = true
        phase = .awaitingHeader
        return .resend
    }

    private func violation(_ reason: String) -> Step {
        .fail(.protocolViolation(reason))
    }
}
