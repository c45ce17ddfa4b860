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
