import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// GETV, PUT … IFVERSION, INCR and guarded BATCHes over a real socket to a real server: the
/// exact bytes protocol.md pins, every refusal with the connection left usable, pipelined writes
/// that see each other, and many processes updating one key without losing an update, before
/// and after kill -9.
@Suite("Versions over the wire")
struct VersionServerTests {
    /// Sends `request` and reads exactly the bytes of `expected` (or fails on timeout / mismatch).
    static func exchange(_ c: RawConnection, _ request: String, _ expected: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        try c.send(request)
        var got: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let want = Array(expected.utf8)
        while got.count < want.count {
            let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, min($0.count, want.count - got.count), 0) }
            guard n > 0 else { throw TestFailure("recv after \(request.debugDescription): got \(String(decoding: got, as: UTF8.self).debugDescription)") }
            got += buffer[0..<n]
        }
        #expect(String(decoding: got, as: UTF8.self) == expected, "reply to \(request.debugDescription)", sourceLocation: sourceLocation)
    }

    @Test("the replies protocol.md pins, byte for byte, and every refusal leaves the connection usable")
    func wireContract() throws {
        let server = try ServerProcess()
        defer { server.stop() }
        let c = try RawConnection(path: server.socketPath)
        try Self.exchange(c, "PUT jobs next 7\r\n", "+OK\r\n")                                        // record 1
        try Self.exchange(c, "GETV jobs next\r\n", "*2\r\n$1\r\n7\r\n:1\r\n")
        try Self.exchange(c, "PUT jobs next 8 IFVERSION 1\r\n", ":2\r\n")                             // record 2
        try Self.exchange(c, "PUT jobs next 9 ifversion 1\r\n", "$-1\r\n")
        try Self.exchange(c, "GET jobs next\r\n", "$1\r\n8\r\n")
        try Self.exchange(c, "PUT jobs lock me IFVERSION 0\r\n", ":3\r\n")                            // record 3
        try Self.exchange(c, "PUT jobs lock you IFVERSION 0\r\n", "$-1\r\n")
        try Self.exchange(c, "GETV jobs missing\r\n", "$-1\r\n")
        try Self.exchange(c, "GETV nowhere missing\r\n", "$-1\r\n")
        try Self.exchange(c, "INCR stats visits\r\n", ":1\r\n")
        try Self.exchange(c, "INCR stats visits 10\r\n", ":11\r\n")
        try Self.exchange(c, "INCR stats visits -1\r\n", ":10\r\n")
        try Self.exchange(c, "GET stats visits\r\n", "$2\r\n10\r\n")
        try Self.exchange(c, "BATCH jobs IFVERSION lock 3 DEL lock INCR deletes 1\r\n", "*3\r\n+OK\r\n:1\r\n:1\r\n")  // record 4
        try Self.exchange(c, "BATCH jobs IFVERSION lock 3 DEL lock\r\n", "*-1\r\n")
        try Self.exchange(c, "BATCH jobs PUT g 1 IFVERSION g 0\r\n", "*-1\r\n")  // the guard sees the PUT before it
        try Self.exchange(c, "GET jobs g\r\n", "$-1\r\n")
        try Self.exchange(c, "GETV jobs deletes\r\n", "*2\r\n$1\r\n1\r\n:4\r\n")

        // Refusals: each gets one error line, changes nothing, and the next request works.
        let refusals: [(String, String)] = [
            ("INCR jobs next x\r\n", "-ERR the increment must be an integer from -9223372036854775808 to 9223372036854775807, not 'x'\r\n"),
            ("INCR jobs next 007\r\n", "-ERR the increment must be an integer from -9223372036854775808 to 9223372036854775807, not '007'\r\n"),
            ("PUT jobs lock x\r\n", "+OK\r\n"),
            ("INCR jobs lock\r\n", "-ERR value is not an integer\r\n"),
            ("PUT jobs big 9223372036854775807\r\n", "+OK\r\n"),
            ("INCR jobs big\r\n", "-ERR increment or decrement would overflow\r\n"),
            ("INCR jobs big -1\r\n", ":9223372036854775806\r\n"),
            ("PUT jobs next 1 IFVERSION -1\r\n", "-ERR IFVERSION needs a version: an integer from 0 to 9223372036854775807, not '-1'\r\n"),
            ("PUT jobs next 1 IFVERSION 01\r\n", "-ERR IFVERSION needs a version: an integer from 0 to 9223372036854775807, not '01'\r\n"),
            ("PUT jobs next 1 IFVERSION\r\n", "-ERR syntax error\r\n"),
            ("PUT jobs next 1 ELSE 2\r\n", "-ERR unknown PUT option 'ELSE' (expected PX, EX, EPHEMERAL or IFVERSION)\r\n"),
            ("GETV jobs\r\n", "-ERR wrong number of arguments for 'GETV' (usage: GETV ns key)\r\n"),
            ("INCR jobs a 1 2\r\n", "-ERR wrong number of arguments for 'INCR' (usage: INCR ns key [delta])\r\n"),
            ("BATCH jobs IFVERSION next\r\n", "-ERR BATCH op 1: IFVERSION needs a key and a version; nothing was applied\r\n"),
            ("BATCH jobs PUT a 1 INCR next\r\n", "-ERR BATCH op 2: INCR needs a key and a delta; nothing was applied\r\n"),
            ("BATCH jobs PUT a 1 INCR next one\r\n", "-ERR BATCH op 2: the increment must be an integer from -9223372036854775808 to 9223372036854775807, not 'one'; nothing was applied\r\n"),
            ("BATCH jobs PUT a 1 INCR lock 1\r\n", "-ERR value is not an integer\r\n"),
            ("BATCH jobs PUT a 1 IFVERSION next x\r\n", "-ERR BATCH op 2: IFVERSION needs a version: an integer from 0 to 9223372036854775807, not 'x'; nothing was applied\r\n"),
            ("GETV bad/ns k\r\n", "-BADNS namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x2f)\r\n"),
        ]
        for (request, reply) in refusals { try Self.exchange(c, request, reply) }
        try Self.exchange(c, "GET jobs a\r\n", "$-1\r\n")            // no refused batch applied its PUT
        try Self.exchange(c, "GETV jobs next\r\n", "*2\r\n$1\r\n8\r\n:2\r\n")
        try Self.exchange(c, "PING\r\n", "+PONG\r\n")
    }

    @Test("in one pipeline, and across connections merged into one run, INCRs and guards see the writes before them")
    func pipelinedWritesSeeEachOther() throws {
        let server = try ServerProcess()
        defer { server.stop() }
        let first = try RawConnection(path: server.socketPath), second = try RawConnection(path: server.socketPath)
        var request: [UInt8] = []
        for _ in 0..<200 { RequestEncoder.encode(["INCR", "p", "c"], into: &request) }
        try first.send(request)
        try second.send(request)
        var seen: [Int64] = []
        for c in [first, second] {
            var last: Int64 = 0
            for _ in 0..<200 {
                guard case .integer(let n) = try c.reply() else { throw TestFailure("INCR did not reply with an integer") }
                #expect(n > last, "one connection's INCRs count up in its order")
                last = n
                seen.append(n)
            }
        }
        #expect(seen.sorted() == Array(1...400), "every INCR got its own value")

        var mixed: [UInt8] = []
        for args in [["PUT", "p", "k", "a"], ["PUT", "p", "k", "b", "IFVERSION", "0"], ["BATCH", "p", "IFVERSION", "n", "0", "PUT", "n", "x"],
                     ["PUT", "p", "n", "y", "IFVERSION", "0"], ["DEL", "p", "k"], ["PUT", "p", "k", "c", "IFVERSION", "0"], ["GETV", "p", "k"]] {
            RequestEncoder.encode(args, into: &mixed)
        }
        try first.send(mixed)
        let replies = try (0..<7).map { _ in try first.reply() }
        #expect(replies[0] == .simple("OK"))
        #expect(replies[1] == .null, "k exists: the PUT before it in the pipeline made it")
        guard case .array = replies[2] else { Issue.record("the guarded batch on an absent key applied: \(replies[2])"); return }
        #expect(replies[3] == .null, "n exists: the batch before it made it")
        #expect(replies[4] == .integer(1))
        guard case .integer(let version) = replies[5], case .array(let parts) = replies[6] else { Issue.record("\(replies)"); return }
        #expect(parts == [.bulk(Array("c".utf8)), .integer(version)], "GETV sees the conditional PUT before it")
    }

    @Test("4 processes × 25 INCRs and 4 processes × 25 getv / put --if-version loops (the actorkv CLI) on one key each: exactly 100, and still 100 after kill -9")
    func manyProcessesLoseNoUpdate() async throws {
        let server = try await ServerProcess.started(arguments: ["--fsync", "always"])
        defer { server.stop() }
        let cli = try builtBinary("actorkv", environment: "ACTORKV_CLI")
        let kv = "'\(cli)' -s '\(server.socketPath)'"
        // The README's retry loop: read the value and its version, write only if the version is
        // unchanged, and retry when the put exits 5.
        let updateLoop = """
            i=0
            while [ $i -lt 25 ]; do
                out=$(\(kv) getv shared cas); rc=$?
                [ $rc -le 1 ] || exit $rc
                version=${out%%"
            "*}
                value=${out#*"
            "}
                [ "$version" = "$out" ] && value=0
                if \(kv) put --if-version "$version" shared cas $((value + 1)) >/dev/null 2>&1; then
                    i=$((i + 1))
                else
                    rc=$?; [ $rc -eq 5 ] || exit $rc
                fi
            done
            """
        let incrLoop = "i=0; while [ $i -lt 25 ]; do \(kv) incr shared counter >/dev/null || exit $?; i=$((i + 1)); done"
        // All eight run at once; their outputs are read one after another.
        let processes = try (Array(repeating: updateLoop, count: 4) + Array(repeating: incrLoop, count: 4)).map {
            try ChildProcess("/bin/sh", ["-c", $0])
        }
        let results = try await onOwnThread {
            processes.map { process in
                let (out, err) = process.readOutputs()
                return (process.status, String(decoding: out + err, as: UTF8.self))
            }
        }
        for (status, output) in results { #expect(status == 0, "a client process failed: \(output)") }
        let c = try RawConnection(path: server.socketPath)
        #expect(try c.command(["GET", "shared", "cas"]) == .bulk(Array("100".utf8)))
        #expect(try c.command(["GET", "shared", "counter"]) == .bulk(Array("100".utf8)))
        guard case .array(let before) = try c.command(["GETV", "shared", "cas"]) else { throw TestFailure("GETV") }

        try await server.signal(SIGKILL)
        try await server.restart()
        let after = try RawConnection(path: server.socketPath)
        #expect(try after.command(["GET", "shared", "counter"]) == .bulk(Array("100".utf8)))
        #expect(try after.command(["GETV", "shared", "cas"]) == .array(before), "value and version survive kill -9")
    }
}
