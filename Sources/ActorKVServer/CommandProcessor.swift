import ActorKVProtocol
import ActorKVStore

/// Runs a connection's requests against the store and produces their replies, in order.
///
/// Consecutive requests for the same namespace go to its actor as one run (one actor hop, one
/// log write), and their replies wait for the durability the fsync policy promises. Requests for
/// different namespaces from different connections run in parallel on their own actors.
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
        let creates = operations.contains { if case .put = $0 { return true }; if case .batch = $0 { return true }; return false }
        let namespace: Namespace?
        do {
            namespace = try await resolve(name, create: creates)
        } catch {
            return operations.map { _ in .failure(error) }
        }
        guard let namespace else { return operations.map(Self.outcomeInMissingNamespace) }
        var run = await namespace.execute(operations)
        do {
            try await run.durability.wait()
        } catch {
            let failure = error as? StoreError ?? StoreError(.io, "\(error)")
            for i in run.outcomes.indices where operations[i].isWrite {
                if case .failure = run.outcomes[i] { continue }
                run.outcomes[i] = .failure(failure)
            }
        }
        return run.outcomes
    }

    private func resolve(_ name: String, create: Bool) async throws(StoreError) -> Namespace? {
        if let open = store.openNamespace(name) { return open }
        return create ? try await store.namespace(name) : try await store.existingNamespace(name)
    }

    /// What an operation yields in a namespace that does not exist (and is not created by it).
    static func outcomeInMissingNamespace(_ operation: Operation) -> Outcome {
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
