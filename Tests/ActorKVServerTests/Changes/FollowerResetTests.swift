import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// RESET ends a connection's CHANGES streams, on RESP2 and RESP3, leaving an ordinary RESP2
/// connection; HELLO 2 on a RESP3 follower makes it a RESP2 follower, as in Redis (protocol.md,
/// "CHANGES", "HELLO and RESP3"). Real servers, real sockets, byte for byte.
@Suite("RESET and HELLO on a following connection")
struct FollowerResetTests {
    @Test("RESET on a RESP3 follower: +RESET, then no change message, every command accepted in RESP2, CHANGES again works")
    func resetEndsResp3Follow() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            let c = try RawConnection(path: server.socketPath, timeoutSeconds: 5)
            _ = try RESP3ServerTests.exchange(c, "HELLO 3\r\n", expect: "*0\r\n")
            #expect(try RESP3ServerTests.exchange(c, "CHANGES feed\r\n", expect: ">3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:0\r\n")
                    == ">3\r\n$7\r\nchanges\r\n$4\r\nfeed\r\n:0\r\n>3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:0\r\n")
            #expect(try writer.command(["PUT", "feed", "a", "1"]) == .simple("OK"))
            #expect(try RESP3ServerTests.receive(c, endingWith: "$1\r\n1\r\n") == ">4\r\n$6\r\nchange\r\n$4\r\nfeed\r\n:1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n")
            #expect(try RESP3ServerTests.exchange(c, "RESET\r\n", expect: "+RESET\r\n") == "+RESET\r\n")
            // A change after RESET is not sent, and the connection is an ordinary RESP2 one.
            #expect(try writer.command(["PUT", "feed", "a", "2"]) == .simple("OK"))
            #expect(try RESP3ServerTests.exchange(c, "GET feed a\r\nGET feed missing\r\n", expect: "$-1\r\n") == "$1\r\n2\r\n$-1\r\n")
            let info = try RESP3ServerTests.exchange(c, "CLIENT INFO\r\n", expect: "\n\r\n")
            #expect(info.contains(" flags=U ") && info.contains(" resp=2 "), "\(info)")
            #expect(try RESP3ServerTests.exchange(c, "PUT feed b 1\r\n", expect: "+OK\r\n") == "+OK\r\n")
            // HELLO 3 works again, and so does a new CHANGES (a new follow, from now).
            _ = try RESP3ServerTests.exchange(c, "HELLO 3\r\n", expect: "*0\r\n")
            #expect(try RESP3ServerTests.exchange(c, "CHANGES feed\r\n", expect: ">3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:3\r\n")
                    == ">3\r\n$7\r\nchanges\r\n$4\r\nfeed\r\n:3\r\n>3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:3\r\n")
            #expect(try writer.command(["PUT", "feed", "a", "3"]) == .simple("OK"))
            #expect(try RESP3ServerTests.receive(c, endingWith: "$1\r\n3\r\n") == ">4\r\n$6\r\nchange\r\n$4\r\nfeed\r\n:4\r\n*2\r\n$1\r\na\r\n$1\r\n3\r\n")
        }
    }

    @Test("RESET on a RESP2 follower is accepted and ends the follow; pipelined commands after it run")
    func resetEndsResp2Follow() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            let c = try RawConnection(path: server.socketPath, timeoutSeconds: 5)
            #expect(try RESP3ServerTests.exchange(c, "CHANGES feed\r\n", expect: "$6\r\nsynced\r\n$4\r\nfeed\r\n:0\r\n")
                    == "*3\r\n$7\r\nchanges\r\n$4\r\nfeed\r\n:0\r\n*3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:0\r\n")
            #expect(try RESP3ServerTests.exchange(c, "GET feed a\r\n", expect: "while following changes\r\n").hasPrefix("-ERR only CHANGES, PING"))
            #expect(try RESP3ServerTests.exchange(c, "RESET\r\nGET feed a\r\n", expect: "$-1\r\n") == "+RESET\r\n$-1\r\n")
            #expect(try writer.command(["PUT", "feed", "a", "1"]) == .simple("OK"))
            #expect(try RESP3ServerTests.exchange(c, "GET feed a\r\n", expect: "$1\r\n1\r\n") == "$1\r\n1\r\n")
            // A CHANGES and a RESET in one pipeline: the follow ends before it sends anything
            // after +RESET (its `synced` may come first, if the CHANGES ran on its own).
            let both = try RESP3ServerTests.exchange(c, "CHANGES feed\r\nRESET\r\nPUT feed a 2\r\nGET feed a\r\n", expect: "$1\r\n2\r\n")
            #expect(both.hasPrefix("*3\r\n$7\r\nchanges\r\n$4\r\nfeed\r\n:1\r\n") && both.hasSuffix("+RESET\r\n+OK\r\n$1\r\n2\r\n"), "\(both.debugDescription)")
            #expect(try RESP3ServerTests.exchange(c, "PING\r\n", expect: "+PONG\r\n") == "+PONG\r\n")
        }
    }

    @Test("HELLO 2 on a RESP3 follower switches as Redis does: a RESP2 follower, which RESET turns back into an ordinary connection")
    func hello2ThenReset() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            let c = try RawConnection(path: server.socketPath, timeoutSeconds: 5)
            _ = try RESP3ServerTests.exchange(c, "HELLO 3\r\n", expect: "*0\r\n")
            _ = try RESP3ServerTests.exchange(c, "CHANGES feed\r\n", expect: ">3\r\n$6\r\nsynced\r\n$4\r\nfeed\r\n:0\r\n")
            #expect(try RESP3ServerTests.exchange(c, "HELLO 2\r\n", expect: "*0\r\n").hasPrefix("*14\r\n"))
            #expect(try writer.command(["PUT", "feed", "a", "1"]) == .simple("OK"))
            #expect(try RESP3ServerTests.receive(c, endingWith: "$1\r\n1\r\n") == "*4\r\n$6\r\nchange\r\n$4\r\nfeed\r\n:1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n")
            for request in ["HELLO 3\r\n", "GET feed a\r\n"] {
                #expect(try RESP3ServerTests.exchange(c, request, expect: "while following changes\r\n").hasPrefix("-ERR only CHANGES, PING"))
            }
            // RESET: no more changes, every command accepted, HELLO 3 switches again.
            #expect(try RESP3ServerTests.exchange(c, "RESET\r\n", expect: "+RESET\r\n") == "+RESET\r\n")
            #expect(try writer.command(["PUT", "feed", "a", "2"]) == .simple("OK"))
            #expect(try RESP3ServerTests.exchange(c, "GET feed a\r\nGET feed missing\r\n", expect: "$-1\r\n") == "$1\r\n2\r\n$-1\r\n")
            #expect(try RESP3ServerTests.exchange(c, "HELLO 3\r\nGET feed missing\r\n", expect: "*0\r\n_\r\n").hasPrefix("%7\r\n"))
        }
    }

    @Test("RESET while changes flood in: every message before +RESET is whole, none after it", arguments: [2, 3])
    func resetDuringFlood(protocolVersion: Int) async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let c = try RawConnection(path: server.socketPath, timeoutSeconds: 10)
            var reader = FrameReader(c)
            if protocolVersion == 3 {
                try c.send("HELLO 3\r\n")
                #expect(try reader.next().type == "%")
            }
            try c.send("CHANGES flood\r\n")
            #expect(try reader.next().text.contains("changes"))
            #expect(try reader.next().text.contains("synced"))
            // A writer floods the namespace from another connection until told to stop.
            let flood = Flood()
            let socketPath = server.socketPath
            Thread {
                defer { flood.ended.store(true, ordering: .releasing) }
                guard let w = try? RawConnection(path: socketPath) else { return }
                let value = String(repeating: "v", count: 200)
                var batch = ""
                for i in 0..<50 { batch += "PUT flood k\(i) \(value)\r\n" }
                while !flood.stop.load(ordering: .relaxed) {
                    guard (try? w.send(batch)) != nil else { return }
                    for _ in 0..<50 { guard (try? w.reply()) != nil else { return } }
                    flood.writes.add(50, ordering: .relaxed)
                }
            }.start()
            defer { flood.stop.store(true, ordering: .relaxed) }
            // Read some changes, then RESET in the middle of the flood.
            var last: UInt64 = 0
            for _ in 0..<200 {
                let frame = try reader.next()
                #expect(frame.type == (protocolVersion == 3 ? ">" : "*") && frame.text.contains("change"))
                last = frame.sequence ?? last
            }
            try c.send("RESET\r\n")
            var before = 0
            while true {
                let frame = try reader.next()
                if frame.type == "+" || frame.type == "-" {
                    #expect(frame.type == "+" && frame.text == "RESET", "\(frame)")
                    break
                }
                // Whole change messages, in the protocol spoken before RESET, gapless.
                #expect(frame.type == (protocolVersion == 3 ? ">" : "*") && frame.text.contains("change"), "\(frame)")
                if let sequence = frame.sequence {
                    #expect(sequence == last + 1)
                    last = sequence
                }
                before += 1
            }
            // Nothing after +RESET: the next frames are the replies, in RESP2, while the flood goes on.
            let writesAtReset = flood.writes.load(ordering: .relaxed)
            while flood.writes.load(ordering: .relaxed) < writesAtReset + 500 && !flood.ended.load(ordering: .acquiring) { usleep(1000) }
            let writerEnded = flood.ended.load(ordering: .acquiring)
            #expect(!writerEnded, "the writer stopped")
            try c.send("PING\r\nGET flood missing\r\nGET flood k1\r\n")
            #expect(try reader.next().text == "PONG")
            #expect(try reader.next().type == "$-1")
            let value = try reader.next()
            #expect(value.type == "$" && value.text.count == 200, "\(value)")
            flood.stop.store(true, ordering: .relaxed)
            usleep(50_000)
            try c.send("PING\r\n")
            #expect(try reader.next().text == "PONG")
            #expect(last > 0)
        }
    }

    @Test("RESET while SNAPSHOT pages wait to be read: the pages sent are whole, the rest are not sent")
    func resetDuringSnapshot() async throws {
        try await onOwnThread {
            let server = try ServerProcess(arguments: [])
            defer { server.stop() }
            let writer = try RawConnection(path: server.socketPath)
            // 10,000 keys of 1 KiB: ten pages of about 1 MB, each about a connection's 1 MiB of
            // unsent replies, so the later pages wait for the reader.
            let value = String(repeating: "x", count: 1024)
            for round in 0..<10 {
                var batch = ""
                for i in 0..<1000 { batch += "PUT big k\(round)\(String(1000 + i)) \(value)\r\n" }
                try writer.send(batch)
                for _ in 0..<1000 { _ = try writer.reply() }
            }
            let c = try RawConnection(path: server.socketPath, timeoutSeconds: 10)
            try c.send("CHANGES big SNAPSHOT\r\n")
            var reader = FrameReader(c)
            #expect(try reader.next().text.contains("changes"))
            usleep(200_000)
            try c.send("RESET\r\nGET big k01000\r\n")
            var pages = 0
            while true {
                let frame = try reader.next()
                if frame.type == "+" || frame.type == "-" { #expect(frame.type == "+" && frame.text == "RESET", "\(frame)"); break }
                #expect(frame.type == "*" && frame.text.hasPrefix("snapshot"), "\(frame)")
                pages += 1
            }
            #expect(pages < 10, "RESET came after every page: not a test of pages left unsent")
            let got = try reader.next()
            #expect(got.type == "$" && got.text == value)
            try c.send("PING\r\n")
            #expect(try reader.next().text == "PONG")
        }
    }
}

