@testable import ActorKVStore
import ActorKVTestSupport
import Foundation

/// A seeded mix of every kind of write, run against a real data directory while a
/// ``FileOperationRecorder`` records what the store does to its files: plain and multi-key
/// deletes, PUTs of values from 1 byte to several sectors, guarded PUTs (holding and failing),
/// INCR, BATCHes with guards and increments, keys with deadlines (far off, and already past and
/// swept as logged deletes), ephemeral keys (released by their owner as logged deletes, and left
/// for recovery to delete), compactions in the middle (log rotated, snapshot renamed, old
/// segments dropped), the fsync of `everysec` and `no` at chosen points, and a close and reopen
/// (recovery's own writes recorded too).
struct PowerLossWorkload {
    /// The fsync policy the store runs under.
    var policy: DurabilityPolicy
    /// How many writes.
    var writes: Int
    /// Seeds the mix.
    var seed: UInt64

    /// The namespaces written.
    static let namespaces = ["config", "jobs"]

    /// What the run did: the trace, the acknowledgements, and the state the store itself showed
    /// after each write (to check ``LogHistory`` against).
    struct Run {
        var dataDirectory: String
        var trace: [FileOperationRecorder.Operation]
        var acknowledged: [(point: Int, namespace: String, sequence: UInt64)] = []
        var shown: [(namespace: String, sequence: UInt64, state: NamespaceState)] = []
    }

    /// The store's options: no compaction but the workload's, reservation ahead in small chunks
    /// under `always` (so that it happens often and files stay small), a short change history (so
    /// that compaction drops some segments and keeps others).
    static func options(_ policy: DurabilityPolicy, recorder: FileOperationRecorder) -> StoreOptions {
        var options = StoreOptions(durability: policy, compaction: CompactionPolicy(interval: 0),
                                   faults: FaultInjector(recording: recorder))
        options.reservation = policy == .always ? LogReservation(chunkBytes: 4096) : .off
        options.changesHistory = 16
        return options
    }

    /// Runs the workload in `dataDirectory`, which must not exist yet.
    func run(in dataDirectory: String) async throws -> Run {
        let recorder = FileOperationRecorder()
        var run = Run(dataDirectory: dataDirectory, trace: [])
        var random = SeededGenerator(seed: seed)
        var store = try Store(directory: dataDirectory, options: Self.options(policy, recorder: recorder))
        let reopenAt = writes / 2
        for step in 0..<writes {
            if step == reopenAt {
                _ = await store.close()
                // Retrying `locked`: a test beside this one that forks a child in that moment
                // holds the lock just released for a few milliseconds (see withStore).
                store = try await openStore(dataDirectory, Self.options(policy, recorder: recorder))
                for name in Self.namespaces { _ = try await store.namespace(name) }
            }
            let name = Self.namespaces.randomElement(using: &random)!
            let namespace = try await store.namespace(name)
            let before = await namespace.sequence
            let acknowledged = try await write(step, to: namespace, &random)
            let shown = await namespace.entriesWithLifetimes()
            if acknowledged, shown.sequence > before { run.acknowledged.append((recorder.count, name, shown.sequence)) }
            run.shown.append((name, shown.sequence, Self.state(of: shown.entries)))
        }
        _ = await store.close()
        run.trace = recorder.operations
        return run
    }

    /// The state a namespace shows, as ``LogHistory`` states are written: the log says only that a
    /// key is ephemeral, not which connection owns it, so every owner reads as
    /// ``Lifetime/recoveredOwner``.
    static func state(of entries: [(key: [UInt8], value: [UInt8], version: UInt64, lifetime: Lifetime)]) -> NamespaceState {
        var state: NamespaceState = [:]
        for entry in entries {
            state[entry.key] = ExpectedEntry(value: entry.value, version: entry.version, deadline: entry.lifetime.deadline,
                                             owner: entry.lifetime.isEphemeral ? Lifetime.recoveredOwner : 0)
        }
        return state
    }

    /// Makes one write; returns whether a client would have been told it is done (a release of an
    /// owner's keys and a sweep of expired ones answer nobody).
    private func write(_ step: Int, to namespace: Namespace, _ random: inout SeededGenerator) async throws -> Bool {
        let key = Array("k\(Int.random(in: 0..<8, using: &random))".utf8)
        let value = Self.value(step, &random)
        if step > 0, step % max(1, writes / 3) == 0 {
            try await namespace.compact()
        }
        if policy != .always, Int.random(in: 0..<6, using: &random) == 0 {
            try namespace.syncer.syncNow()  // what the `everysec` housekeeper or the kernel's writeback would do
        }
        switch Int.random(in: 0..<13, using: &random) {
        case 0...2:
            try await namespace.put(key, value)
        case 3:
            try await namespace.delete([key, Array("k\(Int.random(in: 0..<8, using: &random))".utf8)])
        case 4:
            let current = await namespace.versioned(key)?.version ?? 0
            let guess = Bool.random(using: &random) ? current : current + 1  // holds, or fails writing nothing
            _ = try await namespace.put(key, value, ifVersion: guess)
        case 5:
            try await namespace.increment(Array("counter".utf8), by: Int64.random(in: -5...9, using: &random))
        case 6:
            let current = await namespace.versioned(key)?.version ?? 0
            _ = try await namespace.apply(steps: [
                .ifVersion(key: key, Bool.random(using: &random) ? current : current + 7),
                .put(key: key, value: value),
                .delete(key: Array("k\(Int.random(in: 0..<8, using: &random))".utf8)),
                .increment(key: Array("counter".utf8), by: 1),
            ])
        case 7:
            try await Self.acknowledge(namespace.execute([.lifetimePut(LifetimePut(key: key, value: value, milliseconds: 3_600_000))]))
        case 8:
            try await Self.acknowledge(namespace.execute([.lifetimePut(LifetimePut(key: Array("e\(step % 3)".utf8), value: value, owner: 7))]))
        case 9:
            await namespace.releaseOwner(7)
            return false
        case 11:
            // The namespace's own deadline: far off, removed, or already passed (every key deleted).
            let deadline: KeyExpiry.Deadline = [.after(milliseconds: 3_600_000), .none, .at(milliseconds: 1)].randomElement(using: &random)!
            try await Self.acknowledge(namespace.execute([.setNamespaceDeadline(NamespaceDeadline(deadline))]))
        case 10:
            _ = await namespace.execute([.lifetimePut(LifetimePut(key: Array("x\(step % 3)".utf8), value: value, milliseconds: 1))])
            try await Task.sleep(nanoseconds: 3_000_000)
            await namespace.sweepExpired()
            return false
        default:
            try await namespace.apply([.put(key: key, value: value), .put(key: Array("pair-\(String(decoding: key, as: UTF8.self))".utf8), value: value)])
        }
        return true
    }

    /// Waits until `execution` may be acknowledged, as the server does before replying.
    static func acknowledge(_ execution: Execution) async throws {
        try await execution.durability.wait()
    }

    /// A value of 1 byte to a few sectors, naming the step that wrote it.
    static func value(_ step: Int, _ random: inout SeededGenerator) -> [UInt8] {
        let length = [1, 20, 300, 700, 1500].randomElement(using: &random)!
        let tag = Array("step-\(step)-".utf8)
        return Array((tag + [UInt8](repeating: UInt8(ascii: "a") + UInt8(step % 26), count: length)).prefix(max(length, tag.count)))
    }
}
