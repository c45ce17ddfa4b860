import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// RedisGlob against the real thing: a redis-server child process holds a few hundred varied
/// keys, and for each of a few hundred patterns, hand-picked and random, `KEYS pattern` must
/// name exactly the keys RedisGlob matches. redis-server must be installed (CI installs it):
/// without it these tests fail, they do not skip.
@Suite("RedisGlob against a real redis-server")
struct RedisGlobAgainstRedisTests {
    /// Bytes the random keys and patterns are made of: Redis's metacharacters, letters, NUL and
    /// bytes above 0x7F (which Redis's ranges compare as signed).
    static let alphabet = latin1("ab-^[]\\*?x\u{0}\u{E9}\u{80}\u{FF}")

    /// Patterns chosen for Redis's edge cases (besides those of ``RedisGlobTests/allCases``).
    static let trickyPatterns = [
        "*", "**", "", "a*", "*a", "*a*", "?", "??", "?*?", "*?*?*?*", "[a-c]*", "[c-a]*", "[^a]*", "[]*",
        "[^]*", "[a-]*", "[a-]b]", "[", "[^", "[ab", "*[ab", "\\", "a\\", "\\*", "*\\\\*", "[\\]]*", "*[*]*", "*[?]",
        "[\u{80}-\u{FF}]*", "[a-\u{E9}]*", "[\u{FF}-\u{1}]*", "*\u{0}*", "a*a*a*a*b", "*-*", "[--/]*", "*^*",
        "[^^]*", "*[[]*", "*]", "[\\", "[^\\]]*", "*[\\-]*", "[a\\-]?", "*\u{E9}", "[\u{E9}-a]", "*[^a-b]",
        nested(1000), nested(1001), nested(1000) + "*", nested(1001) + "*",
    ].map(latin1)

    /// `*a` `runs` times: Redis matches no key with more than 1000 of them (and more after).
    static func nested(_ runs: Int) -> String { String(repeating: "*a", count: runs) }

    @Test("KEYS pattern names exactly the keys RedisGlob matches, for tricky and random patterns")
    func keysAgreeWithRedis() async throws {
        try await onOwnThread {
            let redis = try RealRedis()
            let keys = Self.keys()
            try redis.store(keys)
            var random = SeededGenerator(seed: 21)
            let patterns = Self.trickyPatterns + RedisGlobTests.allCases.map { latin1($0.pattern) }
                + (0..<200).map { _ in Self.randomBytes(maxLength: 8, using: &random) }
            var disagreements: [String] = []
            for pattern in patterns {
                let expected = try redis.keys(matching: pattern)
                let glob = RedisGlob(pattern)
                let actual = keys.filter { glob.isMatchAll || glob.matches($0) }
                if actual != expected {
                    disagreements.append("\(show(pattern)): Redis \(expected.map { show($0) }.sorted()), "
                        + "RedisGlob \(actual.map { show($0) }.sorted())")
                }
            }
            #expect(patterns.count > 300)
            let shown = disagreements.prefix(20).joined(separator: "\n")
            #expect(disagreements.isEmpty, "\(disagreements.count) patterns disagree:\n\(shown)")
        }
    }

    @Test("Redis agrees with every expectation of the unit tests")
    func unitCasesAgreeWithRedis() async throws {
        try await onOwnThread {
            let redis = try RealRedis()
            let cases = RedisGlobTests.allCases.filter { $0.pattern != "*" }  // KEYS * skips the matcher
            try redis.store(Set(cases.map { latin1($0.string) }))
            for test in cases {
                let matched = try redis.keys(matching: latin1(test.pattern)).contains(latin1(test.string))
                #expect(matched == test.matches, "Redis: \(test.testDescription) is wrong")
            }
        }
    }

