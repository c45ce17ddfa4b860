import ActorKVProtocol
import ActorKVStore

/// Runs a connection's commands against the store and produces their replies, in order.
///
/// Consecutive data commands for the same namespace go to its actor as one run (one actor hop,
/// one log write), and their replies wait for the durability the fsync policy promises. Requests
/// for different namespaces from different connections run on their own actors, independently
/// (and, with `--execution pool`, in parallel).
/// No sockets here: the event loop hands in parsed commands and sends back what this returns.
public struct CommandProcessor: Sendable {
    /// Where commands find the data: the local store, or an etcd cluster.
    public let backend: any DataBackend
    /// The local store, when the data is local (nil in cluster mode).
    public var store: Store! { backend as? Store }
    /// The namespace permissions (`--acl`); nil: every client has every right.
    public let access: AccessControl?
    private let info: @Sendable (_ shows: @Sendable (String) -> Bool) async -> [UInt8]
    private let settings: [(name: String, value: String)]
    private let hashScanCursors = HashScanCursors()
    /// The sessions of the open connections (CLIENT LIST), kept by the event loop.
    public let clients = ClientRegistry()
    /// A shutdown asked for by a client (SHUTDOWN), watched by the event loop.
    public let shutdown = ShutdownRequest()
    private let sessionEnded: (@Sendable (ClientSession, SessionEnd) -> Void)?

    /// Creates a processor; `info` renders the INFO text, with the lines of the namespaces
    /// that `shows` accepts (those the client may read); `settings` are what CONFIG GET
    /// answers; `access` judges what each client may do; `sessionEnded`, if given, is told of
    /// each session after ``endSession(_:reason:)`` has released what it held.
    public init(store: Store, settings: [(name: String, value: String)] = [], access: AccessControl? = nil,
                info: @escaping @Sendable (_ shows: @Sendable (String) -> Bool) async -> [UInt8],
                sessionEnded: (@Sendable (ClientSession, SessionEnd) -> Void)? = nil) {
        self.init(backend: store, settings: settings, access: access, info: info, sessionEnded: sessionEnded)
    }

    /// Creates a processor over `backend` (the local store or an etcd cluster); the rest as
    /// ``init(store:settings:access:info:sessionEnded:)``.
    public init(backend: any DataBackend, settings: [(name: String, value: String)] = [], access: AccessControl? = nil,
                info: @escaping @Sendable (_ shows: @Sendable (String) -> Bool) async -> [UInt8],
                sessionEnded: (@Sendable (ClientSession, SessionEnd) -> Void)? = nil) {
        self.backend = backend
        self.access = access
        self.info = info
        self.settings = settings
        self.sessionEnded = sessionEnded
    }

    /// Parses and runs `requests` in order on a session of their own. `quit` is true when a QUIT
    /// was processed; requests after it are not run.
    public func process(_ requests: [[[UInt8]]]) async -> (replies: [Reply], quit: Bool) {
        await process(requests.map(Request.init))
    }

    /// Parses and runs `requests` in order on a session of their own. `quit` is true when a QUIT
    /// was processed; requests after it are not run.
    public func process(_ requests: [Request]) async -> (replies: [Reply], quit: Bool) {
        let session = ClientSession(id: 0, peer: nil)
        let replies = await process(requests.map(Command.init(parsing:)), session: session)
        return (replies, session.closeRequested)
    }

    /// Replies to `commands` in order. Stops after a command that closes the session (QUIT):
    /// the commands after it are not run.
    public func process(_ commands: [Command], session: ClientSession) async -> [Reply] {
        await process(commands, session: session, loop: nil)
    }

    /// ``process(_:session:)``, whose runs on a namespace happen at once, with no actor hop,
    /// whenever they are made on `loop`'s thread (see ``DataBackend/execute(_:inNamespace:on:)``).
    func process(_ commands: [Command], session: ClientSession, loop: LoopExecutor?) async -> [Reply] {
        var replies: [Reply] = []
        replies.reserveCapacity(commands.count)
        var group = Group()
        for unbound in commands {
            let command = unbound.bound(to: session)
            if let reply = Self.replyWithoutRunning(command, session: session) {
                await flush(&group, into: &replies, loop: loop)
                replies.append(reply)
                continue
            }
            switch command {
            case .data(let namespace, let operation, let shape):
                if group.namespace != namespace { await flush(&group, into: &replies, loop: loop) }
                group.namespace = namespace
                group.operations.append(operation)
                group.shapes.append(shape)
                continue
            case .owned, .refused:
                preconditionFailure("process: an owned put is bound to its session above, a refusal replied to")
            case .local(let local):
                await flush(&group, into: &replies, loop: loop)
                replies.append(await local.run(context(of: session, loop: loop)))
                if session.closeRequested { return replies }
            }
        }
        await flush(&group, into: &replies, loop: loop)
        return replies
    }

