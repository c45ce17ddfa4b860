// Running a command of `actorkv` against the server: one method per command.
import ActorKVClient
import ActorKVProtocol
import Glibc

/// Runs one ``Invocation``'s command against its server, printing what the command prints to
/// `output`, and returns the program's exit status (see `usage`). `lock` is in LockCommand.swift.
struct CommandRunner {
    let invocation: Invocation
    let client: ActorKVClient
    let output: Output
    /// The signal mask the program started with, for the command `lock` runs.
    let signalMask: sigset_t

    /// The command's operands.
    var args: [[UInt8]] { invocation.operands }
    /// The first operand as a namespace name.
    var namespace: String { text(args[0]) }
    /// "Any number of operands", as an upper bound for ``need(_:_:)``.
    static let many = Int.max - 1

    init(_ invocation: Invocation, output: Output, signalMask: sigset_t) {
        self.invocation = invocation
        // A backup takes as long as the data takes to write, a shutdown as long as the requests in
        // flight and the last fsyncs take: waited for, unless --timeout says.
        let waits = invocation.kind == .backup || invocation.kind == .shutdown
        let timeout = waits && !invocation.timeoutGiven ? nil : invocation.timeout
        self.client = ActorKVClient(socketPath: invocation.socketPath, timeout: timeout)
        self.output = output
        self.signalMask = signalMask
    }

    /// Runs the command and closes the client; a failure carries the exit status it ends with.
    func run() async throws(Failure) -> Int32 {
        let status: Int32
        do {
            status = try await perform()
        } catch let error as Failure {
            throw error
        } catch let error as ActorKVError {
            throw Failure(error, socketPath: invocation.socketPath, pendingWrite: invocation.kind?.writes == true ? invocation.command : nil)
        } catch {
            throw Failure(code: Exit.server, message: "actorkv: \(error)")
        }
        await client.close()
        return status
    }

    /// Fails with the command's usage unless it has a number of operands in `range`.
    func need(_ range: ClosedRange<Int>, _ form: String) throws(Failure) {
        guard range.contains(args.count) else { throw usageFailure("usage: actorkv \(form)") }
    }

    private func perform() async throws -> Int32 {
        guard let command = invocation.kind else {
            throw usageFailure("unknown command '\(text(invocation.commandWord))'")
        }
        switch command {
        case .get: return try await get()
        case .put: return try await put()
        case .getv: return try await getVersioned()
        case .pttl: return try await timeToLive()
        case .expire: return try await expire()
        case .persist: return try await persist()
        case .lock: return try await lock()
        case .incr: return try await increment()
        case .del: return try await delete()
        case .exists: return try await exists()
        case .count: return try await count()
        case .memory: return try await memory()
        case .scan: return try await scan()
        case .batch: return try await batch()
        case .changes: return try await changes()
        case .compact: return try await compact()
        case .unlink: return try await unlink()
        case .rename, .renamenx: return try await rename(replacing: command == .rename)
        case .copy: return try await copy()
        case .backup: return try await backup()
        case .sync: return try await sync()
        case .namespaces: return try await namespaces()
        case .info: return try await info()
        case .ping: return try await ping()
        case .clients: return try await clients()
        case .killClient: return try await killClient()
        case .shutdown: return try await shutdown()
        }
    }

    private func get() async throws -> Int32 {
        try need(2...2, "get NS KEY")
        guard let value = try await client.get(namespace, args[1]) else { return Exit.notFound }
        try output.write(value)
        return Exit.ok
    }

    private func put() async throws -> Int32 {
        try need(3...3, "put [--if-version V] [--ttl SECS] [--] NS KEY VALUE   (VALUE '-' reads standard input)")
        let value = args[2] == [UInt8(ascii: "-")] ? try readStandardInput() : args[2]
        guard let ifVersion = invocation.ifVersion else {
            try await client.put(namespace, args[1], value, ttl: invocation.ttl)
            return Exit.ok
        }
        guard let version = try await client.put(namespace, args[1], value, ifVersion: ifVersion, ttl: invocation.ttl) else {
            throw Failure(code: Exit.conditionFailed, message: "actorkv: not written: the key's version is not \(ifVersion)")
        }
        try output.line(String(version))
        return Exit.ok
    }

    private func getVersioned() async throws -> Int32 {
        try need(2...2, "getv NS KEY")
        guard let found = try await client.getVersioned(namespace, args[1]) else {
            try output.line("0")
            return Exit.notFound
        }
        try output.line(String(found.version))
        try output.write(found.value)
        return Exit.ok
    }

