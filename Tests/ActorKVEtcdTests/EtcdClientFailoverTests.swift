@testable import ActorKVEtcd
import Foundation
import Glibc
import Synchronization
import Testing

/// `EtcdClient`'s fail-over against fake members on real TCP sockets: which failures it sends a
/// request on to the next member for, and which leave a write's outcome unknown (sending it again
/// could apply it twice: a duplicate in every follower's change feed, or an INCR counted twice).
/// Each runs both ways a client makes calls: blocking exchanges (before the server's loop runs),
/// and non-blocking ones on a reactor (as the agent's event loop drives them).
@Suite struct EtcdClientFailoverTests {
    private static let ok = Array(#"{"header":{"revision":"7"}}"#.utf8)

    @Test("a member that closes a reused connection after reading a write: outcome unknown, the next member never asked",
          arguments: ClientUnderTest.Way.allCases)
    func closeAfterAWriteIsOutcomeUnknown(way: ClientUnderTest.Way) async throws {
        let first = try FakeMember { index in index == 1 ? .closeWithoutAnswer : .answer(200, Self.ok) }
        let second = try FakeMember { _ in .answer(200, Self.ok) }
        let client = ClientUnderTest([first, second], way)
        defer { client.finish() }
        _ = try await client.call("/v3/kv/put", write: true)
        do {
            _ = try await client.call("/v3/kv/put", write: true)
            Issue.record("a write the member closed on without answering was answered")
        } catch {
            #expect(error.kind == .outcomeUnknown, "\(error)")
        }
        do {
            _ = try await client.call("/v3/kv/put", write: true)
        } catch {
            Issue.record("a new connection to the first member should have taken the third write: \(error)")
        }
        #expect(second.requests == 0, "the write whose outcome was unknown was sent again")
        #expect(first.requests == 3)
    }

    @Test("a member that closed an idle connection: the pool drops it and the write goes on a new one",
          arguments: ClientUnderTest.Way.allCases)
    func idleCloseIsFoundBeforeSending(way: ClientUnderTest.Way) async throws {
        let first = try FakeMember { _ in .answerAndClose(200, Self.ok) }
        let second = try FakeMember { _ in .answer(200, Self.ok) }
        let client = ClientUnderTest([first, second], way)
        defer { client.finish() }
        _ = try await client.call("/v3/kv/put", write: true)
        try await Task.sleep(for: .milliseconds(100))  // the member's close reaches this side
        _ = try await client.call("/v3/kv/put", write: true)
        #expect(first.requests == 2 && second.requests == 0)
    }

    @Test("refusals: no leader sends a write to the next member; server stopped leaves it unknown; a read always moves on",
          arguments: ClientUnderTest.Way.allCases)
    func unavailableRefusals(way: ClientUnderTest.Way) async throws {
        let noLeader = try FakeMember { _ in Self.refusal("etcdserver: no leader") }
        let stopped = try FakeMember { _ in Self.refusal("etcdserver: server stopped") }
        let healthy = try FakeMember { _ in .answer(200, Self.ok) }

        let viaNoLeader = ClientUnderTest([noLeader, healthy], way)
        defer { viaNoLeader.finish() }
        #expect(try await viaNoLeader.call("/v3/kv/put", write: true) == Self.ok)
        #expect(healthy.requests == 1)

        let viaStopped = ClientUnderTest([stopped, healthy], way)
        defer { viaStopped.finish() }
        do {
            _ = try await viaStopped.call("/v3/kv/put", write: true)
            Issue.record("a write refused with 'server stopped' was taken by another member")
        } catch {
            #expect(error.kind == .outcomeUnknown, "\(error)")
        }
        #expect(healthy.requests == 1, "the write was sent again")
        #expect(try await viaStopped.call("/v3/kv/range", write: false) == Self.ok)
        #expect(healthy.requests == 2)

        // A member stopping cancels what its gateway holds (HTTP 408, gRPC 1): a write's outcome
        // is unknown, and the next write goes to the next member rather than to it again.
        let closing = try FakeMember { _ in
            .answer(408, Array(#"{"error":"grpc: the client connection is closing","code":1,"message":"grpc: the client connection is closing"}"#.utf8))
        }
        let other = try FakeMember { _ in .answer(200, Self.ok) }
        let viaClosing = ClientUnderTest([closing, other], way)
        defer { viaClosing.finish() }
        do {
            _ = try await viaClosing.call("/v3/kv/put", write: true)
            Issue.record("a write cancelled by a stopping member was answered")
        } catch {
            #expect(error.kind == .outcomeUnknown, "\(error)")
        }
        #expect(other.requests == 0, "the write was sent again")
        #expect(try await viaClosing.call("/v3/kv/put", write: true) == Self.ok)
        #expect(closing.requests == 1 && other.requests == 1, "the second write went to the next member")
        #expect(try await viaClosing.call("/v3/kv/range", write: false) == Self.ok)
        #expect(closing.requests == 1, "and so does a read")
    }
}

/// An `EtcdClient` of fake members whose calls are made one way or the other.
struct ClientUnderTest: Sendable {
    /// How calls are made.
    enum Way: CaseIterable, Sendable {
        /// `blockingCall`, on the caller's thread.
        case blocking
        /// `call`, with the client attached to a reactor of its own.
        case reactor
    }

    let client: EtcdClient
    let way: Way
    private let reactor: TestReactor?

    init(_ members: [FakeMember], _ way: Way, timeout: Double = 5) {
        client = EtcdClient(endpoints: members.map(\.endpoint), timeout: timeout)
        self.way = way
        reactor = way == .reactor ? TestReactor() : nil
        if let reactor { client.attach(to: reactor) }
    }

    /// Calls `path` with an empty JSON body.
    func call(_ path: String, write: Bool) async throws(EtcdError) -> [UInt8] {
        switch way {
        case .blocking: return try client.blockingCall(path, body: Array("{}".utf8), write: write)
        case .reactor: return try await client.call(path, body: Array("{}".utf8), write: write)
        }
    }

    /// Detaches the client from its reactor (on the reactor's thread, as the server does) and
    /// stops the reactor.
    func finish() {
        guard let reactor else { return }
        let client = self.client
        let done = DispatchSemaphore(value: 0)
        reactor.submit {
            client.detachFromReactor()
            done.signal()
        }
        done.wait()
        reactor.stop()
    }
}

extension EtcdClientFailoverTests {
    /// etcd's gateway answer to a request it refuses as unavailable (gRPC code 14).
    static func refusal(_ message: String) -> FakeMember.Action {
        .answer(503, Array(#"{"error":"\#(message)","code":14,"message":"\#(message)"}"#.utf8))
    }
}

extension EtcdClientFailoverTests {
    @Test("a member that never answers: a write's outcome is unknown once the timeout passes; a read goes to the next member",
          arguments: ClientUnderTest.Way.allCases)
    func noAnswerWithinTheTimeout(way: ClientUnderTest.Way) async throws {
        let release = DispatchSemaphore(value: 0)
        let silent = try FakeMember { _ in
            _ = release.wait(timeout: .now() + 10)
            return .answer(200, Self.ok)
        }
        defer { for _ in 0..<4 { release.signal() } }
        let healthy = try FakeMember { _ in .answer(200, Self.ok) }
        let client = ClientUnderTest([silent, healthy], way, timeout: 0.5)
        defer { client.finish() }
        let began = Date()
        do {
            _ = try await client.call("/v3/kv/put", write: true)
            Issue.record("a write nobody answered was answered")
        } catch {
            #expect(error.kind == .outcomeUnknown, "\(error)")
            #expect(error.message.contains("no answer within the timeout"), "\(error)")
        }
        #expect(Date().timeIntervalSince(began) >= 0.45)
        #expect(healthy.requests == 0, "the write whose outcome was unknown was sent again")
        #expect(try await client.call("/v3/kv/range", write: false) == Self.ok)
        #expect(healthy.requests == 1)
    }

    @Test("an answer of 600 kB, arriving over many reads, is read whole", arguments: ClientUnderTest.Way.allCases)
    func largeAnswer(way: ClientUnderTest.Way) async throws {
        let value = String(repeating: "x", count: 600_000)
        let body = Array(#"{"header":{"revision":"7"},"value":"\#(value)"}"#.utf8)
        let member = try FakeMember { _ in .answer(200, body) }
        let client = ClientUnderTest([member], way)
        defer { client.finish() }
        for _ in 0..<3 { #expect(try await client.call("/v3/kv/range", write: false) == body) }
        #expect(member.requests == 3)
    }

    @Test("the reactor stopping fails the exchange under way (a write's outcome is then unknown); later calls block on Dispatch threads")
    func detachFailsWhatIsUnderWay() async throws {
        let release = DispatchSemaphore(value: 0)
        let member = try FakeMember { index in
            if index == 0 { _ = release.wait(timeout: .now() + 10) }
            return .answer(200, Self.ok)
        }
        defer { release.signal() }
        let client = ClientUnderTest([member], .reactor)
        async let write = client.call("/v3/kv/put", write: true)
        while member.requests < 1 { try await Task.sleep(for: .milliseconds(5)) }
        client.finish()
        do {
            _ = try await write
            Issue.record("a write under way when the reactor stopped was answered")
        } catch {
            #expect((error as? EtcdError)?.kind == .outcomeUnknown, "\(error)")
        }
        #expect(try await client.client.call("/v3/kv/range", body: [], write: false) == Self.ok)
    }
}
