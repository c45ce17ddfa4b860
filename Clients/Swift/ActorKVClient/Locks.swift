import ActorKVProtocol
import Glibc  // Linux only, like the rest of the client.
import Synchronization

// Locks: a key written `EPHEMERAL` with `IFVERSION 0` on a connection of its own is a lock, which
// the server releases when that connection closes, for whatever reason. Every client implements
// the same recipe:
// - acquire: `PUT ns key <owner> IFVERSION 0 EPHEMERAL [PX ms]` on the holding connection:
//   `:token` (held; the key's version is the fencing token) or `$-1` (held by someone else);
// - wait: follow `CHANGES ns PREFIX key` on another connection and try again when a change
//   deletes exactly `key`, and once the follow has caught up (the holder may have gone between
//   the failed PUT and the follow); give up at the timeout;
// - release: `BATCH ns IFVERSION key <token> DEL key` on the holding connection, then close it.

extension ActorKVClient {
    /// Runs `body` holding the lock named `key` in `namespace`, and releases the lock when `body`
    /// returns or throws.
    ///
    ///     try await kv.withLock("jobs", "nightly-report", timeout: .seconds(30)) { token in
    ///         try await publish(report, fencingToken: token)
    ///     }
    ///
    /// The lock is acquired as ``acquireLock(_:_:timeout:ttl:)-([UInt8])`` says: on a connection
    /// of its own, waiting (without polling) up to `timeout` (nil: for ever; zero: one attempt)
    /// for the holder before it to release it. `body` gets the lock's fencing token, a number
    /// that is larger for each holder of this lock than for any before it: pass it along with
    /// writes to a resource that can refuse a token older than the newest it has seen, and a
    /// holder that lost the lock without knowing it (a process paused past the lock's `ttl`)
    /// cannot overwrite its successor's work. If this process dies, the server releases the lock
    /// as soon as the kernel closes the connection. With a `ttl`, the lock is released after
    /// that long even if `body` is still running.
    ///
    /// `body` runs in the caller's isolation (it may touch the caller's actor state). Throws:
    /// - ``ActorKVError/lockTimedOut(namespace:key:timeout:)`` when the lock stayed held by
    ///   another for `timeout`; `body` did not run;
    /// - what `body` throws, once the lock is released;
    /// - ``ActorKVError/lockLost(namespace:key:token:reason:)`` when `body` returned but the lock
    ///   was no longer held at the release (its connection broke, or its `ttl` ran out): what
    ///   `body` did may have overlapped with the next holder; its result is dropped;
    /// - the connection and server errors of acquiring (``ActorKVError/cannotConnect(path:errno:reason:)``,
    ///   `BADNS`, …), and those of releasing (after which the lock's connection is closed,
    ///   which releases it);
    /// - ``ActorKVError/cancelled`` when the task is cancelled while it waits for the lock; `body`
    ///   did not run.
    public nonisolated(nonsending) func withLock<T>(
        _ namespace: String, _ key: [UInt8], timeout: Duration?, ttl: Duration? = nil,
        _ body: nonisolated(nonsending) (_ token: UInt64) async throws -> T
    ) async throws -> T {
        let lock = try await acquireLock(namespace, key, timeout: timeout, ttl: ttl)
        let result: T
        do {
            result = try await body(lock.token)
        } catch {
            try? await lock.release()
            throw error
        }
        try await lock.release()
        return result
    }

    /// ``withLock(_:_:timeout:ttl:_:)-([UInt8])`` on the lock named by the UTF-8 bytes of `key`.
    public nonisolated(nonsending) func withLock<T>(
        _ namespace: String, _ key: String, timeout: Duration?, ttl: Duration? = nil,
        _ body: nonisolated(nonsending) (_ token: UInt64) async throws -> T
    ) async throws -> T {
        try await withLock(namespace, Array(key.utf8), timeout: timeout, ttl: ttl, body)
    }

