#if canImport(Glibc)
import Glibc
#endif
import Dispatch

/// The connections an ``EtcdClient`` keeps on a ``Reactor``: a pool of idle keep-alive
/// connections per member, and the exchanges under way, each failed when its timeout passes.
/// Touched only on the reactor's thread.
final class ReactorConnections: @unchecked Sendable {
    /// The reactor the connections are driven by.
    let reactor: any Reactor
    private let endpoints: [EtcdEndpoint]
    private let timeout: Double
    private var idle: [[ReactorHTTPConnection]]
    private var busy: [ObjectIdentifier: ReactorHTTPConnection] = [:]
    private var sweeping = false
    private var stopped = false
    /// How often the exchanges under way are checked against their deadlines.
    static let sweepSeconds = 0.25
    /// Idle connections kept per member.
    static let idlePerMember = 256

    /// Connections to `endpoints` on `reactor`, each exchange failing after `timeout` seconds.
    init(reactor: any Reactor, endpoints: [EtcdEndpoint], timeout: Double) {
        self.reactor = reactor
        self.endpoints = endpoints
        self.timeout = timeout
        idle = Array(repeating: [], count: endpoints.count)
    }

    /// Sends `request` to member `index` on an idle connection, or on a new one (connected off
    /// the reactor's thread: resolving a name and connecting may block), and calls `completion`
    /// with the outcome on the reactor's thread.
    func exchange(_ index: Int, _ request: [UInt8], completion: @escaping ReactorHTTPConnection.Completion) {
        guard !stopped else {
            completion(.failure(HTTPConnection.Failure(description: "\(endpoints[index]): the agent is stopping", sent: false)))
            return
        }
        while let connection = idle[index].popLast() {
            if !connection.isClosedByPeer {
                start(connection, index, request, completion)
                return
            }
            connection.close()
        }
        let (endpoint, timeout, reactor) = (endpoints[index], timeout, reactor)
        DispatchQueue.global().async {
            let result = Result { () throws(HTTPConnection.Failure) in try HTTPConnection.connect(endpoint, timeout: timeout) }
            reactor.submit { self.connected(result, index, request, completion: completion) }
        }
    }

    /// Fails the exchanges under way and closes every connection: the reactor stops.
    func stop() {
        stopped = true
        for connection in busy.values { connection.abort("the agent stopped before etcd answered") }
        busy.removeAll()
        for list in idle { for connection in list { connection.close() } }
        idle = Array(repeating: [], count: endpoints.count)
    }

    private func connected(_ result: Result<Int32, HTTPConnection.Failure>, _ index: Int, _ request: [UInt8],
                           completion: @escaping ReactorHTTPConnection.Completion) {
        switch result {
        case .failure(let failure):
            completion(.failure(failure))
        case .success(let fd):
            guard !stopped, let connection = ReactorHTTPConnection(fd: fd, endpoint: endpoints[index], reactor: reactor) else {
                if stopped { Glibc.close(fd) }
                completion(.failure(HTTPConnection.Failure(description: "\(endpoints[index]): the connection could not be used", sent: false)))
                return
            }
            start(connection, index, request, completion)
        }
    }

    private func start(_ connection: ReactorHTTPConnection, _ index: Int, _ request: [UInt8],
                       _ completion: @escaping ReactorHTTPConnection.Completion) {
        let id = ObjectIdentifier(connection)
        busy[id] = connection
        connection.start(request, timeout: timeout) { result in
            self.busy[id] = nil
            if connection.isOpen {
                if !self.stopped && self.idle[index].count < Self.idlePerMember { self.idle[index].append(connection) } else { connection.close() }
            }
            completion(result)
        }
        sweepSoon()
    }

    /// While exchanges are under way, fails those past their deadline every ``sweepSeconds``.
    private func sweepSoon() {
        guard !sweeping, !busy.isEmpty, !stopped else { return }
        sweeping = true
        reactor.schedule(after: Self.sweepSeconds) {
            self.sweeping = false
            let now = MonotonicClock.seconds()
            for connection in self.busy.values where connection.deadline <= now { connection.timeOut() }
            self.sweepSoon()
        }
    }
}