    /// ``process(_:session:loop:)`` done at once, with no task, when every command can be
    /// (``Command/runsNow``: PING, CLIENT SETNAME, CONFIG GET, a refusal, …); nil otherwise,
    /// having run nothing.
    func processNow(_ commands: [Command], session: ClientSession, loop: LoopExecutor?) -> [Reply]? {
        guard commands.allSatisfy(\.runsNow) else { return nil }
        var replies: [Reply] = []
        replies.reserveCapacity(commands.count)
        for command in commands {
            if let reply = Self.replyWithoutRunning(command, session: session) {
                replies.append(reply)
            } else if case .local(let local) = command, let reply = local.runNow(context(of: session, loop: loop)) {
                replies.append(reply)
                if session.closeRequested { break }
            }
        }
        return replies
    }

    /// The reply to a command that does not run as itself: queued inside MULTI, refused on a
    /// RESP2 connection that follows changes, or refused when it was parsed. Nil: it runs.
    private static func replyWithoutRunning(_ command: Command, session: ClientSession) -> Reply? {
        if session.inTransaction && !command.controlsTransaction { return TransactionCommands.queue(command, on: session) }
        if session.isFollowing && session.version == .resp2 && !command.isAllowedWhileFollowing { return ErrorMapping.notWhileFollowing }
        if case .refused(let error) = command { return ErrorMapping.reply(for: error) }
        return nil
    }

    /// What a local command of `session` is given to run.
    private func context(of session: ClientSession, loop: LoopExecutor?) -> CommandContext {
        CommandContext(backend: backend, session: session, info: info, settings: settings, hashScanCursors: hashScanCursors,
                       clients: clients, shutdown: shutdown, access: access, loop: loop)
    }

    /// Releases what `session` held, once its connection has ended and its last command has
    /// finished; the event loop calls it exactly once per session, however the connection ended.
    public func endSession(_ session: ClientSession, reason: SessionEnd) {
        // Follows started by a CHANGES that finished after the connection closed.
        for follow in session.takeNewFollows() { follow.start.feed.removeFollower() }
        releaseEphemeralKeys(of: session)
        sessionEnded?(session, reason)
    }

    /// Deletes the keys the session owned (`PUT … EPHEMERAL`), in the background: each as a
    /// logged delete that followers see.
    private func releaseEphemeralKeys(of session: ClientSession) {
        let namespaces = session.takeOwnedNamespaces()
        guard !namespaces.isEmpty else { return }
        let (backend, owner) = (self.backend, session.id)
        Task(executorPreference: backend.backgroundExecutor) {
            await backend.releaseOwner(owner, in: namespaces.sorted())
        }
    }

    /// One connection's commands handed over by the event loop, and later its replies.
    public struct Work: Sendable {
        /// The connection's session.
        public let session: ClientSession
        /// The commands, in order, unless they are all data commands on one namespace.
        let commands: [Command]
        /// When every command is a data command on one namespace: the namespace and the
        /// operations, in order (and ``commands`` is empty). Such work is merged with other
        /// connections' work on that namespace.
        let merge: Merge?
        /// The operations' reply shapes, when one is not ``ReplyShape/plain`` (nil: all are).
        let shapes: [ReplyShape]?
        /// When the commands are one transaction run as a data command (``merge`` holds its
        /// batch; ``commands`` keeps the commands, for a back end that does not merge).
        let transaction: MergedTransaction?

        /// Work that is all data commands on one namespace: the namespace, and the operations in
        /// order. (A struct, not a tuple: a tuple's copies went through the runtime's generic
        /// tuple witness, a few per request.)
        struct Merge: Sendable {
            let namespace: String
            let operations: [Operation]
        }

        /// A unit of work of `commands`, in order.
        public init(session: ClientSession, commands: consuming [Command]) {
            let namespace = Self.singleNamespace(of: commands)
            self.init(session: session, commands: commands, namespace: namespace)
        }

