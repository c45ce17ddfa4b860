#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A namespace's state as of one moment, taken for a backup (``Store/backup(to:)``): a
/// copy-on-write copy of its map and lifetimes and the last sequence they hold, written as a
/// snapshot off the actor while reads and writes go on.
struct NamespaceCopy: Sendable {
    /// The namespace's name.
    let name: String
    /// The map, handed to the writer's thread.
    let map: FrozenMap
    /// The keys' lifetimes (without the heap: only looked up).
    let lifetimes: KeyLifetimes
    /// The last sequence the copy holds: the snapshot's.
    let lastSequence: UInt64
    /// The namespace's own deadline (0: none).
    let deadline: UInt64
    /// The wall-clock milliseconds by which a key's deadline must have passed for the copy to
    /// leave it out (0: no key has a deadline).
    let expiredAt: UInt64
}

extension Namespace {
    /// This namespace's state now, for a backup.
    func copyForBackup() -> NamespaceCopy {
        NamespaceCopy(name: name, map: FrozenMap(data.map), lifetimes: data.lifetimes.frozen(), lastSequence: lastSequence,
                      deadline: data.deadline, expiredAt: data.lifetimes.hasDeadlines ? WallClock.milliseconds() : 0)
    }

    /// The state of every namespace that `namespaces` lists, asked in this job, as of one moment:
    /// each is copied in this one job, with no other job in between, so no write is in one copy
    /// without every write that was performed before it in another. Each of them must run on this
    /// namespace's executor (the store's ``StoreOptions/serialExecutor``); the check traps otherwise.
    func copyTogether(_ namespaces: @Sendable () -> [Namespace]) -> [NamespaceCopy] {
        namespaces().map { namespace in
            namespace === self ? copyForBackup() : namespace.assumeIsolated { $0.copyForBackup() }
        }
    }
}

extension Namespace {
    /// This namespace's state now, for a copy of it (``Store/copyNamespace(_:to:replacing:)``),
    /// if what it holds meets `condition` (checked in the same step); nil, and nothing done, if
    /// not. Its log is fsync'd then, so that the copy holds no write the namespace itself could
    /// still lose to a power loss.
    func copyForCopying(when condition: (LiveData) -> Bool) async throws(StoreError) -> NamespaceCopy? {
        guard condition(data) else { return nil }
        let copy = copyForBackup()
        let syncer = self.syncer
        try await BlockingIO.run { () throws(StoreError) in try syncer.syncNow() }
        return copy
    }
}
