import Dispatch
import Synchronization

/// Makes a namespace's log durable off the actor, with group commit.
///
/// The namespace writes records and reports the highest sequence written; writers under
/// `always` then wait for that sequence. One fsync covers everything written before it started,
/// so fifty concurrent writers share one or two fsyncs instead of paying fifty. Under `everysec`
/// a background tick asks for the same fsync without anyone waiting.
///
/// A failed fsync is fatal for durability: after it the page cache cannot be trusted, so every
/// waiter gets the error and the namespace refuses further writes (``failure``).
final class LogSyncer: Sendable {
    private struct Waiter {
        let sequence: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var segment: LogSegment
        var written: UInt64
        var durable: UInt64
        var waiters: [Waiter] = []
        var running = false
        var failure: StoreError?
        /// Whether the next write calls `onWrite` (the housekeeper stopped looking after this
        /// log: see ``rearm(ifWrittenThrough:clean:)``).
        var armed = false
        var onWrite: (@Sendable () -> Void)?
        /// The failure came from an fsync of this syncer's own loop (not from ``syncNow()``,
        /// whose caller reports it).
        var failedInLoop = false
    }

    private let state: Mutex<State>
    private let queue: DispatchQueue
    /// Told the durable sequence each time an fsync completes (the change feed, under `always`).
    private let onDurable: (@Sendable (UInt64) -> Void)?
    /// Told, once, the failure of an fsync of the loop's (the `everysec` tick's, or one writers
    /// waited for), which nobody else reports: the namespace logs it.
    private let onFailure: (@Sendable (StoreError) -> Void)?

    init(segment: LogSegment, durableThrough sequence: UInt64, label: String, onDurable: (@Sendable (UInt64) -> Void)? = nil,
         onFailure: (@Sendable (StoreError) -> Void)? = nil) {
        state = Mutex(State(segment: segment, written: sequence, durable: sequence))
        queue = DispatchQueue(label: "actorkv.sync.\(label)")
        self.onDurable = onDurable
        self.onFailure = onFailure
    }

    /// The fsync failure that ended this log's durability, if any.
    var failure: StoreError? { state.withLock { $0.failure } }

    /// Whether an fsync of the loop failed (counted among the namespace's I/O errors).
    var failedInLoop: Bool { state.withLock { $0.failedInLoop } }

    /// The highest sequence number known to be on stable storage.
    var durableSequence: UInt64 { state.withLock { $0.durable } }

    /// Whether records were written that are not yet known durable.
    var isDirty: Bool { state.withLock { $0.written > $0.durable } }

    /// The highest sequence number written (durable or not).
    var writtenSequence: UInt64 { state.withLock { $0.written } }

    /// Records that everything through `sequence` has been written to the current segment; the
    /// first write after ``rearm(ifWrittenThrough:clean:)`` calls the housekeeper's hook.
    func noteWritten(_ sequence: UInt64) {
        let tell = state.withLock { s -> (@Sendable () -> Void)? in
            s.written = max(s.written, sequence)
            guard s.armed else { return nil }
            s.armed = false
            return s.onWrite
        }
        tell?()
    }

    /// Sets the hook that the first write after each ``rearm(ifWrittenThrough:clean:)`` calls
    /// (the housekeeper's, which then looks after this log's namespace again).
    func callOnWrite(_ hook: @escaping @Sendable () -> Void) {
        state.withLock { $0.onWrite = hook }
    }

    /// Arms the hook set by ``callOnWrite(_:)`` if nothing after `sequence` was written and, when
    /// `clean` is asked for, everything written is durable (or an fsync failed: no background
    /// fsync will run again); returns whether it did. Checked under the lock that writes take, so
    /// a write either counts here or calls the hook.
    func rearm(ifWrittenThrough sequence: UInt64, clean: Bool) -> Bool {
        state.withLock { s in
            guard s.written <= sequence, !clean || s.written <= s.durable || s.failure != nil else { return false }
            s.armed = true
            return true
        }
    }

