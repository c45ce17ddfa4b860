import ActorKVProtocol
import ActorKVStore

/// Runs a connection's requests against the store and produces their replies, in order.
///
/// Consecutive requests for the same namespace go to its actor as one run (one actor hop, one
/// log write), and their replies wait for the durability the fsync policy promises. Requests for
/// different namespaces from different connections run on their own actors, independently
/// (and, with `--execution pool`, in parallel).
/// No sockets here: the event loop hands in decoded requests and sends back what this returns.
public struct CommandProcessor: Sendable {
    /// The store commands run against.
    public let store: Store
    private let info: @Sendable () async -> [UInt8]

    /// Creates a processor; `info` renders the INFO text.
    public init(store: Store, info: @escaping @Sendable () async -> [UInt8]) {
        self.store = store
        self.info = info
    }

    /// Replies to `requests` in order. `quit` is true when a QUIT was processed; requests after it
    /// are not run.
    public func process(_ requests: [[[UInt8]]]) async -> (replies: [Reply], quit: Bool) {
        await process(requests.map(Request.init))
    }

    /// Replies to `requests` in order. `quit` is true when a QUIT was processed; requests after it
    /// are not run.
    public func process(_ requests: [Request]) async -> (replies: [Reply], quit: Bool) {
        var replies: [Reply] = []
        replies.reserveCapacity(requests.count)
        var group = Group()
        for arguments in requests {
            let command: Command
            do {
                command = try Command.parse(arguments)
            } catch {
                await flush(&group, into: &replies)
                replies.append(ErrorMapping.reply(for: error))
                continue
            }
            if case .data(let namespace, let operation) = command {
                if group.namespace != namespace { await flush(&group, into: &replies) }
                group.namespace = namespace
                group.operations.append(operation)
                continue
            }
            await flush(&group, into: &replies)
            replies.append(await run(command))
            if case .quit = command { return (replies, true) }
        }
        await flush(&group, into: &replies)
        return (replies, false)
    }

    /// One connection's requests handed over by the event loop, and later its replies.
    public struct Work: Sendable {
        /// The connection.
        public let connection: UInt64
        /// Its requests, in order.
        public let requests: [Request]

        /// Creates a unit of work.
        public init(connection: UInt64, requests: [Request]) {
            self.connection = connection
            self.requests = requests
        }
    }

    /// The replies to one ``Work``.
    public struct Done: Sendable {
        /// The connection.
        public let connection: UInt64
        /// One reply per request run.
        public var replies: [Reply]
        /// Whether a QUIT was run.
        public let quit: Bool
    }

    /// Runs the requests of many connections at once (what one turn of the event loop read) and
    /// hands each connection's replies to `deliver` as soon as they may be sent.
    ///
    /// Connections whose requests all address one namespace are merged: one actor call and one log
    /// write for all of them, in connection order, each connection's requests in its own order.
    /// Each namespace's fsync wait (under `always`) is awaited in its own task, so one namespace's
    /// fsync never holds back another's replies. Anything else runs through ``process(_:)``.
    /// The tasks this starts prefer `executor` (nil: Swift's global executor).
    public func process(batch: [Work], executor: (any TaskExecutor)? = nil, deliver: @escaping @Sendable ([Done]) -> Void) async {
        var merged: [String: [(work: Work, operations: [Operation])]] = [:]
        var order: [String] = []
        for work in batch {
            guard let (namespace, operations) = Self.singleNamespace(work.requests) else {
                Task(executorPreference: executor) { let (replies, quit) = await process(work.requests); deliver([Done(connection: work.connection, replies: replies, quit: quit)]) }
                continue
            }
            if merged[namespace] == nil { order.append(namespace) }
            merged[namespace, default: []].append((work, operations))
        }
        var ready: [Done] = []
        for namespace in order {
            let parts = merged[namespace]!
            let (outcomes, durability) = await executeMerged(parts.flatMap(\.operations), in: namespace)
            let done = { (outcomes: [Outcome]) -> [Done] in
                var offset = 0
                return parts.map { part in
                    defer { offset += part.operations.count }
                    let replies = outcomes[offset..<(offset + part.operations.count)].map(Self.reply(for:))
                    return Done(connection: part.work.connection, replies: replies, quit: false)
                }
            }
            guard let durability else { ready += done(outcomes); continue }
            let operations = parts.flatMap(\.operations)
            Task(executorPreference: executor) {
                deliver(done(await Self.awaitDurability(durability, outcomes, operations)))
            }
        }
        if !ready.isEmpty { deliver(ready) }
    }

