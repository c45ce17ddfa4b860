/// How the server shares the open files limit (`ulimit -n`) out among what holds descriptors:
/// namespaces (a log each), client connections, sockets lingering after the server closed them,
/// and a spare for everything else (epoll, the listener, snapshots being written, history being
/// read, the runtime's own files).
///
/// The spare is never handed out to clients. Running out of descriptors is worse than a refused
/// connection: while work is queued, the Dispatch library that Swift's runtime runs on opens
/// `/proc/<tid>/stat` once a second for each of its worker threads, and it aborts the process
/// when that open fails (`EMFILE`). So when the limit cannot cover everything the options ask
/// for, the server lowers its client limit (as Redis lowers `maxclients` under a low ulimit):
/// a client past it gets `-MAXCLIENTS` while descriptors are still left.
struct DescriptorBudget: Equatable, Sendable {
    /// The most namespaces the store may hold.
    var namespaces: Int
    /// The most client connections open at once.
    var clients: Int
    /// The most sockets lingering after the server closed them (``EventLoop/linger(_:id:)``).
    var lingering: Int
    /// The descriptors left for everything else.
    var spare: Int

    /// Sockets lingering at once when the limit allows.
    static let lingeringWanted = 1024
    /// The spare when the limit allows.
    static let spareWanted = 256

    /// The open files limit that covers `maxClients` connections and `maxNamespaces` namespaces.
    static func wanted(maxClients: Int, maxNamespaces: Int) -> Int {
        maxClients + lingeringWanted + maxNamespaces + spareWanted
    }

    /// The budget under the open files limit `limit`. When it covers ``wanted(maxClients:maxNamespaces:)``,
    /// or is not known (0: `getrlimit` failed), everything is as configured. Otherwise namespaces
    /// get half of what is left after 256 (at least 16); the spare is a quarter of the limit (32
    /// to 256); and of what remains, clients get three quarters (at most `maxClients`) and
    /// lingering sockets the rest.
    init(openFiles limit: Int, maxClients: Int, maxNamespaces: Int) {
        let wanted = Self.wanted(maxClients: maxClients, maxNamespaces: maxNamespaces)
        guard limit > 0 && limit < wanted else {
            (namespaces, clients, lingering) = (maxNamespaces, maxClients, Self.lingeringWanted)
            spare = max(0, limit - maxNamespaces - maxClients - Self.lingeringWanted)
            return
        }
        namespaces = min(maxNamespaces, max(16, (limit - Self.spareWanted) / 2))
        spare = min(Self.spareWanted, max(32, limit / 4))
        let left = max(2, limit - namespaces - spare)
        clients = min(maxClients, max(1, left * 3 / 4))
        lingering = min(Self.lingeringWanted, max(1, left - clients))
    }
}