    private func timeToLive() async throws -> Int32 {
        try need(1...2, "pttl NS [KEY]")
        let left = try await args.count == 1 ? client.pttl(namespace) : client.pttl(namespace, args[1])
        switch left {
        case .absent:
            try output.line("-2")
            return Exit.notFound
        case .persistent:
            try output.line("-1")
        case .remaining(let left):
            try output.line(String(Int64((left / .milliseconds(1)).rounded())))
        }
        return Exit.ok
    }

    private func expire() async throws -> Int32 {
        try need(2...3, "expire NS [KEY] SECS")
        let ttl = try parseSeconds(text(args[args.count - 1]), "expire: SECS", positive: true)
        let set = try await args.count == 2 ? client.pexpire(namespace, ttl: ttl) : client.pexpire(namespace, args[1], ttl: ttl)
        try output.line(set ? "1" : "0")
        return set ? Exit.ok : Exit.notFound
    }

    private func persist() async throws -> Int32 {
        try need(1...2, "persist NS [KEY]")
        let removed = try await args.count == 1 ? client.persist(namespace) : client.persist(namespace, args[1])
        try output.line(removed ? "1" : "0")
        return Exit.ok
    }

    private func increment() async throws -> Int32 {
        try need(2...3, "incr NS KEY [DELTA]")
        let delta = try args.count == 3 ? parseInteger(text(args[2]), "incr: DELTA") : 1
        try output.line(String(try await client.increment(namespace, args[1], by: delta)))
        return Exit.ok
    }

    private func delete() async throws -> Int32 {
        try need(2...Self.many, "del NS KEY...")
        try output.line(String(try await client.delete(namespace, Array(args[1...]))))
        return Exit.ok
    }

    private func unlink() async throws -> Int32 {
        try need(1...Self.many, "unlink NS...")
        try output.line(String(try await client.removeNamespaces(args.map(text))))
        return Exit.ok
    }

    /// RENAME / RENAMENX: nothing printed; exit 1 if NS holds no key, 5 (renamenx) if NEWNS does.
    private func rename(replacing: Bool) async throws -> Int32 {
        try need(2...2, replacing ? "rename NS NEWNS" : "renamenx NS NEWNS")
        do {
            guard try await client.renameNamespace(text(args[0]), to: text(args[1]), replacing: replacing) else {
                throw Failure(code: Exit.conditionFailed, message: "actorkv: not renamed: \(text(args[1])) holds a key")
            }
        } catch ActorKVError.server("ERR", "no such key") {
            throw Failure(code: Exit.notFound, message: "actorkv: not renamed: \(text(args[0])) holds no key")
        }
        return Exit.ok
    }

    /// COPY: nothing printed; exit 1 if NS holds no key, 5 if NEWNS holds one (without --replace).
    private func copy() async throws -> Int32 {
        try need(2...2, "copy [--replace] NS NEWNS")
        let (source, target) = (text(args[0]), text(args[1]))
        guard try await client.copyNamespace(source, to: target, replacing: invocation.replace) else {
            // COPY answers 0 for both; which one it was is asked after (only the message depends on it).
            if try await client.count(source) == 0 {
                throw Failure(code: Exit.notFound, message: "actorkv: not copied: \(source) holds no key")
            }
            throw Failure(code: Exit.conditionFailed, message: "actorkv: not copied: \(target) holds a key (--replace drops its keys)")
        }
        return Exit.ok
    }

    private func exists() async throws -> Int32 {
        try need(2...Self.many, "exists NS KEY...")
        let n = try await client.exists(namespace, Array(args[1...]))
        try output.line(String(n))
        return n < args.count - 1 ? Exit.notFound : Exit.ok
    }

    private func count() async throws -> Int32 {
        try need(1...1, "count NS")
        try output.line(String(try await client.count(namespace)))
        return Exit.ok
    }

    /// MEMORY USAGE: the bytes NS takes in the server's memory; exit 1, printing nothing, when
    /// it holds no key.
    private func memory() async throws -> Int32 {
        try need(1...1, "memory NS")
        guard let bytes = try await client.memoryUsage(of: namespace) else { return Exit.notFound }
        try output.line(String(bytes))
        return Exit.ok
    }

    private func scan() async throws -> Int32 {
        try need(1...2, "scan [--json] [--] NS [PREFIX]")
        let entries = client.scan(namespace, prefix: args.count > 1 ? args[1] : [], pageSize: 1000)
        let json = invocation.json
        var first = true
        if json { try output.write("[") }
        for try await entry in entries {
            if json {
                try output.write((first ? "\n  {" : ",\n  {") + jsonMember("key", entry.key) + ","
                             + jsonMember("value", entry.value) + "}")
            } else {
                try output.write(escapedField(entry.key) + [UInt8(ascii: "\t")] + escapedField(entry.value) + [0x0A])
            }
            first = false
        }
        if json { try output.write(first ? "]\n" : "\n]\n") }
        return Exit.ok
    }

