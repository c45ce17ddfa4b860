import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing

/// A namespace that cannot be opened is reported unavailable whatever the cause: corrupt files
/// were, but an I/O failure (a file's permissions, no space, no descriptor left, here a log that
/// is a directory) used to leave it out of INFO and out of the startup line's count.
@Suite struct UnavailableNamespaceTests {
    @Test func aNamespaceThatFailsToOpenForAnIOErrorIsReportedUnavailable() async throws {
        let server = try await ServerProcess.started()
        defer { server.stop() }
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            #expect(try c.command(["PUT", "broken", "k", "v"]) == .simple("OK"))
            #expect(try c.command(["PUT", "fine", "k", "v"]) == .simple("OK"))
        }
        #expect(server.stop() == 0)
        let log = server.dataPath + "/broken/000001.log"
        try FileManager.default.removeItem(atPath: log)
        try FileManager.default.createDirectory(atPath: log, withIntermediateDirectories: false)
        try await server.restart()
        #expect(server.log.contains("ready: 2 namespaces (1 unavailable)"), "log: \(server.log)")
        try await onOwnThread {
            let c = try RawConnection(path: server.socketPath)
            guard case .bulk(let info) = try c.command(["INFO"]) else { Issue.record("INFO is not a bulk string"); return }
            let text = String(decoding: info, as: UTF8.self)
            #expect(text.contains("ns_broken:status=unavailable,error=reading \(log) failed: Is a directory"), "INFO: \(text)")
            #expect(text.contains("ns_fine:keys=1"))
            #expect(try c.command(["GET", "broken", "k"]) == .error("IOERR reading \(log) failed: Is a directory"))
            #expect(try c.command(["GET", "fine", "k"]) == .bulk("v"))
            // Redis's keyspace commands list it (its keys are in its files) and TYPE names the error.
            #expect(try c.command(["KEYS", "*"]) == .array([.bulk("broken"), .bulk("fine")]))
            #expect(try c.command(["TYPE", "broken"]) == .error("IOERR reading \(log) failed: Is a directory"))
        }
    }
}
