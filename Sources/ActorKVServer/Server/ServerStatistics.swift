import Synchronization

/// Counters shared between the event loop and INFO.
public final class ServerStatistics: Sendable {
    /// Clients connected now.
    public let connectedClients = Atomic<Int>(0)
    /// Connections accepted since start.
    public let totalConnections = Atomic<Int>(0)
    /// Connections refused (max clients reached or peer not allowed).
    public let rejectedConnections = Atomic<Int>(0)
    /// Requests processed since start.
    public let commandsProcessed = Atomic<Int>(0)
    /// Connections closed for a framing error.
    public let protocolErrors = Atomic<Int>(0)

    /// Creates zeroed counters.
    public init() {}
}
