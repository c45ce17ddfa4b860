/// A namespace's changes, made by ``ActorKVClient/changes(_:prefix:from:reconnect:)``: each
/// iteration follows them on a connection of its own, reconnecting and resuming as needed.
public struct ChangeStream: AsyncSequence, Sendable {
    /// A snapshot page, a change, or the caught-up marker.
    public typealias Element = ChangeEvent
    /// The error that ends an iteration.
    public typealias Failure = ActorKVError

    /// The namespace followed.
    public let namespace: String
    /// Only keys that start with these bytes (all keys when empty).
    public let prefix: [UInt8]
    /// Where an iteration starts.
    public let start: ChangeStart
    /// How an iteration reconnects.
    public let reconnect: ReconnectPolicy
    let socketPath: String
    let timeout: Duration?
    /// Whether `COMPACTED` starts a new snapshot rather than ending the iteration (for a mirror).
    let resnapshots: Bool

    /// An iterator with a follow of its own; its connection opens at the first ``Iterator/next()``.
    public func makeAsyncIterator() -> Iterator {
        let state = FollowState(namespace: namespace, prefix: prefix, start: start, resnapshots: resnapshots)
        return Iterator(handle: FollowHandle(ChangeFollower(path: socketPath, timeout: timeout, policy: reconnect, state: state)))
    }

    /// Hands out the events of one follow. Cancelling the task that waits in ``next()``, or
    /// dropping the iterator, closes its connection.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A snapshot page, a change, or the caught-up marker.
        public typealias Element = ChangeEvent
        /// The error that ends the iteration.
        public typealias Failure = ActorKVError

        private let handle: FollowHandle

        init(handle: FollowHandle) {
            self.handle = handle
        }

        /// The next event, waiting for it; nil once the task is cancelled (the connection is
        /// closed then). Throws the error that ends the follow (see
        /// ``ActorKVClient/changes(_:prefix:from:reconnect:)``); after it, returns nil.
        public mutating func next() async throws(ActorKVError) -> ChangeEvent? {
            try await handle.follower.next().get()
        }

        /// The next event; see ``next()``.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ActorKVError) -> ChangeEvent? {
            try await next()
        }
    }
}

/// Owned by one iterator: stops its follower (closing the connection) when the iterator goes.
final class FollowHandle: Sendable {
    let follower: ChangeFollower

    init(_ follower: ChangeFollower) {
        self.follower = follower
    }

    deinit {
        follower.stop()
    }
}