    /// Acquires the lock named `key` in `namespace` and returns it held; ``HeldLock/release()``
    /// releases it (``withLock(_:_:timeout:ttl:_:)-([UInt8])`` does both around a body).
    ///
    /// The lock is the key itself, written on a new connection that only holds it:
    /// `PUT namespace key <host:pid> IFVERSION 0 EPHEMERAL [PX ttl]`. The write succeeds only
    /// if the key is absent, and makes it belong to that connection, so the server deletes it,
    /// releasing the lock, when the connection closes for any reason: ``HeldLock/release()``,
    /// the ``HeldLock`` going away, this process's exit or death (the last two only once no
    /// child process has the connection too: ``HeldLock/inheritableDescriptor()``). The key's value names the
    /// holder (`host:pid`); its version is the lock's fencing token (``HeldLock/token``).
    ///
    /// When the key is held, this waits for it to be deleted by following the namespace's
    /// changes under the key (``changes(_:prefix:from:reconnect:)-([UInt8],_,_)``, on another
    /// connection), with no polling, and tries again at each delete of the key; several waiters
    /// race, and one wins. `timeout` bounds the wait: nil waits for ever; zero (or less) tries
    /// once. A `ttl` makes the lock expire that long after it is acquired, even if its holder
    /// still runs (as a bound on a holder that hangs); without one it is held until released
    /// or its connection closes.
    ///
    /// The client's ``timeout`` bounds each request. While waiting, a server that is restarted is
    /// waited for: the change stream reconnects for up to `timeout` (a minute when `timeout` is
    /// nil; never less than the client's ``timeout``, and for ever when that is nil), and an
    /// attempt whose connection breaks is made again (the server releases a lock whose
    /// connection closed); a change stream that comes back to find the changes it missed
    /// compacted away (`COMPACTED`) is followed anew from now, after one more attempt. Throws ``ActorKVError/lockTimedOut(namespace:key:timeout:)``
    /// when the lock is still held at the end of `timeout`, and the connection error when the
    /// server cannot be reached then (the last attempt failed to reach it); ``ActorKVError/cancelled`` when the
    /// task is cancelled while it waits; connection errors, and the server's refusals (`BADNS`,
    /// `BADKEY`, `ERR` for a `ttl` of zero or less; `NOPERM` at once without the right to write
    /// `namespace`, or, when the lock is held, to read it, which waiting needs).
    public func acquireLock(_ namespace: String, _ key: [UInt8], timeout: Duration?,
                            ttl: Duration? = nil) async throws(ActorKVError) -> HeldLock {
        let deadline = timeout.map { ContinuousClock.now + max($0, .zero) }
        let holder = ActorKVClient(socketPath: socketPath, timeout: self.timeout)
        let request = Self.putArguments(namespace, key, Array(LockOwner.name.utf8), ttl: ttl, ephemeral: true, ifVersion: 0)
        let wakeups = LockWakeups()
        var watcher: Task<Void, Never>?
        defer { watcher?.cancel() }
        // The last attempt's failure to reach the server, if it failed so: at the deadline that
        // is what ends the wait, not a lock held by someone else.
        var unreachable: ActorKVError?
        while true {
            let reply: Reply
            do throws(ActorKVError) {
                reply = try await holder.send(request)
                unreachable = nil
            } catch where watcher != nil && error.meansServerGone {
                // Waiting already: the server went away (killed, restarting) while this attempt
                // ran or before it. A lock it may have given is gone with the connection; the
                // change stream reconnects (or gives up, failing the wait) and wakes the next try.
                reply = .null
                unreachable = error
            }
            switch reply {
            case .integer(let token) where token > 0:
                // The lock keeps the connection; the holder client goes without it (its deinit
                // would shut it down).
                guard let connection = holder.connector.take() else {
                    throw .connectionLost("the connection that acquired the lock is gone")
                }
                return HeldLock(namespace: namespace, key: key, token: UInt64(token), connection: connection)
            case .null:
                break  // held by someone else
            default:
                throw Self.unexpected(reply, for: "PUT IFVERSION 0 EPHEMERAL")
            }
            if let deadline, ContinuousClock.now >= deadline {
                if let unreachable { throw unreachable }
                throw .lockTimedOut(namespace: namespace, key: key, timeout: max(timeout ?? .zero, .zero))
            }
            if watcher == nil {
                let window = Self.reconnectWindow(lockTimeout: timeout, clientTimeout: self.timeout)
                // The server answered the attempt just made: a first CHANGES that finds it busy
                // past the client's timeout (or gone) is waited out too, within the window.
                let policy = ReconnectPolicy(giveUpAfter: window, retriesFirstConnection: true)
                let stream = changes(namespace, prefix: key, from: .now, reconnect: policy)
                watcher = Task.detached { await wakeups.follow(stream, key: key) }
            }
            switch await wakeups.wait(until: deadline) {
            case .retry, .deadline:
                // At the deadline, one last attempt: the lock may have just been released.
                continue
            case .failed(.compacted):
                // The change stream came back (after a server restart, say) to find the changes
                // it had not read compacted away: follow anew from now, after one more attempt,
                // which sees any release the stream missed. (The Python client's Lock resumes
                // from a new snapshot for the same reason.)
                watcher?.cancel()
                watcher = nil
                wakeups.clearFailure()
            case .failed(let error):
                throw error
            case .cancelled:
                throw .cancelled
            }
        }
    }