        /// A unit of work of `commands`, in order, which are all data commands on `namespace` if
        /// that is given (the event loop notes it as it parses them). With `mergingTransaction`
        /// (the connection is not inside MULTI, watches and follows nothing), commands that are
        /// exactly one transaction become its batch (``TransactionCommands/merged(_:)``).
        init(session: ClientSession, commands: consuming [Command], namespace: String?, mergingTransaction: Bool = false) {
            guard let namespace else {
                let transaction = mergingTransaction ? TransactionCommands.merged(commands, limit: session.transactionLimit) : nil
                self.init(session: session, commands: commands, merge: transaction.map { Merge(namespace: $0.namespace, operations: [$0.operation]) },
                          shapes: nil, transaction: transaction)
                return
            }
            var commands = commands
            self.init(session: session, draining: &commands, namespace: namespace)
        }

        private init(session: ClientSession, commands: [Command], merge: Merge?, shapes: [ReplyShape]?, transaction: MergedTransaction?) {
            self.session = session
            self.commands = commands
            self.merge = merge
            self.shapes = shapes
            self.transaction = transaction
        }

        /// A unit of work of `commands`, in order, which are all data commands on `namespace`,
        /// moved out of the array, which is left empty with its room (the connection's pending
        /// commands: no array to allocate for the next turn's, none to free for this one's).
        init(session: ClientSession, draining commands: inout [Command], namespace: String) {
            // Moved out of the commands one by one, from the back, each into its place, not
            // copied: a copy would retain each request's bytes once more, per request. (Not
            // appended and then reversed: `reverse` copies and destroys every element it swaps.
            // Not `Array(unsafeUninitializedCapacity:)` nor `Array(repeating:count:)`: either
            // looks the array's type up in the runtime's metadata cache on every call, a tenth
            // of a turn at one request; ``Operation/placeholders(count:)`` appends into reserved
            // room. A placeholder has nothing to release when it is overwritten.)
            let count = commands.count
            var shapes: [ReplyShape]?
            var operations = Operation.placeholders(count: count)
            var index = count
            while let command = commands.popLast() {
                guard case .data(_, let operation, let shape) = consume command else { preconditionFailure("Work: not a data command") }
                index -= 1
                operations[index] = operation
                if shape != .plain {
                    if shapes == nil { shapes = Self.plainShapes(count: count) }
                    shapes![index] = shape
                }
            }
            self.init(session: session, commands: [], merge: Merge(namespace: namespace, operations: operations), shapes: shapes,
                      transaction: nil)
        }

        /// `count` plain shapes, appended into reserved room: `Array(repeating:count:)` looked its
        /// storage's metadata up in the runtime's cache on every call (see ``Operation/placeholders(count:)``).
        private static func plainShapes(count: Int) -> [ReplyShape] {
            var shapes: [ReplyShape] = []
            shapes.reserveCapacity(count)
            for _ in 0..<count { shapes.append(.plain) }
            return shapes
        }

        /// The commands again, when they were moved into ``merge`` (for a back end that runs
        /// each connection's work on its own).
        var dataCommands: [Command] {
            guard transaction == nil, let merge else { return commands }
            return merge.operations.indices.map { .data(namespace: merge.namespace, merge.operations[$0], shape: shapes?[$0] ?? .plain) }
        }

        /// The namespace when every command is a data command on it.
        static func singleNamespace(of commands: borrowing [Command]) -> String? {
            var namespace: String?
            for index in commands.indices {
                guard let ns = commands[index].dataNamespace, namespace == nil || namespace == ns else { return nil }
                namespace = ns
            }
            return namespace
        }
    }

    /// The replies to one ``Work``.
    public struct Done: Sendable {
        /// The connection.
        public let connection: UInt64
        /// One reply per command run.
        public var replies: [Reply]
        /// Whether the session asked to close (QUIT).
        public let quit: Bool
    }

    /// Runs the commands of many connections at once (what one turn of the event loop read) and
    /// hands each connection's replies to `deliver` as soon as they may be sent.
    ///
    /// Connections whose commands all address one namespace with data commands are merged: one
    /// actor call and one log write for all of them, in connection order, each connection's
    /// commands in its own order. Each namespace's fsync wait (under `always`) is awaited in its
    /// own task, so one namespace's fsync never holds back another's replies. Anything else runs
    /// through ``process(_:session:)``. The tasks this starts prefer `executor` (nil: Swift's
    /// global executor).
    public func process(batch: [Work], executor: (any TaskExecutor)? = nil, deliver: @escaping @Sendable ([Done]) -> Void) async {
        var ready: [Done] = []
        for (namespace, parts) in startUnmerged(batch, executor: executor, deliver: deliver, now: false, ready: &ready).groups {
            await execute(parts, on: namespace, executor: executor, deliver: deliver, ready: &ready)
        }
        if !ready.isEmpty { deliver(ready) }
    }

