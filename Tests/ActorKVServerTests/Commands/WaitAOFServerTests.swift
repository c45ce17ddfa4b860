import ActorKVProtocol
import ActorKVTestSupport
import Testing

/// `WAITAOF numlocal numreplicas timeout` on a real server (protocol.md, "WAITAOF"): under
/// `--fsync no` it answers `:0` local while a write is not fsync'd, and with numlocal 1 fsyncs
/// and answers `:1`; under `always` every acknowledged write is durable already. Bad arguments
/// and MULTI are refused, the connection usable. (That the writes are then durable is
/// ``WaitDurablePowerLossTests``': a power loss after it keeps them.)
@Suite struct WaitAOFServerTests {
    private static let durable: Reply = .array([.integer(1), .integer(0)])
    private static let notYet: Reply = .array([.integer(0), .integer(0)])

    @Test("under --fsync no: 0 while a write waits for its fsync, 1 once WAITAOF 1 made it durable, in every namespace written")
    func fsyncsWhatIsWritten() async throws {
        let server = try await ServerProcess.started(arguments: ["--fsync", "no"])
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["WAITAOF", "0", "0", "0"]) == Self.durable, "nothing written yet")
            #expect(try c.command(["HSET", "jobs", "a", "1"]) == .integer(1))
            #expect(try c.command(["WAITAOF", "0", "0", "0"]) == Self.notYet, "numlocal 0 only asks")
            #expect(try c.command(["WAITAOF", "1", "0", "0"]) == Self.durable)
            #expect(try c.command(["WAITAOF", "0", "0", "0"]) == Self.durable, "durable once WAITAOF 1 returned")
            let other = try RawConnection(path: server.socketPath)
            #expect(try other.command(["PUT", "config", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["PUT", "jobs", "b", "2"]) == .simple("OK"))
            #expect(try c.command(["WAITAOF", "0", "0", "0"]) == Self.notYet)
            #expect(try c.command(["waitaof", "1", "0", "5000"]) == Self.durable, "with a timeout, in time")
            #expect(try other.command(["WAITAOF", "0", "0", "0"]) == Self.durable, "every connection's writes: the other's too")
            #expect(try c.command(["HGETALL", "jobs"]) == .array([.bulk("a"), .bulk("1"), .bulk("b"), .bulk("2")]))
        }
    }

    @Test("under --fsync always an acknowledged write is durable already")
    func alwaysIsDurable() async throws {
        let server = try await ServerProcess.started(arguments: ["--fsync", "always"])
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "jobs", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["WAITAOF", "0", "0", "0"]) == Self.durable)
            #expect(try c.command(["WAITAOF", "1", "0", "0"]) == Self.durable)
        }
    }

    @Test("bad arguments and MULTI are refused, nothing changed, the connection usable")
    func refusals() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            let refused: [([String], String)] = [
                (["WAITAOF", "2", "0", "0"], "ERR WAITAOF's numlocal is 0 or 1 (this server's log), not 2"),
                (["WAITAOF", "-1", "0", "0"], "ERR WAITAOF's numlocal is 0 or 1 (this server's log), not -1"),
                (["WAITAOF", "1", "1", "0"], "ERR WAITAOF's numreplicas must be 0: ActorKV has no replicas (Redis would wait out the timeout, or forever, to answer 0)"),
                (["WAITAOF", "x", "0", "0"], "ERR value is not an integer or out of range"),
                (["WAITAOF", "1", "y", "0"], "ERR value is not an integer or out of range"),
                (["WAITAOF", "1", "0", "-1"], "ERR timeout is negative"),
                (["WAITAOF", "1", "0", "1.5"], "ERR timeout is not an integer or out of range"),
                (["WAITAOF", "1", "0"], "ERR wrong number of arguments for 'WAITAOF' (usage: WAITAOF numlocal numreplicas timeout)"),
            ]
            for (command, error) in refused { #expect(try c.command(command) == .error(error), "\(command)") }
            #expect(try c.command(["WAITAOF", "1", "0", "99999999999999999999"]) == .error("ERR timeout is not an integer or out of range"))
            #expect(try c.command(["WAITAOF", "1", "0", "9223372036854775807"]) == Self.durable, "the longest timeout is taken")
            #expect(try c.command(["MULTI"]) == .simple("OK"))
            #expect(try c.command(["PUT", "jobs", "k", "v"]) == .simple("QUEUED"))
            #expect(try c.command(["WAITAOF", "1", "0", "0"]).errorCode == "ERR")
            #expect(try c.command(["EXEC"]) == .error("EXECABORT Transaction discarded because of previous errors."))
            #expect(try c.command(["GET", "jobs", "k"]) == .null)
            #expect(try c.command(["PING"]) == .simple("PONG"))
        }
    }
}
