import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// RESP3 over a real socket, byte for byte: what HELLO 3 switches, and a change feed's pushes
/// arriving between the replies of a connection that keeps sending commands (protocol.md,
/// "HELLO and RESP3").
@Suite("RESP3 on the wire")
struct RESP3ServerTests {
    /// Reads from `c` until the bytes received end with `suffix` (or the socket times out).
    static func receive(_ c: RawConnection, endingWith suffix: String) throws -> String {
        var received: [UInt8] = []
        let end = Array(suffix.utf8)
        while !(received.count >= end.count && received.suffix(end.count).elementsEqual(end)) {
            var buffer = [UInt8](repeating: 0, count: 65536)
            let n = buffer.withUnsafeMutableBytes { recv(c.fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw TestFailure("recv after \(String(decoding: received, as: UTF8.self).debugDescription): \(n)") }
            received += buffer[0..<n]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Sends `request` and returns exactly the bytes of the replies expected (which must come).
    static func exchange(_ c: RawConnection, _ request: String, expect: String) throws -> String {
        try c.send(request)
        return try receive(c, endingWith: expect)
    }

    @Test("HELLO 3: nulls are _, HGETALL and CONFIG GET are maps, HRANDFIELD's pairs arrays of two, HELLO 2 and RESET go back to RESP2")
    func resp3Replies() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            let map = try Self.exchange(c, "HELLO 3\r\n", expect: "$7\r\nmodules\r\n*0\r\n")
            #expect(map.hasPrefix("%7\r\n$6\r\nserver\r\n$7\r\nactorkv\r\n$7\r\nversion\r\n"))
            #expect(map.contains("$5\r\nproto\r\n:3\r\n"))
            #expect(try Self.exchange(c, "HGET r3 missing\r\nHSET r3 a 1 b 2\r\nHGETALL r3\r\n",
                                      expect: "_\r\n:2\r\n%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n")
                    == "_\r\n:2\r\n%2\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n")
            #expect(try Self.exchange(c, "CONFIG GET appendonly\r\nMULTI\r\nPUT r3 a 2\r\nEXEC\r\n",
                                      expect: "%1\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n")
                    == "%1\r\n$10\r\nappendonly\r\n$3\r\nyes\r\n+OK\r\n+QUEUED\r\n*1\r\n+OK\r\n")
            // HRANDFIELD … WITHVALUES: each field and value an array of two, alone and in EXEC's
            // reply (sent in one write, the transaction runs whole: MergedTransactionTests).
            let pair = "*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
            let drawn = ":1\r\n*2\r\n\(pair)\(pair)+OK\r\n+QUEUED\r\n+QUEUED\r\n*2\r\n:0\r\n*1\r\n\(pair)"
            #expect(try Self.exchange(c, "HSET r3one f v\r\nHRANDFIELD r3one -2 WITHVALUES\r\nMULTI\r\nHDEL r3one g\r\nHRANDFIELD r3one 3 WITHVALUES\r\nEXEC\r\n",
                                      expect: drawn) == drawn)
            let back = try Self.exchange(c, "HELLO 2\r\nHGET r3 missing\r\n", expect: "$-1\r\n")
            #expect(back.hasPrefix("*14\r\n$6\r\nserver\r\n") && back.contains("$5\r\nproto\r\n:2\r\n"))
            let flat = "*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nf\r\n$1\r\nv\r\n+OK\r\n+QUEUED\r\n*1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
            #expect(try Self.exchange(c, "HRANDFIELD r3one -2 WITHVALUES\r\nMULTI\r\nHRANDFIELD r3one 1 WITHVALUES\r\nEXEC\r\n", expect: flat) == flat)
            _ = try Self.exchange(c, "HELLO 3\r\n", expect: "*0\r\n")
            #expect(try Self.exchange(c, "RESET\r\nGET r3 missing\r\n", expect: "$-1\r\n") == "+RESET\r\n$-1\r\n")
            #expect(try Self.exchange(c, "HELLO 4\r\nHGET r3 missing\r\n", expect: "$-1\r\n") == "-NOPROTO unsupported protocol version\r\n$-1\r\n")
        }
    }

    @Test("HGETALL, HKEYS and HVALS of a namespace packed into one buffer (40 KB) and of one past that (400 KB, arrays that share the values): the same bytes, in RESP2 and RESP3")
    func wholeNamespaceReadsPackedOrNot() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath)
            for (name, size) in [("small", 100), ("large", 1000)] {
                let fields = (0..<400).map { String(format: "f%03d", $0) }
                let values = fields.indices.map { i in String(repeating: Character(UnicodeScalar(UInt8(97 + i % 26))), count: size - i % 3) }
                #expect(try c.command(["HSET", name] + zip(fields, values).flatMap { [$0, $1] }) == .integer(400))
                func bulk(_ text: String) -> String { "$\(text.utf8.count)\r\n\(text)\r\n" }
                let both = zip(fields, values).map { bulk($0) + bulk($1) }.joined()
                let keys = fields.map(bulk).joined(), vals = values.map(bulk).joined()
                for version in [2, 3] {
                    _ = try Self.exchange(c, "HELLO \(version)\r\n", expect: "$7\r\nmodules\r\n*0\r\n")
                    let expected = (version == 3 ? "%400\r\n" : "*800\r\n") + both + "*400\r\n" + keys + "*400\r\n" + vals
                    #expect(try Self.exchange(c, "HGETALL \(name)\r\nHKEYS \(name)\r\nHVALS \(name)\r\n", expect: expected) == expected, "\(name), RESP\(version)")
                }
            }
        }
    }

    @Test("a RESP3 connection that follows changes gets them as > pushes (a delete's value as _) and keeps running commands")
    func resp3ChangePushes() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            #expect(try writer.command(["HSET", "feed", "a", "1"]) == .integer(1))
            let c = try RawConnection(path: server.socketPath)
            _ = try Self.exchange(c, "HELLO 3\r\n", expect: "*0\r\n")
            #expect(try Self.exchange(c, "CHANGES feed\r\n", expect: ">3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:1\r\n")
                    == ">3\r\n$7\r\nchanges\r\n$4\r\nfeed\r\n:1\r\n>3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:1\r\n")
            // Still a normal connection: commands run between the pushes.
            #expect(try Self.exchange(c, "HGET feed a\r\n", expect: "$1\r\n1\r\n") == "$1\r\n1\r\n")
            #expect(try writer.command(["HDEL", "feed", "a"]) == .integer(1))
            #expect(try Self.receive(c, endingWith: "_\r\n") == ">4\r\n$6\r\nchange\r\n$4\r\nfeed\r\n:2\r\n*2\r\n$1\r\na\r\n_\r\n")
            #expect(try Self.exchange(c, "HLEN feed\r\n", expect: ":0\r\n") == ":0\r\n")
            // A RESP2 follower of the same change gets the array form (the shared encodings differ).
            let old = try RawConnection(path: server.socketPath)
            let history = try Self.exchange(old, "CHANGES feed FROM 1\r\n", expect: "$6\r\nsynced\r\n$4\r\nfeed\r\n:2\r\n")
            #expect(history.hasPrefix("*3\r\n$7\r\nchanges\r\n") && history.contains("*4\r\n$6\r\nchange\r\n$4\r\nfeed\r\n:2\r\n*2\r\n$1\r\na\r\n$-1\r\n"))
            #expect(try Self.exchange(old, "HLEN feed\r\n", expect: "\r\n").hasPrefix("-ERR only CHANGES, PING, QUIT and RESET"))
        }
    }
}