/// What the flooding writer of ``FollowerResetTests/resetDuringFlood(protocolVersion:)`` shares.
final class Flood: Sendable {
    let stop = Atomic<Bool>(false)
    let ended = Atomic<Bool>(false)
    let writes = Atomic<Int>(0)
}

/// What ``FrameReader`` met that is not RESP, or a failed read.
struct FollowerFrameReaderError: Error, CustomStringConvertible {
    let description: String
}

/// Reads whole RESP2/RESP3 frames from a connection, as raw as the tests need: the frame's type
/// (`$-1` for a null bulk), the words of its text (bulks and simple strings joined by spaces,
/// nested ones included), its elements, and the sequence of a `change` message.
struct FrameReader {
    struct Frame: CustomStringConvertible {
        var type: String
        var text: String
        var sequence: UInt64?
        /// An aggregate's elements (a map's keys and values in turn).
        var elements: [Frame] = []
        var description: String { "\(type) \(text.prefix(120)) \(sequence.map(String.init) ?? "")" }
    }

    private let connection: RawConnection
    private var buffer: [UInt8] = []
    private var position = 0

    init(_ connection: RawConnection) { self.connection = connection }

    mutating func next() throws -> Frame {
        while true {
            var at = position
            if let frame = try parse(&at) {
                position = at
                if position > 1 << 20 {
                    buffer.removeFirst(position)
                    position = 0
                }
                return frame
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(connection.fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw FollowerFrameReaderError(description: "recv: \(n) (\(String(cString: strerror(errno))))") }
            buffer += chunk[0..<n]
        }
    }

    /// The line at `at` (without CRLF), or nil if it is not all here.
    private func line(_ at: inout Int) -> String? {
        var i = at
        while i + 1 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 {
                let text = String(decoding: buffer[at..<i], as: UTF8.self)
                at = i + 2
                return text
            }
            i += 1
        }
        return nil
    }

