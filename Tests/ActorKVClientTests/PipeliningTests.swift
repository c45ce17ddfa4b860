@testable import ActorKVClient
import Foundation
import Glibc
import Testing

@Suite("Pipelining")
struct PipeliningTests {
    @Test("requests are all written before any reply arrives: 100 calls outstanding on a stopped server")
    func manyOutstanding() async throws {
        try await withServer { server, kv in
            try await kv.put("pipe", "k", "v")
            try await server.signal(SIGSTOP)
            let calls = Task {
                try await withThrowingTaskGroup(of: Bool.self) { group in
                    for i in 0..<100 {
                        group.addTask {
                            if i.isMultiple(of: 2) { return try await kv.ping(Array("m\(i)".utf8)) == Array("m\(i)".utf8) }
                            return try await kv.getString("pipe", "k") == "v"
                        }
                    }
                    var correct = 0
                    for try await ok in group where ok { correct += 1 }
                    return correct
                }
            }
            // The server is frozen, so no reply can come back: a lock-step client would never have
            // more than one request outstanding. Wait (bounded) until all 100 are.
            var outstanding = 0
            for _ in 0..<1000 {
                outstanding = kv.pendingRequestCount
                if outstanding == 100 { break }
                try await Task.sleep(for: .milliseconds(5))
            }
            try await server.signal(SIGCONT)
            #expect(outstanding == 100)
            #expect(try await calls.value == 100)
            #expect(kv.pendingRequestCount == 0)
        }
    }
}