    private func batch() async throws -> Int32 {
        try need(3...Self.many, "batch NS OP...   (OP: put KEY VALUE | del KEY | ifversion KEY V | incr KEY DELTA)")
        guard let results = try await client.batch(namespace, try Self.batchOperations(args[1...])) else {
            throw Failure(code: Exit.conditionFailed, message: "actorkv: nothing applied: an ifversion guard did not hold")
        }
        for result in results {
            switch result {
            case .stored, .held: try output.line("OK")
            case .deleted(let existed): try output.line(existed ? "1" : "0")
            case .counted(let value): try output.line(String(value))
            }
        }
        return Exit.ok
    }

    /// `batch`'s operations: `put KEY VALUE`, `del KEY`, `ifversion KEY V`, `incr KEY DELTA`.
    static func batchOperations(_ words: ArraySlice<[UInt8]>) throws(Failure) -> [BatchOperation] {
        var operations: [BatchOperation] = []
        var i = words.startIndex
        while i < words.endIndex {
            switch text(words[i]).lowercased() {
            case "put":
                guard i + 2 < words.endIndex else { throw usageFailure("batch: put needs a key and a value") }
                operations.append(.put(key: words[i + 1], value: words[i + 2]))
                i += 3
            case "del", "delete":
                guard i + 1 < words.endIndex else { throw usageFailure("batch: del needs a key") }
                operations.append(.delete(key: words[i + 1]))
                i += 2
            case "ifversion":
                guard i + 2 < words.endIndex else { throw usageFailure("batch: ifversion needs a key and a version") }
                operations.append(.ifVersion(key: words[i + 1], version: try parseVersion(text(words[i + 2]), "batch: ifversion")))
                i += 3
            case "incr":
                guard i + 2 < words.endIndex else { throw usageFailure("batch: incr needs a key and a delta") }
                operations.append(.increment(key: words[i + 1], by: try parseInteger(text(words[i + 2]), "batch: incr")))
                i += 3
            default:
                throw usageFailure("batch: unknown op '\(text(words[i]))' (expected put, del, ifversion or incr)")
            }
        }
        return operations
    }

    private func changes() async throws -> Int32 {
        try need(1...2, "changes [--from SEQ | --snapshot] [--] NS [PREFIX]")
        // Reconnecting gives up after --timeout (never with 0), like a wait for a reply.
        let stream = client.changes(namespace, prefix: args.count > 1 ? args[1] : [], from: invocation.changeStart,
                                    reconnect: ReconnectPolicy(giveUpAfter: invocation.timeout))
        endWhenOutputReaderLeaves()
        var lines = ChangeLines()
        for try await event in stream {
            try output.write(lines.lines(for: event))
            try output.flush()
        }
        return Exit.ok
    }

    private func compact() async throws -> Int32 {
        try need(1...1, "compact NS")
        try await client.compact(namespace)
        return Exit.ok
    }

    private func backup() async throws -> Int32 {
        try need(1...1, "backup DIR")
        try output.line(try await client.backup(to: text(args[0])))
        return Exit.ok
    }

    /// `WAITAOF 1 0 0`: returns once every write acknowledged so far is fsync'd.
    private func sync() async throws -> Int32 {
        try need(0...0, "sync")
        return try await client.waitDurable() ? Exit.ok : Exit.server
    }

    private func namespaces() async throws -> Int32 {
        try need(0...0, "namespaces")
        for name in try await client.namespaces() { try output.line(name) }
        return Exit.ok
    }

    private func info() async throws -> Int32 {
        try need(0...0, "info")
        try output.write(lfLineEnds(try await client.info()))
        return Exit.ok
    }

    private func clients() async throws -> Int32 {
        try need(0...0, "clients")
        try output.write(Array(try await client.clientList().utf8))
        return Exit.ok
    }

    /// SHUTDOWN: returns once the server has shut down (every namespace fsync'd, its socket gone).
    private func shutdown() async throws -> Int32 {
        try need(0...0, "shutdown")
        try await client.shutdown()
        return Exit.ok
    }

    private func killClient() async throws -> Int32 {
        try need(1...1, "kill-client ID")
        guard let id = UInt64(text(args[0])), id > 0 else { throw usageFailure("usage: actorkv kill-client ID (a connection's id, as actorkv clients prints it)") }
        let killed = try await client.killClient(id)
        try output.line(killed ? "1" : "0")
        return killed ? Exit.ok : Exit.notFound
    }

    private func ping() async throws -> Int32 {
        try need(0...1, "ping [MESSAGE]")
        if args.isEmpty {
            try output.line(try await client.ping())
        } else {
            try output.write(try await client.ping(args[0]) + [0x0A])
        }
        return Exit.ok
    }
}
