import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `CHANGES … SNAPSHOT` pages (protocol.md, "CHANGES"): at most 1,000 pairs, at least one, and
/// a single `*0` page only when the whole snapshot is empty: no trailing empty page after an
/// exactly full one, no empty page for a run of keys whose deadline has passed.
@Suite("CHANGES SNAPSHOT pages")
struct SnapshotPagesTests {
    /// Follows `namespace` with SNAPSHOT (and `options`) and returns the number of pairs in each
    /// `snapshot` page, checking that `synced` or a change comes next.
    static func pages(_ c: RawConnection, _ namespace: String, _ options: String = "") throws -> [Int] {
        var reader = FrameReader(c)
        try c.send("CHANGES \(namespace) \(options) SNAPSHOT\r\n")
        #expect(try reader.next().text.hasPrefix("changes \(namespace)"))
        return try Self.readPages(&reader, namespace)
    }

    static func readPages(_ reader: inout FrameReader, _ namespace: String) throws -> [Int] {
        var pages: [Int] = []
        while true {
            let frame = try reader.next()
            guard frame.text.hasPrefix("snapshot") else {
                // The changes after the snapshot (the sweeper's deletes of expired keys) or `synced`.
                #expect(frame.text.hasPrefix("synced \(namespace)") || frame.text.hasPrefix("change \(namespace)"), "\(frame)")
                return pages
            }
            #expect(frame.elements.count == 4)
            pages.append((frame.elements.last?.elements.count ?? -2) / 2)
        }
    }

    static func put(_ writer: RawConnection, _ namespace: String, keys: [String], value: String = "v", options: String = "") throws {
        for start in stride(from: 0, to: keys.count, by: 1000) {
            let slice = keys[start..<min(start + 1000, keys.count)]
            try writer.send(slice.map { "PUT \(namespace) \($0) \(value) \(options)\r\n" }.joined())
            for _ in slice { #expect(try writer.reply() == .simple("OK")) }
        }
    }

    @Test("exactly full pages are not followed by an empty one; an empty snapshot is one *0 page")
    func exactPages() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            for count in [0, 1, 999, 1000, 1001, 2000] {
                try Self.put(writer, "n\(count)", keys: (0..<count).map { "k\(10_000 + $0)" })
                let c = try RawConnection(path: server.socketPath, timeoutSeconds: 10)
                let want = count == 0 ? [0] : Array(repeating: 1000, count: count / 1000) + (count % 1000 == 0 ? [] : [count % 1000])
                #expect(try Self.pages(c, "n\(count)") == want, "\(count) keys")
            }
            // A prefix that holds exactly 1,000 of 2,000 keys, and one that holds none.
            try Self.put(writer, "halves", keys: (0..<1000).map { "a\(10_000 + $0)" } + (0..<1000).map { "b\(10_000 + $0)" })
            #expect(try Self.pages(RawConnection(path: server.socketPath, timeoutSeconds: 10), "halves", "PREFIX a") == [1000])
            #expect(try Self.pages(RawConnection(path: server.socketPath, timeoutSeconds: 10), "halves", "PREFIX z") == [0])
            #expect(try Self.pages(RawConnection(path: server.socketPath, timeoutSeconds: 10), "halves") == [1000, 1000])
        }
    }

    @Test("keys whose deadline passed while the snapshot was sent make no empty page")
    func expiredKeysMakeNoEmptyPages() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            // In each namespace: 1,000 lasting keys of 2 KiB (a first page of about 2 MB, more
            // than a connection's 1 MiB of unsent replies, so the next page is made only once
            // the client reads), then 3,000 keys that expire 6 s from now (room for a loaded machine); in `tail`, one
            // lasting key after them.
            let big = String(repeating: "x", count: 2048)
            for namespace in ["tail", "none"] {
                try Self.put(writer, namespace, keys: (0..<1000).map { "a\(10_000 + $0)" }, value: big)
            }
            // Each deadline is 6 s after the server ran its PUT: none before `writing` + 6 s,
            // none after `written` + 6 s (writing them took more than a second on a loaded CI
            // machine, where waiting from `writing` alone left the last few hundred unexpired).
            let writing = ContinuousClock.now
            for namespace in ["tail", "none"] {
                try Self.put(writer, namespace, keys: (0..<3000).map { "b\(10_000 + $0)" }, options: "PX 6000")
            }
            let written = ContinuousClock.now
            #expect(try writer.command(["PUT", "tail", "c", "last"]) == .simple("OK"))
            // The snapshots are taken now, the expiring keys in them; the clients read their
            // first page's beginning, then nothing until the deadline has passed.
            var followers: [(namespace: String, c: RawConnection, reader: FrameReader)] = []
            for namespace in ["tail", "none"] {
                let c = try RawConnection(path: server.socketPath, timeoutSeconds: 10)
                var reader = FrameReader(c)
                try c.send("CHANGES \(namespace) SNAPSHOT\r\n")
                #expect(try reader.next().text.hasPrefix("changes \(namespace)"))
                followers.append((namespace, c, reader))
            }
            let elapsed = ContinuousClock.now - writing
            try #require(elapsed < .milliseconds(5000), "too slow to take the snapshots before the first deadline (\(elapsed))")
            while ContinuousClock.now - written < .milliseconds(6500) { usleep(10_000) }
            for index in followers.indices {
                let namespace = followers[index].namespace
                let pages = try Self.readPages(&followers[index].reader, namespace)
                #expect(pages == (namespace == "tail" ? [1000, 1] : [1000]), "\(namespace)")
            }
        }
    }
}