    private func parse(_ at: inout Int) throws -> Frame? {
        guard at < buffer.count else { return nil }
        let type = Character(UnicodeScalar(buffer[at]))
        var cursor = at + 1
        guard let header = line(&cursor) else { return nil }
        switch type {
        case "+", "-", ":", "_":
            at = cursor
            return Frame(type: String(type), text: header)
        case "$":
            guard let length = Int(header) else { throw FollowerFrameReaderError(description: "bad bulk length \(header)") }
            if length < 0 { at = cursor; return Frame(type: "$-1", text: "") }
            guard cursor + length + 2 <= buffer.count else { return nil }
            guard buffer[cursor + length] == 13, buffer[cursor + length + 1] == 10 else {
                throw FollowerFrameReaderError(description: "bulk not followed by CRLF")
            }
            let text = String(decoding: buffer[cursor..<(cursor + length)], as: UTF8.self)
            at = cursor + length + 2
            return Frame(type: "$", text: text)
        case "*", ">", "%":
            guard let count = Int(header) else { throw FollowerFrameReaderError(description: "bad aggregate length \(header)") }
            var words: [String] = []
            var elements: [Frame] = []
            for _ in 0..<max(0, count * (type == "%" ? 2 : 1)) {
                guard let element = try parse(&cursor) else { return nil }
                elements.append(element)
                if !element.text.isEmpty { words.append(element.text) }
            }
            at = cursor
            var frame = Frame(type: String(type), text: words.joined(separator: " "), elements: elements)
            if elements.count == 4, elements[0].text == "change", elements[2].type == ":" { frame.sequence = UInt64(elements[2].text) }
            return frame
        default:
            throw FollowerFrameReaderError(description: "not RESP: byte \(buffer[at]) at \(at)")
        }
    }
}
