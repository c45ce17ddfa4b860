import Dispatch
import Synchronization

/// The agent's client of an etcd cluster's v3 JSON gateway: a pool of keep-alive HTTP/1.1
/// connections per member, failing over between the members listed.
///
/// Once attached to a ``Reactor`` (the server's event loop), each call is a non-blocking
/// exchange on the reactor's thread; before (and after), a blocking exchange on a Dispatch
/// worker thread, never on Swift's cooperative threads. A call goes to the member that answered last; a member that cannot be
/// reached, or that has no leader, is passed over for the next. A read is retried on the next
/// member whatever happened; a write only if it was not sent, or the member said it had no
/// leader (refused before proposing it): a write sent without an answer, or refused in any other
/// way that etcd reports as unavailable, has an unknown outcome (``EtcdError/Kind/outcomeUnknown``).
public final class EtcdClient: Sendable {
    /// The members, in the order given.
    public let endpoints: [EtcdEndpoint]
    /// Seconds a connect, a send or a wait for an answer may take.
    public let timeout: Double
    private let preferred = Atomic<Int>(0)
    private let idle: Mutex<[[HTTPConnection]]>
    private let roundTrips = Mutex(RoundTripStatistics())
    /// The connections on the reactor calls run on (nil: none; blocking calls on Dispatch threads).
    private let onReactor = Mutex<ReactorConnections?>(nil)

    /// Round-trip times to etcd, for INFO.
    public struct RoundTripStatistics: Sendable {
        /// Exchanges completed.
        public var count = 0
        /// An exponentially weighted mean, in microseconds.
        public var meanMicroseconds = 0.0
        /// The last one, in microseconds.
        public var lastMicroseconds = 0.0
    }

    /// A client of the members at `endpoints`.
    public init(endpoints: [EtcdEndpoint], timeout: Double = 5) {
        precondition(!endpoints.isEmpty, "EtcdClient: no endpoint")
        self.endpoints = endpoints
        self.timeout = timeout
        idle = Mutex(Array(repeating: [], count: endpoints.count))
    }

    /// Round-trip figures so far.
    public var statistics: RoundTripStatistics { roundTrips.withLock { $0 } }

    /// The member calls go to first.
    public var currentEndpoint: EtcdEndpoint { endpoints[preferred.load(ordering: .relaxed) % endpoints.count] }

    /// From now on, calls run on `reactor`, without blocking: each request is sent, and its
    /// answer read, on the reactor's thread (the server's event loop) when it is ready.
    public func attach(to reactor: any Reactor) {
        onReactor.withLock { $0 = ReactorConnections(reactor: reactor, endpoints: endpoints, timeout: timeout) }
    }

    /// The reactor calls run on (nil: none).
    public var reactor: (any Reactor)? { onReactor.withLock { $0?.reactor } }

    /// Calls go back to blocking exchanges on Dispatch threads; those under way on the reactor
    /// fail (a write's outcome is then unknown). Called on the reactor's thread, as it stops.
    public func detachFromReactor() {
        let connections = onReactor.withLock { current -> ReactorConnections? in
            defer { current = nil }
            return current
        }
        connections?.stop()
    }

    /// POSTs `body` to `path` and returns the body of the 200 answer. `write`: the call changes
    /// data, so it is not retried once sent.
    public func call(_ path: String, body: [UInt8], write: Bool) async throws(EtcdError) -> [UInt8] {
        if let connections = onReactor.withLock({ $0 }) {
            return try await call(path, body: body, write: write, on: connections)
        }
        let result: Result<[UInt8], EtcdError> = await withCheckedContinuation { done in
            DispatchQueue.global().async {
                done.resume(returning: Result { () throws(EtcdError) in try self.blockingCall(path, body: body, write: write) })
            }
        }
        return try result.get()
    }

    /// ``call(_:body:write:)``, its answer read as `type`.
    func call<Answer: JSONReadable>(_ type: Answer.Type, _ path: String, body: [UInt8], write: Bool) async throws(EtcdError) -> Answer {
        try EtcdResponses.decode(type, from: try await call(path, body: body, write: write))
    }

    /// ``call(_:body:write:)`` on `connections`' reactor.
    private func call(_ path: String, body: [UInt8], write: Bool, on connections: ReactorConnections) async throws(EtcdError) -> [UInt8] {
        let start = preferred.load(ordering: .relaxed)
        var reasons: [String] = []
        for attempt in 0..<endpoints.count {
            let index = (start + attempt) % endpoints.count
            let began = MonotonicClock.seconds()
            let request = HTTPConnection.request(path, body: body, headers: Self.headers(for: path), to: endpoints[index])
            let result = await withUnsafeContinuation { done in
                connections.reactor.submit { connections.exchange(index, request) { done.resume(returning: $0) } }
            }
            switch judge(result, from: index, start: start, write: write, began: began) {
            case .answer(let body): return body
            case .nextMember(let reason): reasons.append(reason)
            case .failure(let error): throw error
            }
        }
        throw EtcdError(.unavailable, "no etcd member answered: " + reasons.joined(separator: "; "))
    }

