/// An event loop that drives non-blocking sockets: it watches file descriptors and runs jobs
/// and timers, all on one thread of its own. The agent's server loop is one
/// (`ActorKVServer`'s `EventLoop`), so that a request's exchange with etcd is sent, waited for
/// and answered on the thread that read the request, with no hand-off to another thread.
///
/// Every method may be called from any thread, except ``watch(_:handler:)`` and
/// ``unwatch(_:)``, which are called on the reactor's thread only (in a job or a handler).
public protocol Reactor: AnyObject, Sendable {
    /// Whether the caller runs on the reactor's thread.
    var isReactorThread: Bool { get }
    /// Runs `job` on the reactor's thread: at once when called there, else soon.
    func submit(_ job: @escaping @Sendable () -> Void)
    /// Runs `job` on the reactor's thread once `seconds` have passed.
    func schedule(after seconds: Double, _ job: @escaping @Sendable () -> Void)
    /// Watches `fd` (edge-triggered: readable, writable, closed by the peer) for `handler`,
    /// whose ``ReactorHandler/ready(_:)`` is then called on the reactor's thread. Returns a
    /// token for ``unwatch(_:)``, or nil when the descriptor cannot be watched.
    func watch(_ fd: Int32, handler: ReactorHandler) -> UInt64?
    /// Stops watching what `token` names (before its descriptor is closed).
    func unwatch(_ token: UInt64)
}

/// What a ``Reactor`` calls when a watched descriptor is ready.
public protocol ReactorHandler: AnyObject {
    /// The descriptor became ready: readable or closed by the peer (`readable`), writable
    /// (`writable`). With edge triggering, the handler reads and writes until the socket
    /// would block.
    func ready(readable: Bool, writable: Bool)
}
