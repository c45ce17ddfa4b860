import ActorKVProtocol
@testable import ActorKVServer
import ActorKVTestSupport
import Foundation
import Testing

/// The open files limit shared out among namespaces, clients, lingering sockets and a spare
/// (``DescriptorBudget``): the arithmetic, and a server under a low limit flooded with
/// connections while it works.
@Suite struct DescriptorBudgetTests {
    @Test func aLimitThatCoversEverythingChangesNothing() {
        let wanted = DescriptorBudget.wanted(maxClients: 10_000, maxNamespaces: 1024)
        #expect(wanted == 10_000 + 1024 + 1024 + 256)
        let exact = DescriptorBudget(openFiles: wanted, maxClients: 10_000, maxNamespaces: 1024)
        #expect(Self.shares(exact) == [1024, 10_000, 1024, 256])
        let large = DescriptorBudget(openFiles: 1 << 20, maxClients: 10_000, maxNamespaces: 1024)
        #expect(Self.shares(large) == [1024, 10_000, 1024, (1 << 20) - 12_048])
        // A limit not known (getrlimit failed): as configured, rather than one client.
        #expect(Self.shares(DescriptorBudget(openFiles: 0, maxClients: 10_000, maxNamespaces: 1024)) == [1024, 10_000, 1024, 0])
    }

    /// Namespaces, clients, lingering sockets, spare.
    static func shares(_ budget: DescriptorBudget) -> [Int] { [budget.namespaces, budget.clients, budget.lingering, budget.spare] }

    /// Below what the options need, nothing is handed out twice (the shares add up to at most the
    /// limit), a spare of at least 32 is always left, every share is at least 1, clients never
    /// exceed `--max-clients`, and namespaces get what they got before clients were bounded.
    @Test func aLowLimitIsSharedOutWithASpareAlwaysLeft() {
        for limit in stride(from: 64, through: 30_000, by: 37) {
            for (clients, namespaces) in [(10_000, 1024), (10, 1024), (1000, 16), (100_000, 100_000), (1, 1)] {
                guard limit < DescriptorBudget.wanted(maxClients: clients, maxNamespaces: namespaces) else { continue }
                let budget = DescriptorBudget(openFiles: limit, maxClients: clients, maxNamespaces: namespaces)
                let described = "limit \(limit), --max-clients \(clients), --max-namespaces \(namespaces): \(budget)"
                #expect(budget.namespaces + budget.clients + budget.lingering + budget.spare <= limit, "\(described)")
                #expect(budget.spare >= 32 && budget.spare <= DescriptorBudget.spareWanted, "\(described)")
                #expect(budget.clients >= 1 && budget.clients <= clients, "\(described)")
                #expect(budget.lingering >= 1 && budget.lingering <= DescriptorBudget.lingeringWanted, "\(described)")
                #expect(budget.namespaces == min(namespaces, max(16, (limit - 256) / 2)), "\(described)")
            }
        }
    }

    /// Under `ulimit -n 120`, 150 connections come while four clients write, compact and ask for
    /// INFO: those past the client limit in force get `-MAXCLIENTS`, the writers' every request is
    /// answered, and the server serves on. The build before let connections take every
    /// descriptor: writes then failed with EMFILE, and within seconds the Dispatch library
    /// aborted the process (SIGILL) when its once-a-second read of /proc failed.
    @Test func aFloodOfConnectionsUnderALowLimitLeavesTheServerServing() async throws {
        let server = try await ServerProcess.started(arguments: ["--max-clients", "1000"], openFiles: 120)
        defer { server.stop() }
        let budget = DescriptorBudget(openFiles: 120, maxClients: 1000, maxNamespaces: 1024)
        #expect(server.log.contains("namespaces are limited to \(budget.namespaces), and clients to \(budget.clients)"), "log: \(server.log)")
        try await onOwnThread {
            let writers = try (0..<4).map { _ in try RawConnection(path: server.socketPath) }
            var held: [RawConnection] = [], refused = 0
            for _ in 0..<150 {
                let connection = try RawConnection(path: server.socketPath, timeoutSeconds: 10)
                let reply = try connection.command(["PING"])
                if reply == .simple("PONG") { held.append(connection); continue }
                #expect(reply.errorCode == "MAXCLIENTS", "\(reply)")
                refused += 1
            }
            #expect(held.count + writers.count == budget.clients && refused == 150 - held.count, "held \(held.count), refused \(refused)")
            let start = Date()
            var round = 0
            while Date().timeIntervalSince(start) < 4 {
                for (index, writer) in writers.enumerated() {
                    var out: [UInt8] = []
                    for key in 0..<50 { RequestEncoder.encode(["PUT", "ns\(index)", "k\(round)-\(key)", String(repeating: "v", count: 100)], into: &out) }
                    RequestEncoder.encode(["COMPACT", "ns\(index)"], into: &out)
                    RequestEncoder.encode(["INFO"], into: &out)
                    try writer.send(out)
                }
                for writer in writers {
                    for _ in 0..<50 { #expect(try writer.reply() == .simple("OK")) }
                    #expect(try writer.reply() == .simple("OK"), "COMPACT")
                    guard case .bulk = try writer.reply() else { throw TestFailure("INFO did not answer") }
                }
                round += 1
            }
            #expect(server.process.isRunning, "the server died: \(server.log.suffix(400))")
            held.removeAll()
            let again = try RawConnection(path: server.socketPath)
            #expect(try again.command(["GET", "ns0", "k0-0"]) == .bulk(String(repeating: "v", count: 100)))
        }
        #expect(server.stop() == 0)
    }
}