    /// ``call(_:body:write:)`` on the calling thread (which may block for the timeout per member).
    public func blockingCall(_ path: String, body: [UInt8], write: Bool) throws(EtcdError) -> [UInt8] {
        let start = preferred.load(ordering: .relaxed)
        var reasons: [String] = []
        for attempt in 0..<endpoints.count {
            let index = (start + attempt) % endpoints.count
            let began = MonotonicClock.seconds()
            let result: Result<HTTPResponse, HTTPConnection.Failure>
            do {
                let connection = try checkOut(index)
                let response = try connection.post(path, body: body, headers: Self.headers(for: path))
                if response.keepAlive { checkIn(connection, index) }
                result = .success(response)
            } catch {
                result = .failure(error)
            }
            switch judge(result, from: index, start: start, write: write, began: began) {
            case .answer(let body): return body
            case .nextMember(let reason): reasons.append(reason)
            case .failure(let error): throw error
            }
        }
        throw EtcdError(.unavailable, "no etcd member answered: " + reasons.joined(separator: "; "))
    }

    /// What one attempt of a call comes to.
    private enum Verdict {
        /// The body of etcd's 200 answer.
        case answer([UInt8])
        /// Ask the next member (the reason, for the error if none answers).
        case nextMember(String)
        /// The call fails.
        case failure(EtcdError)
    }

    /// Judges the outcome of an attempt on member `index` (the call began with member `start`).
    /// A read goes on to the next member whatever happened; a write only if it was not sent,
    /// or the member had no leader (refused before proposing it).
    private func judge(_ result: Result<HTTPResponse, HTTPConnection.Failure>, from index: Int, start: Int, write: Bool,
                       began: Double) -> Verdict {
        let response: HTTPResponse
        switch result {
        case .failure(let failure):
            if write && failure.sent {
                return .failure(EtcdError(.outcomeUnknown, "the connection to etcd failed after the write was sent (\(failure.description)): it may or may not have been applied"))
            }
            return .nextMember(failure.description)
        case .success(let answer):
            response = answer
        }
        note(MonotonicClock.seconds() - began)
        if response.status == 200 {
            if index != start { preferred.store(index, ordering: .relaxed) }
            return .answer(response.body)
        }
        let answer = try? EtcdResponses.decode(EtcdResponses.Error.self, from: response.body)
        let message = answer?.message ?? answer?.error ?? String(decoding: response.body.prefix(200), as: UTF8.self)
        let error = EtcdError.answered(status: response.status, code: answer?.code ?? 0, message: message)
        guard error.kind == .unavailable else { return .failure(error) }
        // A member without a leader refuses a write before proposing it (etcd's hasleader
        // check): the next member may take it. Any other unavailability of a write (a timeout,
        // the member stopping) may come after it was proposed, and it may have been applied:
        // sending it again could apply it twice.
        if write && !message.lowercased().contains("no leader") {
            // The next call starts with the next member: this one may be stopping.
            _ = preferred.compareExchange(expected: start, desired: (index + 1) % endpoints.count, ordering: .relaxed)
            return .failure(EtcdError(.outcomeUnknown, "etcd did not confirm the write (\(message)): it may or may not have been applied"))
        }
        return .nextMember("\(endpoints[index]): \(message)")
    }

    /// The headers of a call to `path`. Data and lease calls ask the member to refuse at once
    /// when it has no leader (etcd's `hasleader` metadata), rather than hold a write it cannot
    /// commit until the timeout leaves its outcome unknown: the next member is asked instead,
    /// and with none `-UNAVAILABLE` says that nothing was applied. Status calls (INFO) go
    /// without, so that a member without leader still says so.
    static func headers(for path: String) -> [String] {
        path.hasPrefix("/v3/kv/") || path.hasPrefix("/v3/lease/") ? ["Grpc-Metadata-hasleader: true"] : []
    }

    /// Opens a connection to the member answering now, for a streamed call (watch): the caller
    /// owns and closes it.
    public func streamingConnection() throws(EtcdError) -> HTTPConnection {
        let start = preferred.load(ordering: .relaxed)
        var reasons: [String] = []
        for attempt in 0..<endpoints.count {
            let index = (start + attempt) % endpoints.count
            do { return try HTTPConnection(endpoint: endpoints[index], timeout: timeout) } catch {
                reasons.append(error.description)
            }
        }
        throw EtcdError(.unavailable, "no etcd member answered: " + reasons.joined(separator: "; "))
    }

    /// Closes every idle connection.
    public func closeAll() {
        let all = idle.withLock { lists in
            defer { lists = Array(repeating: [], count: lists.count) }
            return lists.flatMap { $0 }
        }
        for connection in all { connection.close() }
    }

    /// An idle connection to member `index` that is still open (those the member closed are
    /// dropped), or a new one.
    private func checkOut(_ index: Int) throws(HTTPConnection.Failure) -> HTTPConnection {
        while let connection = idle.withLock({ $0[index].popLast() }) {
            if !connection.isClosedByPeer { return connection }
            connection.close()
        }
        return try HTTPConnection(endpoint: endpoints[index], timeout: timeout)
    }

    private func checkIn(_ connection: HTTPConnection, _ index: Int) {
        let kept = idle.withLock { lists -> Bool in
            guard lists[index].count < 256 else { return false }
            lists[index].append(connection)
            return true
        }
        if !kept { connection.close() }
    }

    private func note(_ seconds: Double) {
        let micro = seconds * 1e6
        roundTrips.withLock { s in
            s.count += 1
            s.lastMicroseconds = micro
            s.meanMicroseconds = s.count == 1 ? micro : s.meanMicroseconds * 0.95 + micro * 0.05
        }
    }
}