    /// How long a wait for a lock keeps reconnecting its change stream to a server that is out of
    /// reach (restarting, say) before it fails: for as long as the wait may last (`lockTimeout`;
    /// a minute when it waits for ever, as the Python client's lock), and never less than the
    /// client's timeout (nil: for ever).
    static func reconnectWindow(lockTimeout: Duration?, clientTimeout: Duration?) -> Duration? {
        guard let clientTimeout else { return nil }
        return max(clientTimeout, lockTimeout ?? .seconds(60))
    }

    /// ``acquireLock(_:_:timeout:ttl:)-([UInt8])`` of the lock named by the UTF-8 bytes of `key`.
    public func acquireLock(_ namespace: String, _ key: String, timeout: Duration?,
                            ttl: Duration? = nil) async throws(ActorKVError) -> HeldLock {
        try await acquireLock(namespace, Array(key.utf8), timeout: timeout, ttl: ttl)
    }
}

/// A lock held by this process, from ``ActorKVClient/acquireLock(_:_:timeout:ttl:)-([UInt8])``:
/// its key, written `EPHEMERAL` on a connection that this object keeps open until
/// ``release()``. Letting it go without releasing closes the connection, which releases the
/// lock too (the server deletes the key), as does this process's death.
///
/// Shared with a child process (``inheritableDescriptor()``), the lock behaves as flock(1)'s
/// lock on a file descriptor shared with a child: it is held as long as any process has the
/// connection open. Letting the object go, or this process's exit, then closes only this
/// process's copy, and the child keeps the lock until it closes its copy or exits;
/// ``release()`` (as `flock -u`) releases it for every process at once.
public final class HeldLock: Sendable {
    /// The namespace of the lock's key.
    public let namespace: String
    /// The lock's key.
    public let key: [UInt8]
    /// The fencing token: the version the acquiring write gave the key. Each holder of the lock
    /// gets a larger token than every holder before it.
    public let token: UInt64
    /// The connection the key belongs to.
    private let connection: Connection

    private struct State {
        /// ``release()`` was called.
        var released = false
        /// ``inheritableDescriptor()`` handed a copy of the connection out: another process may
        /// have it, and must keep it when this object goes.
        var shared = false
    }

    private let state = Mutex(State())

    /// `PING`: the request that ends this process's part of a shared connection (its reply wakes
    /// the connection's reader, so that it stops).
    private static let ping: [UInt8] = {
        var request: [UInt8] = []
        RequestEncoder.encode([Array("PING".utf8)], into: &request)
        return request
    }()

    init(namespace: String, key: [UInt8], token: UInt64, connection: Connection) {
        self.namespace = namespace
        self.key = key
        self.token = token
        self.connection = connection
    }

