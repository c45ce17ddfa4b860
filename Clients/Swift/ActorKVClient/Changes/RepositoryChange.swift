import ActorKVProtocol

/// One item that a change wrote, as a ``RemoteRepository`` sees it: the item saved under `id`,
/// or nil if the change deleted it.
public struct RepositoryItemChange<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// The item's id, decoded from its key.
    public var id: T.ID
    /// The item as saved, or nil if it was deleted.
    public var item: T?

    /// An item change with the given contents.
    public init(id: T.ID, item: T?) {
        self.id = id
        self.item = item
    }
}

extension RepositoryItemChange: Equatable where T: Equatable {}

/// What ``RemoteRepository/changes(prefix:from:reconnect:)`` delivers: ``ChangeEvent``s with
/// the keys decoded as ids and the values as items.
public enum RepositoryChange<T: Codable & Identifiable & Sendable>: Sendable where T.ID: RepositoryKey {
    /// One page of the snapshot (see ``SnapshotPage``): items in key order as of `sequence`.
    case snapshot(sequence: UInt64, items: [T], isFirst: Bool)
    /// One write: the items it saved, and the ids it deleted (with a nil item), in its order.
    case change(sequence: UInt64, items: [RepositoryItemChange<T>])
    /// Caught up through `sequence` (see ``ChangeEvent/synced(_:)``).
    case synced(sequence: UInt64)
}

extension RepositoryChange: Equatable where T: Equatable {}

/// A repository's changes, decoded: made by ``RemoteRepository/changes(prefix:from:reconnect:)``.
public struct RepositoryChangeSequence<T: Codable & Identifiable & Sendable>: AsyncSequence, Sendable where T.ID: RepositoryKey {
    /// A page of items, a write's items, or the caught-up marker.
    public typealias Element = RepositoryChange<T>
    /// The error that ends an iteration.
    public typealias Failure = ActorKVError

    let repository: RemoteRepository<T>
    let changes: ChangeStream

    /// An iterator with a follow of its own (see ``ChangeStream``).
    public func makeAsyncIterator() -> Iterator {
        Iterator(repository: repository, base: changes.makeAsyncIterator())
    }

    /// Decodes the events of one follow.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A page of items, a write's items, or the caught-up marker.
        public typealias Element = RepositoryChange<T>
        /// The error that ends the iteration.
        public typealias Failure = ActorKVError

        let repository: RemoteRepository<T>
        var base: ChangeStream.Iterator

        /// The next event, decoded; nil once the task is cancelled. Throws what
        /// ``ChangeStream/Iterator/next()`` throws, and
        /// ``ActorKVError/decodingFailed(namespace:key:reason:)`` for a key that is not an id's
        /// key, a value that is not an item, or an item stored under a key that is not its id's
        /// (see ``RemoteRepository``).
        ///
        /// After `decodingFailed` the iterator is still usable: its `reason` ends with the
        /// sequence of the change (or snapshot) that held the key, and the next call to `next()`
        /// goes on with the event after it, passing that one over (all of it: a snapshot page's
        /// other items too, so a snapshot passed over is incomplete). A `for try await` loop ends
        /// at the error; to go past it, call `next()` on an iterator of your own, or follow
        /// again with `changes(from: .after(sequence))`.
        public mutating func next() async throws(ActorKVError) -> RepositoryChange<T>? {
            guard let event = try await base.next() else { return nil }
            do throws(ActorKVError) {
                return try decode(event)
            } catch .decodingFailed(let namespace, let key, let reason) {
                let place = switch event {
                case .snapshot(let page): "the snapshot at sequence \(page.sequence)"
                case .change(let change): "the change at sequence \(change.sequence)"
                case .synced(let synced): "the change at sequence \(synced)"
                }
                throw .decodingFailed(namespace: namespace, key: key, reason: "\(reason) (in \(place))")
            }
        }

        private func decode(_ event: ChangeEvent) throws(ActorKVError) -> RepositoryChange<T> {
            switch event {
            case .snapshot(let page):
                var items: [T] = []
                items.reserveCapacity(page.entries.count)
                for entry in page.entries { items.append(try repository.decode(entry.value, key: entry.key)) }
                return .snapshot(sequence: page.sequence, items: items, isFirst: page.isFirst)
            case .change(let change):
                var items: [RepositoryItemChange<T>] = []
                items.reserveCapacity(change.keys.count)
                for changed in change.keys {
                    if let value = changed.value {
                        let item = try repository.decode(value, key: changed.key)
                        items.append(RepositoryItemChange(id: item.id, item: item))
                    } else {
                        items.append(RepositoryItemChange(id: try repository.id(ofKey: changed.key), item: nil))
                    }
                }
                return .change(sequence: change.sequence, items: items)
            case .synced(let sequence):
                return .synced(sequence: sequence)
            }
        }

        /// The next event, decoded; see ``next()``.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ActorKVError) -> RepositoryChange<T>? {
            try await next()
        }
    }
}
