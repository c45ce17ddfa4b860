import ActorKVProtocol
import ActorKVStore
import Synchronization

/// `WAITAOF numlocal numreplicas timeout`, Redis's wait for the connection's writes to be on
/// stable storage (protocol.md, "WAITAOF"): under `--fsync everysec` or `no`, a client that
/// needs one write durable before it goes on asks for it, instead of running the whole server
/// under `always`.
enum DurabilityCommands {
    /// Their specs.
    static let specs: [CommandSpec] = [
        CommandSpec(name: "WAITAOF", usage: "WAITAOF numlocal numreplicas timeout", arity: .exactly(3),
                    flags: [.unrestricted, .notInMulti], parse: parseWaitAOF),
    ]

    /// Parses WAITAOF's three integers: `numlocal` 0 or 1, `numreplicas` 0 (there is no replica to
    /// wait for: Redis would wait out the timeout, or forever, to answer 0), `timeout` in
    /// milliseconds, 0 for none.
    private static func parseWaitAOF(_ args: CommandArguments) throws(CommandError) -> Command {
        guard let local = ASCIIDecimal.parse(args[0]), let replicas = ASCIIDecimal.parse(args[1]) else {
            throw CommandError(.syntax, "value is not an integer or out of range")
        }
        guard local == 0 || local == 1 else {
            throw CommandError(.syntax, "WAITAOF's numlocal is 0 or 1 (this server's log), not \(local)")
        }
        guard replicas == 0 else {
            throw CommandError(.syntax, "WAITAOF's numreplicas must be 0: ActorKV has no replicas (Redis would wait out the timeout, or forever, to answer 0)")
        }
        guard let timeout = ASCIIDecimal.parse(args[2]) else { throw CommandError(.syntax, "timeout is not an integer or out of range") }
        guard timeout >= 0 else { throw CommandError(.syntax, "timeout is negative") }
        let waiting = local == 1
        return .local(LocalCommand { context in await waitAOF(context.backend, waiting: waiting, timeout: timeout) })
    }

    /// `*2`: `:1` if every write acknowledged before is durable (made so first when `waiting`;
    /// `:0` if `timeout` milliseconds passed before, the fsyncs going on), and `:0` replicas.
    private static func waitAOF(_ backend: any DataBackend, waiting: Bool, timeout: Int64) async -> Reply {
        let durable: Bool?
        do {
            if waiting && timeout > 0 {
                durable = try await firstOf(milliseconds: timeout) { () throws(StoreError) in try await backend.writtenIsDurable(waiting: true) }
            } else {
                durable = try await backend.writtenIsDurable(waiting: waiting)
            }
        } catch {
            return ErrorMapping.reply(for: error)
        }
        return .array([.integer(durable == true ? 1 : 0), .integer(0)])
    }

    /// Runs `operation` in a task of its own and returns its result, or nil if `milliseconds`
    /// pass first (the operation goes on, and its result is dropped).
    static func firstOf<T: Sendable>(milliseconds: Int64, _ operation: @escaping @Sendable () async throws(StoreError) -> T) async throws(StoreError) -> T? {
        let nanoseconds = UInt64(min(milliseconds, Int64.max / 1_000_000)) * 1_000_000
        let result: Result<T, StoreError>? = await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            let timer = Task {
                try? await Task.sleep(nanoseconds: nanoseconds)
                once.resume(nil)
            }
            Task {
                let result: Result<T, StoreError>
                do throws(StoreError) { result = .success(try await operation()) } catch { result = .failure(error) }
                once.resume(result)
                timer.cancel()
            }
        }
        return try result?.get()
    }

    /// A continuation that the first of several callers resumes; the others' values are dropped.
    private final class ResumeOnce<T: Sendable>: Sendable {
        private let continuation: Mutex<CheckedContinuation<T, Never>?>

        init(_ continuation: CheckedContinuation<T, Never>) { self.continuation = Mutex(continuation) }

        func resume(_ value: T) { continuation.withLock { $0.take() }?.resume(returning: value) }
    }
}
