import Foundation
import Synchronization

/// Holds a client's connection and opens a new one when a call needs it, without blocking the
/// caller's thread.
///
/// A connect to a Unix socket completes (or fails) at once unless the server's queue of
/// connections to accept is full. Then the connect waits, up to the client's timeout, on a thread
/// of its own, and every call that needs the connection meanwhile awaits that one attempt: no
/// task of Swift's cooperative pool is blocked, however many calls wait, and N calls to a server
/// that accepts nobody fail after about one timeout, not one after another.
///
/// A call that waited while an attempt failed gets that attempt's error rather than trying again
/// itself; after an attempt that timed out, calls fail at once with its error for one more
/// timeout. A refused or missing socket is tried again by every call.
final class Connector: Sendable {
    private let path: String
    private let timeout: Duration?

    private typealias Waiter = CheckedContinuation<Result<Connection, ActorKVError>, Never>

    private struct State {
        /// The connection calls use, once open.
        var connection: Connection?
        /// The calls awaiting the connect in progress on its own thread; nil when there is none.
        var waiters: [Waiter]?
        /// The last failed attempt to connect and when it ended.
        var lastFailure: (at: ContinuousClock.Instant, error: ActorKVError)?
    }

    /// What a call does next, decided under the lock.
    private enum Step {
        case ready(Connection)
        case failed(ActorKVError)
        case wait
    }

    private let state = Mutex(State())

    init(path: String, timeout: Duration?) {
        self.path = path
        self.timeout = timeout
    }

    /// The open connection, or a new one if there is none or it failed.
    func connection() async throws(ActorKVError) -> Connection {
        let arrived = ContinuousClock.now
        switch state.withLock({ nextStep(&$0, arrived: arrived) }) {
        case .ready(let connection): return connection
        case .failed(let error): throw error
        case .wait: break
        }
        let result = await withCheckedContinuation { (waiter: Waiter) in
            let now: Result<Connection, ActorKVError>? = state.withLock { state in
                // The attempt may have ended between the two locked sections.
                if let open = state.connection, open.isUsable { return .success(open) }
                if let failure = state.lastFailure, failure.at > arrived { return .failure(failure.error) }
                if state.waiters == nil { startWaitingConnect() }
                state.waiters = (state.waiters ?? []) + [waiter]
                return nil
            }
            if let now { waiter.resume(returning: now) }
        }
        return try result.get()
    }

    /// The usable connection, an error to fail with, or `.wait` for a connect that must wait.
    /// Tries a non-blocking connect when there is no connection and no attempt in progress.
    private func nextStep(_ state: inout State, arrived: ContinuousClock.Instant) -> Step {
        if let open = state.connection, open.isUsable { return .ready(open) }
        if state.waiters != nil { return .wait }
        if let failure = state.lastFailure {
            if failure.at > arrived { return .failed(failure.error) }
            if case .timedOut = failure.error, let timeout, ContinuousClock.now < failure.at + timeout {
                return .failed(failure.error)
            }
        }
        do throws(ActorKVError) {
            guard let fresh = try Connection.open(path: path, timeout: timeout, waiting: false) else { return .wait }
            state.connection = fresh
            return .ready(fresh)
        } catch {
            state.lastFailure = (ContinuousClock.now, error)
            return .failed(error)
        }
    }

    /// Starts a thread that connects, waiting for the server to accept, then hands the outcome
    /// to every call waiting for it.
    private func startWaitingConnect() {
        let thread = Thread { [self] in
            let result: Result<Connection, ActorKVError>
            do throws(ActorKVError) {
                // With `waiting`, open returns a connection or throws.
                result = .success(try Connection.open(path: path, timeout: timeout, waiting: true)!)
            } catch {
                result = .failure(error)
            }
            let waiters = state.withLock { state -> [Waiter] in
                switch result {
                case .success(let connection): state.connection = connection
                case .failure(let error): state.lastFailure = (ContinuousClock.now, error)
                }
                defer { state.waiters = nil }
                return state.waiters ?? []
            }
            for waiter in waiters { waiter.resume(returning: result) }
        }
        thread.name = "actorkv-client-connect"
        thread.start()
    }

    /// Takes the connection away (for ``ActorKVClient/close()``): the next call opens a new one.
    func take() -> Connection? {
        state.withLock { state in
            defer { state.connection = nil }
            return state.connection
        }
    }

    /// The current connection, if one is open (for diagnostics and `deinit`).
    var current: Connection? { state.withLock { $0.connection } }
}