    /// The namespace and operations when every request is a well-formed data command on one namespace.
    static func singleNamespace(_ requests: [Request]) -> (String, [Operation])? {
        var namespace: String?
        var operations: [Operation] = []
        operations.reserveCapacity(requests.count)
        for arguments in requests {
            guard case .data(let ns, let operation)? = try? Command.parse(arguments), namespace == nil || namespace == ns else {
                return nil
            }
            namespace = ns
            operations.append(operation)
        }
        guard let namespace else { return nil }
        return (namespace, operations)
    }

    private func executeMerged(_ operations: [Operation], in name: String) async -> ([Outcome], Durability?) {
        do {
            guard let namespace = try await resolve(name, create: createsNamespace(operations)) else {
                return (operations.map(outcomeInMissingNamespace), nil)
            }
            let run = await namespace.execute(operations)
            return (run.outcomes, run.durability.isImmediate ? nil : run.durability)
        } catch {
            return (operations.map { _ in .failure(error) }, nil)
        }
    }

    private static func awaitDurability(_ durability: Durability, _ outcomes: [Outcome], _ operations: [Operation]) async -> [Outcome] {
        do {
            try await durability.wait()
            return outcomes
        } catch {
            let failure = error as? StoreError ?? StoreError(.io, "\(error)")
            var outcomes = outcomes
            for i in outcomes.indices where operations[i].isWrite {
                if case .failure = outcomes[i] { continue }
                outcomes[i] = .failure(failure)
            }
            return outcomes
        }
    }

    private struct Group {
        var namespace: String?
        var operations: [Operation] = []
    }

    private func flush(_ group: inout Group, into replies: inout [Reply]) async {
        guard let name = group.namespace, !group.operations.isEmpty else { return }
        let operations = group.operations
        group = Group()
        for outcome in await execute(operations, in: name) { replies.append(Self.reply(for: outcome)) }
    }

    private func execute(_ operations: [Operation], in name: String) async -> [Outcome] {
        let namespace: Namespace?
        do {
            namespace = try await resolve(name, create: createsNamespace(operations))
        } catch {
            return operations.map { _ in .failure(error) }
        }
        guard let namespace else { return operations.map(outcomeInMissingNamespace) }
        let run = await namespace.execute(operations)
        return await Self.awaitDurability(run.durability, run.outcomes, operations)
    }

    private func resolve(_ name: String, create: Bool) async throws(StoreError) -> Namespace? {
        if let open = store.openNamespace(name) { return open }
        return create ? try await store.namespace(name) : try await store.existingNamespace(name)
    }

    /// Whether the operations bring their namespace into existence: a valid PUT, or a valid batch
    /// that puts. Rejected writes and deletes never create one.
    private func createsNamespace(_ operations: [Operation]) -> Bool {
        operations.contains { operation in
            let puts: Bool
            switch operation {
            case .put: puts = true
            case .batch(let mutations): puts = mutations.contains { if case .put = $0 { return true }; return false }
            default: puts = false
            }
            return puts && store.options.limits.problem(with: operation) == nil
        }
    }

    /// What an operation yields in a namespace that does not exist (and is not created by it).
    private func outcomeInMissingNamespace(_ operation: Operation) -> Outcome {
        if let problem = store.options.limits.problem(with: operation) { return .failure(problem) }
        switch operation {
        case .get: return .value(nil)
        case .exists, .count, .delete: return .integer(0)
        case .scan: return .page(ScanPage(entries: [], next: .start))
        case .batch(let mutations): return .batch(mutations.map { _ in false })
        case .put: return .stored
        }
    }

    private func run(_ command: Command) async -> Reply {
        switch command {
        case .ping(let message): return message.map(Reply.bulk) ?? .simple("PONG")
        case .quit: return .simple("OK")
        case .info: return .bulk(await info())
        case .clientProbe: return .array([])
        case .namespaces: return .array(await store.namespaceNames().map { .bulk(Array($0.utf8)) })
        case .compact(let name):
            do {
                try await resolve(name, create: false)?.compact()
                return .simple("OK")
            } catch {
                return ErrorMapping.reply(for: error)
            }
        case .data: return .error("ERR internal: data command outside a group")
        }
    }

    /// The wire reply of an operation's outcome.
    static func reply(for outcome: Outcome) -> Reply {
        switch outcome {
        case .value(let value): return value.map(Reply.bulk) ?? .null
        case .stored: return .simple("OK")
        case .integer(let n): return .integer(Int64(n))
        case .batch(let results): return .array(results.map { $0.map { .integer($0 ? 1 : 0) } ?? .simple("OK") })
        case .page(let page):
            var flat: [Reply] = []
            flat.reserveCapacity(page.entries.count * 2)
            for entry in page.entries { flat.append(.bulk(entry.key)); flat.append(.bulk(entry.value)) }
            return .array([.bulk(page.next.text), .array(flat)])
        case .failure(let error): return ErrorMapping.reply(for: error)
        }
    }
}