    /// ``process(batch:executor:deliver:)`` from the event loop's thread, when the namespaces run
    /// on its executor: each merged namespace's run happens here, synchronously, if the back end
    /// can do it at once (``DataBackend/executeNow(_:inNamespace:)``: no task and no actor hop);
    /// the rest is started as tasks that prefer `executor`, which hand their replies to
    /// `deliver`. Appends the replies that are ready at once to `ready` (the loop takes them
    /// itself, not through `deliver`'s queue, in an array it keeps from turn to turn).
    func start(batch: [Work], executor: (any TaskExecutor)?, deliver: @escaping @Sendable ([Done]) -> Void, into ready: inout [Done]) {
        if batch.count == 1, let merge = batch[0].merge, backend.mergesConnections {
            // One connection's work (one client, or clients taking turns): nothing to group.
            start(CollectionOfOne(MergedWork.Part(work: batch[0], operations: merge.operations)), on: merge.namespace, executor: executor, deliver: deliver, ready: &ready)
        } else {
            for (namespace, parts) in startUnmerged(batch, executor: executor, deliver: deliver, now: true, ready: &ready).groups {
                start(parts, on: namespace, executor: executor, deliver: deliver, ready: &ready)
            }
        }
    }

    /// Runs a namespace's merged parts at once if the back end can, adding their replies to
    /// `ready` (or delivering them once durable); otherwise starts a task that runs them.
    private func start<Parts: Collection<MergedWork.Part> & Sendable>(_ parts: Parts, on namespace: String, executor: (any TaskExecutor)?,
                                                                      deliver: @escaping @Sendable ([Done]) -> Void, ready: inout [Done]) {
        let operations = Self.operations(of: parts)
        if let execution = backend.executeNow(operations, inNamespace: namespace) {
            return finish(execution, parts, operations, executor: executor, deliver: deliver, ready: &ready)
        }
        Task(executorPreference: executor) {
            var ready: [Done] = []
            await execute(parts, on: namespace, executor: executor, deliver: deliver, ready: &ready)
            if !ready.isEmpty { deliver(ready) }
        }
    }

    /// Starts a task for each work that is not merged (``Work/merge`` nil, or a back end that
    /// does not merge connections); returns the rest grouped by namespace. `now` (on the event
    /// loop's thread): a work whose commands all run at once (``processNow(_:session:loop:)``)
    /// runs here, its replies added to `ready`.
    private func startUnmerged(_ batch: [Work], executor: (any TaskExecutor)?, deliver: @escaping @Sendable ([Done]) -> Void,
                               now: Bool, ready: inout [Done]) -> MergedWork {
        var merged = MergedWork()
        for work in batch {
            guard let merge = work.merge, backend.mergesConnections else {
                if now, work.merge == nil,
                   let replies = processNow(work.commands, session: work.session, loop: executor as? LoopExecutor) {
                    ready.append(Done(connection: work.session.id, replies: replies, quit: work.session.closeRequested))
                    continue
                }
                Task(executorPreference: executor) {
                    let replies = await process(work.merge == nil ? work.commands : work.dataCommands, session: work.session,
                                                loop: executor as? LoopExecutor)
                    deliver([Done(connection: work.session.id, replies: replies, quit: work.session.closeRequested)])
                }
                continue
            }
            merged.add(work, merge.operations, on: merge.namespace)
        }
        return merged
    }

    /// Runs a namespace's merged parts through the back end's asynchronous path, then ``finish``.
    private func execute<Parts: Collection<MergedWork.Part> & Sendable>(_ parts: Parts, on namespace: String, executor: (any TaskExecutor)?,
                                                                        deliver: @escaping @Sendable ([Done]) -> Void, ready: inout [Done]) async {
        let operations = Self.operations(of: parts)
        let execution = await backend.execute(operations, inNamespace: namespace)
        finish(execution, parts, operations, executor: executor, deliver: deliver, ready: &ready)
    }

    /// The operations of a namespace's merged parts, in order.
    private static func operations<Parts: Collection<MergedWork.Part>>(of parts: Parts) -> [Operation] {
        parts.count == 1 ? parts.first!.operations : parts.flatMap(\.operations)
    }

