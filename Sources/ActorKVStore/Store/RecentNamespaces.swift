/// The last few namespaces that ``Store/executeNow(_:inNamespace:)`` ran, so that a turn finds
/// its namespace by comparing a name or two (the server hands the same `String` for a
/// connection's name each time: its bits compare equal at once) rather than hashing the name and
/// taking the registry's lock.
///
/// Sound without a lock because only the store's serial executor's thread touches it
/// (`executeNow` checks that first), and because an open namespace is never replaced in the
/// store's registry, and is dropped from it only on that thread, which forgets it here at once
/// (``forget(_:)``, as the namespace is removed): a remembered pair is right while remembered.
/// That registry also keeps each namespace alive, so they are held here unretained: a
/// namespace's reference count lives in a side table (it is referenced weakly elsewhere), where
/// every retain and release takes the runtime's slow path (2% of a lone GET's own CPU).
final class RecentNamespaces: @unchecked Sendable {
    /// How many are remembered: a few namespaces served in turn by a loop's clients.
    static let capacity = 4

    /// The names, most recently remembered first; `namespaces[i]` is `names[i]`'s.
    @exclusivity(unchecked) private var names: [String] = []
    @exclusivity(unchecked) private var namespaces: [Unmanaged<Namespace>] = []

    init() {
        names.reserveCapacity(Self.capacity)
        namespaces.reserveCapacity(Self.capacity)
    }

    /// The namespace remembered as `name`, if any, unretained (the store's registry holds it).
    func namespace(named name: String) -> Unmanaged<Namespace>? {
        for index in names.indices where names[index] == name { return namespaces[index] }
        return nil
    }

    /// Remembers `namespace`, which the store's registry holds, as `name`, forgetting the
    /// oldest once ``capacity`` are held.
    func remember(_ namespace: Namespace, as name: String) {
        if names.count == Self.capacity {
            names.removeLast()
            namespaces.removeLast()
        }
        names.insert(name, at: 0)
        namespaces.insert(.passUnretained(namespace), at: 0)
    }

    /// Forgets the namespace remembered as `name`, if any (it is being removed from the store's
    /// registry). On the store's serial executor's thread, as every use.
    func forget(_ name: String) {
        guard let index = names.firstIndex(of: name) else { return }
        names.remove(at: index)
        namespaces.remove(at: index)
    }
}