    /// Returns once everything through `sequence` is on stable storage; throws if an fsync failed.
    func waitDurable(_ sequence: UInt64) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            enum Next { case resume, fail(StoreError), wait, start }
            let next: Next = state.withLock { s in
                if let failure = s.failure { return .fail(failure) }
                if s.durable >= sequence { return .resume }
                s.waiters.append(Waiter(sequence: sequence, continuation: continuation))
                if s.running { return .wait }
                s.running = true
                return .start
            }
            switch next {
            case .resume: continuation.resume()
            case .fail(let error): continuation.resume(throwing: error)
            case .wait: break
            case .start: queue.async { self.syncLoop() }
            }
        }
    }

    /// Starts an fsync in the background if anything is dirty and none is running (the `everysec` tick).
    func syncInBackground() {
        let start = state.withLock { s -> Bool in
            guard s.failure == nil, !s.running, s.written > s.durable else { return false }
            s.running = true
            return true
        }
        if start { queue.async { self.syncLoop() } }
    }

    /// Switches to a new segment after the namespace fsync'd the old one through `sequence` itself.
    func rotate(to segment: LogSegment, durableThrough sequence: UInt64) {
        let (ready, durable) = state.withLock { s -> ([Waiter], UInt64) in
            s.segment = segment
            s.durable = max(s.durable, sequence)
            return (takeReady(&s), s.durable)
        }
        onDurable?(durable)
        for waiter in ready { waiter.continuation.resume() }
    }

    /// Fsyncs the current segment synchronously (on close); records a failure like the loop does.
    func syncNow() throws(StoreError) {
        let (segment, target) = state.withLock { ($0.segment, $0.written) }
        do {
            try segment.system.fdatasync(segment.fd, path: segment.path)
            let (ready, durable) = state.withLock { s -> ([Waiter], UInt64) in
                s.durable = max(s.durable, target)
                return (takeReady(&s), s.durable)
            }
            onDurable?(durable)
            for waiter in ready { waiter.continuation.resume() }
        } catch {
            let failure = StoreError(.durabilityLost, "fsync of \(segment.path) failed: \(error)")
            fail(with: failure)
            throw failure
        }
    }

    private func syncLoop() {
        while true {
            let (segment, target) = state.withLock { ($0.segment, $0.written) }
            do {
                try segment.system.fdatasync(segment.fd, path: segment.path)
            } catch {
                fail(with: StoreError(.durabilityLost, "fsync of \(segment.path) failed: \(error); "
                    + "the writes waiting for it may or may not be on disk, and writes to this namespace are refused "
                    + "until the server restarts and recovers from disk"), inLoop: true)
                return
            }
            let (ready, more, durable) = state.withLock { s -> ([Waiter], Bool, UInt64) in
                s.durable = max(s.durable, target)
                let ready = takeReady(&s)
                let more = !s.waiters.isEmpty
                if !more { s.running = false }
                return (ready, more, s.durable)
            }
            // Followers are told before the writers are answered: a change reaches a follower
            // no later than its writer's reply could.
            onDurable?(durable)
            for waiter in ready { waiter.continuation.resume() }
            if !more { return }
        }
    }

    private func fail(with failure: StoreError, inLoop: Bool = false) {
        let (waiters, first) = state.withLock { s -> ([Waiter], Bool) in
            let first = s.failure == nil
            if first {
                s.failure = failure
                s.failedInLoop = inLoop
            }
            s.running = false
            defer { s.waiters.removeAll() }
            return (s.waiters, first)
        }
        if first && inLoop { onFailure?(failure) }
        for waiter in waiters { waiter.continuation.resume(throwing: failure) }
    }

    private func takeReady(_ s: inout State) -> [Waiter] {
        guard !s.waiters.isEmpty else { return [] }
        let durable = s.durable
        let ready = s.waiters.filter { $0.sequence <= durable }
        if !ready.isEmpty { s.waiters.removeAll { $0.sequence <= durable } }
        return ready
    }
}

/// What a write must wait for before it may be acknowledged.
public struct Durability: Sendable {
    let syncer: LogSyncer?
    let sequence: UInt64

    /// Nothing to wait for.
    public static let immediate = Durability(syncer: nil, sequence: 0)

    /// Whether there is nothing to wait for.
    public var isImmediate: Bool { syncer == nil }

    /// Returns once the writes are as durable as the store's policy promises; throws a
    /// `durabilityLost` ``StoreError`` if the fsync failed.
    public func wait() async throws {
        guard let syncer else { return }
        try await syncer.waitDurable(sequence)
    }
}
