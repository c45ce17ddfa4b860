@testable import ActorKVServer
import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Client sessions and their end: the real event loop, in this process so that the disconnect
/// hook can be observed, serving real Unix sockets; one peer is a child process killed with
/// SIGKILL. Each way a connection can end must run the hook exactly once, with its reason.
@Suite("Client sessions: one per connection, ended exactly once however the connection ends")
struct ClientSessionTests {
    /// An event loop on a thread of its own, recording every session end.
    final class LoopFixture: @unchecked Sendable {
        let directory = TemporaryDirectory()
        let socketPath: String
        let store: Store
        let loop: EventLoop
        /// The loop's executor (nil with `--execution pool`).
        let executor: LoopExecutor?
        private let thread: Thread
        private let finished = DispatchSemaphore(value: 0)
        private let endings = Endings()

        /// The session ends the hook reported, shared with the hook.
        final class Endings: Sendable {
            let list = Mutex<[(id: UInt64, reason: SessionEnd)]>([])
        }

        init(durability: DurabilityPolicy = .everysec) throws {
            socketPath = directory.path + "/s.sock"
            var configuration = ServerConfiguration()
            configuration.socketPath = socketPath
            configuration.dataDirectory = directory.path + "/data"
            configuration.shutdownGraceSeconds = 5
            configuration.durability = durability
            let wake = try WakeSignal()
            let executor = configuration.execution == .loop ? LoopExecutor { wake.signal() } : nil
            self.executor = executor
            store = try Store(directory: configuration.dataDirectory, options: configuration.storeOptions(log: { _ in }, executor: executor))
            let endings = self.endings
            let processor = CommandProcessor(store: store, info: { _ in Array("# Server\r\n".utf8) }) { session, reason in
                endings.list.withLock { $0.append((session.id, reason)) }
            }
            let listener = try SocketCalls.socket()
            try SocketCalls.listen(listener, path: socketPath, backlog: 64)
            loop = try EventLoop(listener: listener, wakeSignal: wake, executor: executor, configuration: configuration,
                                 processor: processor, statistics: ServerStatistics(), log: { _ in })
            let loop = self.loop
            let finished = self.finished
            thread = Thread {
                loop.run()
                SocketCalls.close(listener)
                finished.signal()
            }
            thread.start()
        }

        /// Every session end so far.
        var ended: [(id: UInt64, reason: SessionEnd)] { endings.list.withLock { $0 } }

        /// The reasons recorded for session `id` once at least one is there (or the deadline passed).
        func reasons(for id: UInt64, within seconds: Double = 60) -> [SessionEnd] {
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                let found = ended.filter { $0.id == id }.map(\.reason)
                if !found.isEmpty {
                    usleep(100_000)  // a second, wrong call would come right after the first
                    return ended.filter { $0.id == id }.map(\.reason)
                }
                usleep(5_000)
            }
            return []
        }

