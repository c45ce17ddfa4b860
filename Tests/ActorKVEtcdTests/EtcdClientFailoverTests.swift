@testable import ActorKVEtcd
import Foundation
import Glibc
import Synchronization
import Testing

/// `EtcdClient`'s fail-over against fake members on real TCP sockets: which failures it sends a
/// request on to the next member for, and which leave a write's outcome unknown (sending it again
/// could apply it twice: a duplicate in every follower's change feed, or an INCR counted twice).
@Suite struct EtcdClientFailoverTests {
    private static let ok = Array(#"{"header":{"revision":"7"}}"#.utf8)

    @Test("a member that closes a reused connection after reading a write: outcome unknown, the next member never asked")
    func closeAfterAWriteIsOutcomeUnknown() async throws {
        let first = try FakeMember { index in index == 1 ? .closeWithoutAnswer : .answer(200, Self.ok) }
        let second = try FakeMember { _ in .answer(200, Self.ok) }
        let client = EtcdClient(endpoints: [first.endpoint, second.endpoint], timeout: 5)
        _ = try client.blockingCall("/v3/kv/put", body: Array("{}".utf8), write: true)
        do {
            _ = try client.blockingCall("/v3/kv/put", body: Array("{}".utf8), write: true)
            Issue.record("a write the member closed on without answering was answered")
        } catch {
            #expect(error.kind == .outcomeUnknown, "\(error)")
        }
        do {
            _ = try client.blockingCall("/v3/kv/put", body: Array("{}".utf8), write: true)
        } catch {
            Issue.record("a new connection to the first member should have taken the third write: \(error)")
        }
        #expect(second.requests == 0, "the write whose outcome was unknown was sent again")
        #expect(first.requests == 3)
    }

    @Test("a member that closed an idle connection: the pool drops it and the write goes on a new one")
    func idleCloseIsFoundBeforeSending() async throws {
        let first = try FakeMember { _ in .answerAndClose(200, Self.ok) }
        let second = try FakeMember { _ in .answer(200, Self.ok) }
        let client = EtcdClient(endpoints: [first.endpoint, second.endpoint], timeout: 5)
        _ = try client.blockingCall("/v3/kv/put", body: Array("{}".utf8), write: true)
        try await Task.sleep(for: .milliseconds(100))  // the member's close reaches this side
        _ = try client.blockingCall("/v3/kv/put", body: Array("{}".utf8), write: true)
        #expect(first.requests == 2 && second.requests == 0)
    }

    @Test("refusals: no leader sends a write to the next member; server stopped leaves it unknown; a read always moves on")
    func unavailableRefusals() throws {
        let noLeader = try FakeMember { _ in Self.refusal("etcdserver: no leader") }
        let stopped = try FakeMember { _ in Self.refusal("etcdserver: server stopped") }
        let healthy = try FakeMember { _ in .answer(200, Self.ok) }

        let viaNoLeader = EtcdClient(endpoints: [noLeader.endpoint, healthy.endpoint], timeout: 5)
        #expect(try viaNoLeader.blockingCall("/v3/kv/put", body: [], write: true) == Self.ok)
        #expect(healthy.requests == 1)

        let viaStopped = EtcdClient(endpoints: [stopped.endpoint, healthy.endpoint], timeout: 5)
        do {
            _ = try viaStopped.blockingCall("/v3/kv/put", body: [], write: true)
            Issue.record("a write refused with 'server stopped' was taken by another member")
        } catch {
            #expect(error.kind == .outcomeUnknown, "\(error)")
        }
        #expect(healthy.requests == 1, "the write was sent again")
        #expect(try viaStopped.blockingCall("/v3/kv/range", body: [], write: false) == Self.ok)
        #expect(healthy.requests == 2)
    }
}

extension EtcdClientFailoverTests {
    /// etcd's gateway answer to a request it refuses as unavailable (gRPC code 14).
    static func refusal(_ message: String) -> FakeMember.Action {
        .answer(503, Array(#"{"error":"\#(message)","code":14,"message":"\#(message)"}"#.utf8))
    }
}

/// A fake etcd member: accepts TCP connections on 127.0.0.1 (a port of its own), reads HTTP
/// requests (by Content-Length) and does what `script` says for each, numbered from 0 across
/// connections. Runs on a thread of its own until the process ends.
final class FakeMember: Sendable {
    enum Action: Sendable {
        case answer(Int, [UInt8])
        case answerAndClose(Int, [UInt8])
        case closeWithoutAnswer
    }

    let endpoint: EtcdEndpoint
    private let count = Atomic<Int>(0)

    /// How many requests it has read.
    var requests: Int { count.load(ordering: .relaxed) }

    init(_ script: @escaping @Sendable (Int) -> Action) throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        guard bound, listen(listener, 16) == 0 else { throw FakeMemberFailure() }
        endpoint = try EtcdEndpoint(url: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))")
        Thread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }
                Thread { self.serve(connection, script: script) }.start()
            }
        }.start()
    }

    private func serve(_ connection: Int32, script: @Sendable (Int) -> Action) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            guard Self.readRequest(connection, &buffer, &chunk) != nil else { return }
            let action = script(count.add(1, ordering: .relaxed).oldValue)
            switch action {
            case .closeWithoutAnswer:
                return
            case .answer(let status, let body), .answerAndClose(let status, let body):
                let head = "HTTP/1.1 \(status) X\r\nContent-Type: application/json\r\nContent-Length: \(body.count)\r\n\r\n"
                let bytes = Array(head.utf8) + body
                _ = bytes.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if case .answerAndClose = action { return }
            }
        }
    }

    /// Reads one whole request (head and Content-Length body); nil when the client closed.
    private static func readRequest(_ connection: Int32, _ buffer: inout [UInt8], _ chunk: inout [UInt8]) -> [UInt8]? {
        while true {
            if let end = find(Array("\r\n\r\n".utf8), in: buffer) {
                let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if buffer.count >= end + 4 + length {
                    let request = Array(buffer[..<(end + 4 + length)])
                    buffer.removeFirst(end + 4 + length)
                    return request
                }
            }
            let n = chunk.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { return nil }
            buffer += chunk[..<n]
        }
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start..<(start + needle.count)].elementsEqual(needle) { return start }
        return nil
    }
}

struct FakeMemberFailure: Error {}