    /// Not shared, the connection is shut down, which releases the lock at once. Shared, only
    /// this process's copy is closed (once the connection's reader has stopped, after a `PING`):
    /// shutdown(2) would end the connection, and so the lock, for the processes that have a copy.
    deinit {
        if state.withLock({ $0.shared }) {
            connection.letGo(after: Self.ping)
        } else {
            connection.shutdown(with: .closed)
        }
    }

    /// The lock's key decoded as UTF-8 (invalid sequences become U+FFFD).
    public var keyString: String { String(decoding: key, as: UTF8.self) }

    /// Releases the lock, for every process that shares it (as `flock -u`): deletes its key if
    /// it still holds this lock's token (`BATCH ns IFVERSION key token DEL key`, on the holding
    /// connection), then closes the connection. Only the first call does anything.
    ///
    /// Closing the connection is shutting it down, unless ``inheritableDescriptor()`` has handed
    /// it out: then only this process's copy is closed (when this object goes), and a process
    /// that inherited a copy keeps the connection, which no longer holds the lock. When the
    /// delete fails for another reason than a lost lock, the connection is shut down all the
    /// same, for every process that has it, which releases the lock.
    ///
    /// Throws ``ActorKVError/lockLost(namespace:key:token:reason:)`` if the lock was no longer
    /// held: the connection had broken (then the server has released it), or the key had
    /// expired after its `ttl` or was deleted or overwritten by someone else (then nothing is
    /// deleted: the key may be the next holder's). Any other error (a server's `IOERR`, say)
    /// is thrown as it is; the connection is shut down all the same, which releases the lock.
    public func release() async throws(ActorKVError) {
        let (first, shared) = state.withLock { s -> (Bool, Bool) in
            defer { s.released = true }
            return (!s.released, s.shared)
        }
        guard first else { return }
        var request: [UInt8] = []
        RequestEncoder.encode([Array("BATCH".utf8), Array(namespace.utf8), Array("IFVERSION".utf8), key,
                               Array(String(token).utf8), Array("DEL".utf8), key], into: &request)
        // Shared, the connection is let go after this request (not shut down) unless the lock
        // may still be held by it.
        let result = await connection.send(request, last: true, lettingGo: shared)
        var notHeld = false  // by this connection any more
        defer { if !shared || !notHeld { connection.shutdown(with: .closed) } }
        switch result {
        case .reply(.array):
            notHeld = true
        case .reply(.null), .reply(.nullArray):
            notHeld = true  // the key is not this lock's
            throw .lockLost(namespace: namespace, key: key, token: token,
                            reason: "the key no longer had this lock's version: it expired (the lock's ttl) or was deleted "
                                + "or overwritten by someone else")
        case .reply(.error(let text)):
            throw ActorKVError.fromErrorReply(text)
        case .reply(let other):
            throw ActorKVClient.unexpected(other, for: "BATCH")
        case .failed(let error), .notSent(let error):
            throw .lockLost(namespace: namespace, key: key, token: token,
                            reason: "the connection holding it broke (\(error)), and the server released the lock")
        }
    }

    /// A new descriptor (`dup(2)`, without close-on-exec) of the connection that holds the lock,
    /// or -1 with `errno` set. A child process that inherits it keeps the connection open, and
    /// so the lock held, for as long as it keeps the descriptor, as flock(1)'s command keeps its
    /// lock: after this process exits or dies, and after this object goes, which from now on
    /// closes only this process's copy of the connection (it no longer shuts it down); the
    /// server releases the lock once every copy is closed. Close the descriptor in this process
    /// once the child is started. ``release()`` still releases the lock at once, for every
    /// process, as `flock -u` does.
    public func inheritableDescriptor() -> Int32 {
        let copy = connection.duplicateDescriptor()
        if copy >= 0 { state.withLock { $0.shared = true } }
        return copy
    }
}

/// The value a lock's key holds: who holds it, `host:pid`.
enum LockOwner {
    static let name: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        let host = gethostname(&buffer, buffer.count - 1) == 0
            ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "localhost"
        return "\(host):\(getpid())"
    }()
}