        /// Stops the loop (as SIGTERM does) and waits for it to return.
        func stop() {
            loop.requestStop()
            finished.wait()
        }
    }

    static func clientID(_ connection: RawConnection) throws -> UInt64 {
        guard case .integer(let id) = try connection.command(["CLIENT", "ID"]) else { throw TestFailure("CLIENT ID is not an integer") }
        return UInt64(id)
    }

    @Test("QUIT, EOF, a framing error, a reset socket, a peer killed with SIGKILL, and shutdown each end the session once")
    func everyWayAConnectionEndsRunsTheHookOnce() async throws {
        let store = try await onOwnThread {
            let fixture = try LoopFixture()
            var expected: [UInt64: Set<SessionEnd>] = [:]

            // QUIT: the reply, then the session ends as .quit.
            let quitter = try RawConnection(path: fixture.socketPath)
            let quitID = try Self.clientID(quitter)
            #expect(try quitter.command(["QUIT"]) == .simple("OK"))
            #expect(fixture.reasons(for: quitID) == [.quit])
            expected[quitID] = [.quit]

            // EOF: the client closes its end with nothing pending.
            var closer: RawConnection? = try RawConnection(path: fixture.socketPath)
            let closerID = try Self.clientID(closer!)
            closer = nil
            #expect(fixture.reasons(for: closerID) == [.peerClosed])
            expected[closerID] = [.peerClosed]

            // A framing error: -PROTO, then the server closes.
            let garbler = try RawConnection(path: fixture.socketPath)
            let garblerID = try Self.clientID(garbler)
            try garbler.send("*1\r\n$x\r\n")
            #expect(try garbler.reply().errorCode == "PROTO")
            #expect(fixture.reasons(for: garblerID) == [.protocolError])
            expected[garblerID] = [.protocolError]

            // A reset: the client closes with the server's reply unread in its socket, so the
            // server's next read fails with ECONNRESET.
            var resetter: RawConnection? = try RawConnection(path: fixture.socketPath)
            let resetterID = try Self.clientID(resetter!)
            try resetter!.send("PING\r\n")
            #expect(resetter!.waitUntilReadable())  // the +PONG is in the client's socket, unread
            resetter = nil
            #expect(fixture.reasons(for: resetterID) == [.socketError])
            expected[resetterID] = [.socketError]

            // A peer killed with SIGKILL while connected: the kernel closes its socket.
            let script = """
            import socket, sys, time
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            s.sendall(b"CLIENT ID\\r\\n"); print(s.recv(100).decode().strip(), flush=True); time.sleep(60)
            """
            let child = try ChildProcess("/usr/bin/env", ["python3", "-c", script, fixture.socketPath], stdout: .pipe)
            var line = ""
            var byte: UInt8 = 0
            while Glibc.read(child.stdoutFD, &byte, 1) == 1 && byte != UInt8(ascii: "\n") { line.append(Character(Unicode.Scalar(byte))) }
            let childID = try #require(UInt64(line.dropFirst()), "CLIENT ID from the child: '\(line)'")
            child.signal(SIGKILL)
            child.waitForExit()
            let childReasons = fixture.reasons(for: childID)
            #expect(childReasons.count == 1 && [.peerClosed, .socketError].contains(childReasons[0]), "\(childReasons)")
            expected[childID] = [.peerClosed, .socketError]

            // Shutdown: connections still open end as .shutdown, once, when the loop stops.
            let idle = try RawConnection(path: fixture.socketPath)
            let idleID = try Self.clientID(idle)
            let named = try RawConnection(path: fixture.socketPath)
            #expect(try named.command(["CLIENT", "SETNAME", "worker-1"]) == .simple("OK"))
            let namedID = try Self.clientID(named)
            fixture.stop()
            expected[idleID] = [.shutdown]
            expected[namedID] = [.shutdown]

            let ended = fixture.ended
            #expect(ended.count == expected.count, "one end per session: \(ended)")
            for (id, reasons) in expected {
                let found = ended.filter { $0.id == id }
                #expect(found.count == 1, "session \(id) ended \(found.count) times")
                #expect(found.allSatisfy { reasons.contains($0.reason) }, "session \(id): \(found)")
            }
            #expect(Set(ended.map(\.id)).count == ended.count)
            withExtendedLifetime((quitter, garbler, idle, named)) {}
            return fixture.store
        }
        await store.close()
    }

    @Test("a session whose connection breaks while its command runs is ended after the command, once")
    func endedWhileInFlight() async throws {
        let store = try await onOwnThread {
            let fixture = try LoopFixture()
            // A namespace whose compaction takes a while, and a value larger than a socket buffer.
            let setup = try RawConnection(path: fixture.socketPath)
            let chunk = String(repeating: "c", count: 60_000)
            for i in 0..<400 { #expect(try setup.command(["PUT", "big", "k\(i)", chunk]) == .simple("OK")) }
            #expect(try setup.command(["PUT", "big", "value", String(repeating: "v", count: 700_000)]) == .simple("OK"))
            // The client reads nothing: the GET's reply stays partly unsent; then, while its COMPACT
            // runs, it goes away, and the server's next send to it fails.
            var ids: [UInt64] = []
            for _ in 0..<5 where fixture.loop.sessionsEndedAfterFlight.load(ordering: .relaxed) == 0 {
                var client: RawConnection? = try RawConnection(path: fixture.socketPath)
                ids.append(try Self.clientID(client!))
                try client!.send("GET big value\r\n")
                usleep(100_000)
                try client!.send("COMPACT big\r\n")
                usleep(30_000)
                client = nil
                #expect(fixture.reasons(for: ids.last!).count == 1)
            }
            #expect(fixture.loop.sessionsEndedAfterFlight.load(ordering: .relaxed) > 0,
                    "no connection broke while a command of its was in flight in \(ids.count) tries")
            fixture.stop()
            for id in ids { #expect(fixture.ended.filter { $0.id == id }.count == 1, "session \(id)") }
            withExtendedLifetime(setup) {}
            return fixture.store
        }
        await store.close()
    }
}