    /// The replies of a merged run: added to `ready` when its writes need no wait, otherwise
    /// delivered by a task once they are durable (under `always`, each namespace's fsync is
    /// awaited in its own task, so one namespace's fsync never holds back another's replies).
    private func finish<Parts: Collection<MergedWork.Part> & Sendable>(_ execution: Execution, _ parts: Parts, _ operations: [Operation],
                                                                       executor: (any TaskExecutor)?,
                                                                       deliver: @escaping @Sendable ([Done]) -> Void, ready: inout [Done]) {
        guard !execution.durability.isImmediate else { return Self.done(parts, execution.outcomes, into: &ready) }
        Task(executorPreference: executor) {
            var done: [Done] = []
            Self.done(parts, await execution.settled(operations), into: &done)
            deliver(done)
        }
    }

    /// Appends each connection's replies to its part of a merged run's `outcomes` (in the
    /// parts' order) to `ready`.
    private static func done<Parts: Collection<MergedWork.Part>>(_ parts: Parts, _ outcomes: [Outcome], into ready: inout [Done]) {
        if ready.isEmpty { ready.reserveCapacity(parts.count) }  // later namespaces' grow it as appends do
        var offset = 0
        for part in parts {
            defer { offset += part.operations.count }
            let mine = outcomes[offset..<(offset + part.operations.count)]
            if let transaction = part.transaction {
                ready.append(Done(connection: part.connection, replies: transaction.replies(to: mine[mine.startIndex]), quit: false))
                continue
            }
            guard let shapes = part.shapes else {
                // By index, not zipped: the zip's copies of each operation (a retain and a
                // release of its request's bytes) showed in profiles (HOTPATHS round 45).
                let operations = part.operations
                let replies = mine.indices.map { KeyValueCommands.reply(for: mine[$0], ofBatch: operations[$0 - offset].isBatch) }
                ready.append(Done(connection: part.connection, replies: replies, quit: false))
                continue
            }
            let replies = mine.indices.map {
                KeyValueCommands.reply(for: mine[$0], ofBatch: part.operations[$0 - offset].isBatch, shape: shapes[$0 - offset])
            }
            ready.append(Done(connection: part.connection, replies: replies, quit: false))
        }
    }

    /// A turn's data work grouped by namespace, in the order each namespace first came. A turn
    /// usually touches one or a few namespaces, so they are found by a look along the list (no
    /// hashing of names); an index by name is built only when there are more.
    struct MergedWork {
        /// One connection's work in the group, and its operations. A struct, not a tuple: a
        /// tuple holding a ``Work`` was copied, in the generic code that walks the parts,
        /// through the runtime's tuple witnesses (2% of the server's own CPU at one request a turn).
        ///
        /// It holds what the replies need of the work, not the work: a copy of the work retained
        /// its session, commands, namespace and operations, and released them again, per turn.
        struct Part: Sendable {
            /// The connection's id, where the replies go.
            let connection: UInt64
            /// The work's reply shapes (nil: all plain).
            let shapes: [ReplyShape]?
            /// The transaction the work runs as a data command, if it is one.
            let transaction: MergedTransaction?
            /// The work's operations, in order.
            let operations: [Operation]

            init(work: borrowing Work, operations: [Operation]) {
                connection = work.session.id
                shapes = work.shapes
                transaction = work.transaction
                self.operations = operations
            }
        }
        private(set) var groups: [(namespace: String, parts: [Part])] = []
        private var index: [String: Int] = [:]
        /// How many groups are looked for along the list before an index is built.
        static let listed = 8

        mutating func add(_ work: Work, _ operations: [Operation], on namespace: String) {
            let found: Int?
            if groups.count <= Self.listed {
                found = groups.firstIndex { $0.namespace == namespace }
            } else {
                if index.isEmpty { for (at, group) in groups.enumerated() { index[group.namespace] = at } }
                found = index[namespace]
            }
            if let found {
                groups[found].parts.append(Part(work: work, operations: operations))
            } else {
                if !index.isEmpty { index[namespace] = groups.count }
                groups.append((namespace, [Part(work: work, operations: operations)]))
            }
        }
    }

    private struct Group {
        var namespace: String?
        var operations: [Operation] = []
        var shapes: [ReplyShape] = []
    }

    private func flush(_ group: inout Group, into replies: inout [Reply], loop: LoopExecutor?) async {
        guard let name = group.namespace, !group.operations.isEmpty else { return }
        let (operations, shapes) = (group.operations, group.shapes)
        group = Group()
        let execution = await backend.execute(operations, inNamespace: name, on: loop)
        for (index, outcome) in await execution.settled(operations).enumerated() {
            replies.append(KeyValueCommands.reply(for: outcome, ofBatch: operations[index].isBatch, shape: shapes[index]))
        }
    }
}
