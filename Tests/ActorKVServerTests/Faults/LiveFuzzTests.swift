import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Random bytes and mutated commands against a running server: every connection gets replies or a
/// framing error and a close, never a crash, and a well-behaved client alongside is unaffected.
///
/// Inputs: $ACTORKV_LIVE_FUZZ_INPUTS (default 3000; the soak mode runs more).
@Suite struct LiveFuzzTests {
    static var inputs: Int { Int(ProcessInfo.processInfo.environment["ACTORKV_LIVE_FUZZ_INPUTS"] ?? "") ?? 3000 }

    @Test func garbageNeverCrashesTheServerOrDisturbsOthers() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: ["--max-inline-bytes", "4096", "--max-bulk-bytes", "65536"])
            defer { server.stop() }
            let healthy = try RawConnection(path: server.socketPath)
            var rng = SeededGenerator(seed: UInt64(ProcessInfo.processInfo.environment["ACTORKV_FUZZ_SEED"] ?? "") ?? 0xAC70)
            let valid: [[String]] = [["PUT", "fz", "k", "v"], ["GET", "fz", "k"], ["DEL", "fz", "k", "j"],
                                     ["SCAN", "fz", "0", "COUNT", "3"], ["BATCH", "fz", "PUT", "a", "1", "DEL", "a"], ["PING"]]
            var framingErrors = 0, replies = 0
            for i in 0..<Self.inputs {
                var input: [UInt8]
                switch rng.next() % 3 {
                case 0:
                    input = (0..<Int(rng.next() % 512)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                case 1:
                    input = []
                    RequestEncoder.encode(valid[Int(rng.next() % UInt64(valid.count))], into: &input)
                    for _ in 0..<(1 + Int(rng.next() % 4)) where !input.isEmpty {
                        input[Int(rng.next() % UInt64(input.count))] = UInt8(truncatingIfNeeded: rng.next())
                    }
                default:
                    input = Array(valid[Int(rng.next() % UInt64(valid.count))].joined(separator: " ").utf8)
                    input.insert(UInt8(ascii: ["\"", "'", "\\", "x"][Int(rng.next() % 4)]), at: Int(rng.next() % UInt64(input.count)))
                    input += [13, 10]
                }
                let c = try RawConnection(path: server.socketPath, timeoutSeconds: 5)
                try? c.send(input)
                shutdown(c.fd, Int32(SHUT_WR))
                while let reply = try? c.reply() {
                    replies += 1
                    if reply.errorCode == "PROTO" { framingErrors += 1 }
                }
                if i % 50 == 0 {
                    #expect(try healthy.command(["PUT", "safe", "k\(i)", "v\(i)"]) == .simple("OK"))
                    #expect(try healthy.command(["GET", "safe", "k\(i)"]) == .bulk("v\(i)"))
                }
            }
            #expect(try healthy.command(["PING"]) == .simple("PONG"))
            #expect(server.process.isRunning)
            print("live fuzz: \(Self.inputs) hostile connections, \(replies) replies, \(framingErrors) framing errors, server alive")
        }
    }
}