/// What a lock waiter is woken by: a change stream that saw the lock's key deleted (or caught
/// up), the waiter's deadline, its cancellation, or the change stream's failure.
///
/// One waiter at a time (``wait(until:)`` is called in turn by one acquiring task). A wakeup
/// that comes while nobody waits is kept (one) for the next wait.
final class LockWakeups: Sendable {
    enum Wake: Sendable {
        /// Try to acquire again.
        case retry
        /// The deadline passed.
        case deadline
        /// The waiting task was cancelled.
        case cancelled
        /// The change stream ended with this error.
        case failed(ActorKVError)
    }

    private typealias Waiter = CheckedContinuation<Wake, Never>

    private struct State {
        /// A retry posted while nobody waited.
        var posted = false
        var failure: ActorKVError?
        var waiter: (id: Int, continuation: Waiter)?
        /// A deadline or cancellation for the wait `id` that came before it registered.
        var early: (id: Int, wake: Wake)?
        var nextID = 0
        /// Every wait up to this id is over.
        var finishedThrough = -1
    }

    private let state = Mutex(State())

    /// Follows `stream` (the changes under the lock's key), posting a retry when it has caught
    /// up and at each change that deletes exactly `key` (the prefix also matches longer keys).
    /// Returns when the stream ends (its task is cancelled); records the error that ends it.
    func follow(_ stream: ChangeStream, key: [UInt8]) async {
        do throws(ActorKVError) {
            for try await event in stream {
                switch event {
                case .synced:
                    post()
                case .change(let change) where change.keys.contains(where: { $0.key == key && $0.value == nil }):
                    post()
                case .change, .snapshot:
                    break
                }
            }
        } catch {
            let waiter = state.withLock { s -> Waiter? in
                s.failure = error
                return takeWaiter(&s)
            }
            waiter?.resume(returning: .failed(error))
        }
    }

    /// Forgets the error that ended the stream followed so far, before another is followed.
    func clearFailure() {
        state.withLock { $0.failure = nil }
    }

    private func post() {
        let waiter = state.withLock { s -> Waiter? in
            guard let waiter = takeWaiter(&s) else {
                s.posted = true
                return nil
            }
            return waiter
        }
        waiter?.resume(returning: .retry)
    }

    /// Removes the waiter, if any, marking its wait over. Call with the lock held.
    private func takeWaiter(_ s: inout State) -> Waiter? {
        guard let (id, continuation) = s.waiter else { return nil }
        s.waiter = nil
        s.finishedThrough = id
        return continuation
    }

    /// Ends wait `id` with `wake`, if it is not over yet.
    private func end(_ id: Int, with wake: Wake) {
        let waiter = state.withLock { s -> Waiter? in
            guard id > s.finishedThrough else { return nil }
            if let waiting = s.waiter, waiting.id == id { return takeWaiter(&s) }
            s.early = (id, wake)  // before it registered
            return nil
        }
        waiter?.resume(returning: wake)
    }

    /// Waits for a retry (a posted one is taken at once), the stream's failure, `deadline`
    /// (nil: none) or the task's cancellation.
    func wait(until deadline: ContinuousClock.Instant?) async -> Wake {
        let id = state.withLock { s -> Int in
            defer { s.nextID += 1 }
            return s.nextID
        }
        let timer = deadline.map { deadline in
            Task.detached { [self] in
                guard (try? await Task.sleep(until: deadline, clock: .continuous)) != nil else { return }
                end(id, with: .deadline)
            }
        }
        defer { timer?.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let now = state.withLock { s -> Wake? in
                    if let early = s.early, early.id == id {
                        s.early = nil
                        s.finishedThrough = id
                        return early.wake
                    }
                    if s.posted {
                        s.posted = false
                        s.finishedThrough = id
                        return .retry
                    }
                    if let failure = s.failure {
                        s.finishedThrough = id
                        return .failed(failure)
                    }
                    s.waiter = (id, continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            end(id, with: .cancelled)
        }
    }
}