    /// Hand-picked keys, the strings of the unit cases, and 300 random ones.
    static func keys() -> Set<[UInt8]> {
        var random = SeededGenerator(seed: 2021)
        let picked = ["", "a", "b", "ab", "abc", "aaab", "aaaa", "[", "]", "[]", "[abc]", "\\", "\\\\", "^", "-",
                      "*", "?", "a*b", "a?b", "a[b", "a]b", "a\\b", "a-b", "\u{E9}", "\u{FF}", "\u{80}", "\u{0}",
                      "a\u{0}b", "_", "`", ".", "\u{1}", String(repeating: "a", count: 1002)].map(latin1)
        return Set(picked + RedisGlobTests.allCases.map { latin1($0.string) }
            + (0..<300).map { _ in randomBytes(maxLength: 7, using: &random) })
    }

    /// Up to `maxLength` bytes of ``alphabet``.
    static func randomBytes(maxLength: Int, using random: inout SeededGenerator) -> [UInt8] {
        (0..<Int.random(in: 0...maxLength, using: &random)).map { _ in alphabet.randomElement(using: &random)! }
    }
}

/// A redis-server child process on a Unix socket in a temporary directory, with no
/// persistence, and one blocking connection to it.
private final class RealRedis {
    private let directory = TemporaryDirectory("redis")
    private let process: ChildProcess
    private let fd: Int32
    private var decoder = ReplyDecoder()

    /// Where redis-server is looked for: `$REDIS_SERVER`, `/usr/bin/redis-server`, then `PATH`.
    static func executable() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        let path = (environment["PATH"] ?? "").split(separator: ":").map { "\($0)/redis-server" }
        let candidates = [environment["REDIS_SERVER"]].compactMap { $0 } + ["/usr/bin/redis-server"] + path
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw TestFailure("redis-server is not installed (looked in \(candidates.joined(separator: ", "))): "
                + "RedisGlob is checked against it. Install it (apt-get install redis-server) or set REDIS_SERVER.")
        }
        return found
    }

    /// Starts redis-server and connects to it, waiting up to 10 s for its socket.
    init() throws {
        let socket = directory.path + "/redis.sock", log = directory.path + "/redis.log"
        process = try ChildProcess(try Self.executable(), [
            "--port", "0", "--unixsocket", socket, "--save", "", "--appendonly", "no", "--dir", directory.path,
        ], stdout: .file(log), stderr: .file(log))
        fd = try Self.connect(socket, process: process, log: log)
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit {
        close(fd)
        process.signal(SIGKILL)
        process.waitForExit()
    }

    /// A connection to `socket`, once redis-server listens on it.
    private static func connect(_ socket: String, process: ChildProcess, log: String) throws -> Int32 {
        for _ in 0..<1000 {
            let fd = connectUnixSocket(socket)
            if fd >= 0 { return fd }
            if let ended = process.termination {
                let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
                throw TestFailure("redis-server exited (\(ended)) before listening: \(text)")
            }
            usleep(10_000)
        }
        throw TestFailure("redis-server did not listen on \(socket) within 10 s")
    }

    /// Stores every key (with an empty value) in one MSET.
    func store(_ keys: some Collection<[UInt8]>) throws {
        let reply = try command([latin1("MSET")] + keys.flatMap { [$0, []] })
        guard reply == .simple("OK") else { throw TestFailure("MSET: \(reply)") }
    }

    /// The keys `KEYS pattern` names.
    func keys(matching pattern: [UInt8]) throws -> Set<[UInt8]> {
        let reply = try command([latin1("KEYS"), pattern])
        guard case .array(let elements) = reply else { throw TestFailure("KEYS \(show(pattern)): \(reply)") }
        return Set(try elements.map { element in
            guard case .bulk(let key) = element else { throw TestFailure("KEYS \(show(pattern)): \(reply)") }
            return key
        })
    }

    /// Sends one command and reads its reply.
    private func command(_ arguments: [[UInt8]]) throws -> Reply {
        var request: [UInt8] = []
        RequestEncoder.encode(arguments, into: &request)
        try send(request)
        return try reply()
    }

    private func send(_ bytes: [UInt8]) throws {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + done, $0.count - done, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestFailure("send to redis-server: \(String(cString: strerror(errno)))") }
            done += n
        }
    }

    private func reply() throws -> Reply {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            if let reply = try decoder.next() { return reply }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw TestFailure("redis-server closed the connection or timed out (\(n))") }
            decoder.append(Array(buffer[0..<n]))
        }
    }
}
