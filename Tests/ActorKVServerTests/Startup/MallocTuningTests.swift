import ActorKVServer
import ActorKVTestSupport
import Foundation
import Testing

@Suite("glibc malloc tuning")
struct MallocTuningTests {
    @Test("the tunables string: added, appended to the operator's, or left alone")
    func tunables() {
        let ours = "glibc.malloc.tcache_count=\(MallocTuning.tcacheCount)"
        #expect(MallocTuning.tunables(current: nil, setting: nil) == ours)
        #expect(MallocTuning.tunables(current: "", setting: nil) == ours)
        #expect(MallocTuning.tunables(current: "glibc.malloc.mxfast=0", setting: nil) == "glibc.malloc.mxfast=0:" + ours)
        #expect(MallocTuning.tunables(current: "glibc.malloc.tcache_count=7", setting: nil) == nil)
        #expect(MallocTuning.tunables(current: "glibc.malloc.mxfast=0:glibc.malloc.tcache_count=0", setting: nil) == nil)
        #expect(MallocTuning.tunables(current: nil, setting: "off") == nil)
    }

    /// The environment of a running process, from /proc.
    static func environment(of pid: Int32) throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ"))
        return data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    /// The kernel's name for a running process (`ps -o comm`), from /proc.
    static func processName(of pid: Int32) throws -> String {
        try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
    }

    static func tunables(of server: ServerProcess) throws -> String? {
        try environment(of: server.pid).first { $0.hasPrefix("GLIBC_TUNABLES=") }.map { String($0.dropFirst("GLIBC_TUNABLES=".count)) }
    }

    @Test("actorkvd runs with the larger tcache, keeps its pid, and respects the operator's choice")
    func serverRunsTuned() async throws {
        try await onOwnThread {
            var base = ProcessInfo.processInfo.environment
            base["GLIBC_TUNABLES"] = nil
            base["ACTORKV_MALLOC_TUNING"] = nil
            let cases: [(env: [String: String], expected: String?)] = [
                ([:], "glibc.malloc.tcache_count=\(MallocTuning.tcacheCount)"),
                (["GLIBC_TUNABLES": "glibc.malloc.tcache_count=7"], "glibc.malloc.tcache_count=7"),
                (["ACTORKV_MALLOC_TUNING": "off"], nil),
            ]
            for (extra, expected) in cases {
                // ServerProcess waits for PING on the spawned pid's socket: the re-executed image
                // answers under the same pid.
                let server = try ServerProcess(environment: base.merging(extra) { $1 })
                #expect(try Self.tunables(of: server) == expected, "\(extra)")
                // The name ps, pgrep and pkill see: the binary's, not "exe" (/proc/self/exe's).
                #expect(try Self.processName(of: server.pid) == "actorkvd", "\(extra)")
                #expect(server.stop() == 0)
            }
        }
    }
}
