#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// What a store's namespaces need for as long as any of them is in use, also after the ``Store``
/// object itself is gone: the data directory's lock, and the once-a-second background work (the
/// `everysec` fsync, the periodic compaction check).
///
/// The store and each of its namespaces hold the housekeeper; it holds the namespaces only
/// weakly. So code that keeps a `Namespace` or a `Repository` and lets the store go still has
/// its directory locked (a second store on it gets `locked` instead of appending to the same log)
/// and its writes fsync'd in the background. ``Store/close()`` stops the work and releases the
/// lock; without it, both end when the store and the last of its namespaces are freed.
final class Housekeeper: Sendable {
    private struct State {
        var namespaces: [Weak] = []
        var ticks: Task<Void, Never>?
        var stopped = false
    }

    private final class Weak: Sendable {
        nonisolated(unsafe) weak var namespace: Namespace?
        init(_ namespace: Namespace) { self.namespace = namespace }
    }

    private let state = Mutex(State())
    private let lock: DirectoryLock
    private let everysec: Bool

    init(lock: DirectoryLock, everysec: Bool) {
        self.lock = lock
        self.everysec = everysec
    }

    /// Looks after `namespace` from now on, starting the ticks if they are not running (and the
    /// store is not closed).
    func adopt(_ namespace: Namespace) {
        state.withLock { s in
            s.namespaces.removeAll { $0.namespace == nil }
            s.namespaces.append(Weak(namespace))
            guard s.ticks == nil, !s.stopped else { return }
            s.ticks = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(nanoseconds: 1_000_000_000)
                    guard let self, !Task.isCancelled else { return }
                    await self.tick()
                }
            }
        }
    }

    private func tick() async {
        let all = state.withLock { s in s.namespaces.compactMap(\.namespace) }
        let now = UInt64(time(nil))
        for ns in all {
            if everysec { ns.syncer.syncInBackground() }
            await ns.compactIfStale(now: now)
        }
    }

    /// Stops the background work for good (the store is closing).
    func stop() {
        state.withLock { s in
            s.stopped = true
            s.ticks?.cancel()
            s.ticks = nil
        }
    }

    /// Releases the directory lock (the store is closed: its namespaces take no more writes).
    func releaseLock() { lock.release() }

    deinit { state.withLock { $0.ticks?.cancel() } }
}
