import ActorKVProtocol
import ActorKVTestSupport
@testable import ActorKVServer
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// In a busy turn the event loop peeks at a connection's requests and takes their bytes out of
/// the socket only once the reply is sent (`EventLoop.readChunk`): a request must still run
/// exactly once, every reply reach its client in order, and nothing be left in a socket to be
/// read twice, whatever mix of clients keeps the loop busy.
@Suite struct PeekedReadsTests {
    @Test("a turn peeks only when epoll reported two or more events or the loop did not wait")
    func peekingPolicy() {
        #expect(!EventLoop.peeksReads(events: 1, waited: true))
        #expect(!EventLoop.peeksReads(events: 0, waited: true))
        #expect(EventLoop.peeksReads(events: 2, waited: true))
        #expect(EventLoop.peeksReads(events: 1, waited: false))
        #expect(EventLoop.peeksReads(events: 0, waited: false))
    }

    @Test("clients waiting on each reply, one streaming a pipeline and one half-closing, together: each INCR runs once, in order")
    func busyTurnsRunEachRequestOnce() async throws {
        try await onOwnThread {
            let server = try ServerProcess()
            defer { server.stop() }
            let clients = 12, increments = 300, pipelined = 3000
            let failures = Mutex<[String]>([])
            let group = DispatchGroup()
            // Clients that send one INCR and wait for its reply, all at once: the loop's turns
            // then see several events, so their requests are peeked.
            for client in 0..<clients {
                DispatchQueue.global().async(group: group) {
                    do {
                        let c = try RawConnection(path: server.socketPath)
                        for expected in 1...increments {
                            let reply = try c.command(["INCR", "peek", "counter\(client)"])
                            guard reply == .integer(Int64(expected)) else {
                                throw TestFailure("client \(client): INCR \(expected) answered \(reply)")
                            }
                        }
                    } catch { failures.withLock { $0.append("\(error)") } }
                }
            }
            // A client that writes a long pipeline (many read buffers' worth) before reading.
            DispatchQueue.global().async(group: group) {
                do {
                    let c = try RawConnection(path: server.socketPath)
                    var request: [UInt8] = []
                    for i in 0..<pipelined { RequestEncoder.encode(["PUT", "peek", "p\(i)", String(repeating: "x", count: 40)], into: &request) }
                    try c.send(request)
                    for i in 0..<pipelined {
                        let reply = try c.reply()
                        guard reply == .simple("OK") else { throw TestFailure("pipelined PUT \(i) answered \(reply)") }
                    }
                } catch { failures.withLock { $0.append("\(error)") } }
            }
            // Clients that send one request and half-close, as `nc -N` does: answered, then closed.
            DispatchQueue.global().async(group: group) {
                do {
                    for i in 0..<50 {
                        let c = try RawConnection(path: server.socketPath)
                        try c.send("PUT peek half\(i) v\r\n")
                        shutdown(c.fd, Int32(SHUT_WR))
                        let reply = try c.reply()
                        guard reply == .simple("OK") else { throw TestFailure("half-closed PUT \(i) answered \(reply)") }
                        guard c.isClosedByServer() else { throw TestFailure("half-closed connection \(i) was not closed") }
                    }
                } catch { failures.withLock { $0.append("\(error)") } }
            }
            #expect(group.wait(timeout: .now() + 120) == .success)
            #expect(failures.withLock { $0 } == [])
            let check = try RawConnection(path: server.socketPath)
            for client in 0..<clients {
                #expect(try check.command(["GET", "peek", "counter\(client)"]) == .bulk("\(increments)"))
            }
            #expect(try check.command(["COUNT", "peek"]) == .integer(Int64(clients + pipelined + 50)))
        }
    }
}
