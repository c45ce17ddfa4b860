@testable import ActorKVClient
import ActorKVProtocol
import Glibc
import Testing

/// A connection let go (a held lock's, whose descriptor a child process may share): its threads
/// stop after the last reply and the socket is not shut down, so a copy of the descriptor keeps
/// the connection; an explicit shutdown still ends it for every copy.
@Suite("Client connection: letting go of a shared connection")
struct LetGoTests {
    /// Reads exactly `count` bytes from `fd`; fewer if the stream ends or nothing comes for 10 s.
    func readBytes(_ fd: Int32, count: Int) -> [UInt8] {
        setTimeout(fd, SO_RCVTIMEO, .seconds(10))
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + done, count - done, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            done += n
        }
        return Array(bytes.prefix(done))
    }

    @Test("letGo: the last request goes out, its reply stops the threads and frees the connection; a copy still talks both ways")
    func letGoKeepsCopies() async throws {
        let (client, server) = socketPair()
        defer { close(server) }
        var connection: Connection? = Connection.adopt(fd: client, path: "fake", timeout: .seconds(10))
        weak let released = connection
        let copy = try #require(connection?.duplicateDescriptor())
        #expect(copy >= 0)
        defer { close(copy) }
        connection?.letGo(after: RefusalTests.ping)
        #expect(readBytes(server, count: RefusalTests.ping.count) == RefusalTests.ping)
        #expect(connection?.isUsable == false, "no request after the last")
        connection = nil
        #expect(released != nil, "its reader holds it until the reply")
        writeBytes(server, Array("+PONG\r\n".utf8))
        for _ in 0..<2000 where released != nil { try await Task.sleep(for: .milliseconds(2)) }
        #expect(released == nil, "the threads stopped after the reply and let the connection go (its deinit closes its descriptor)")
        // Not shut down: the copy reads what the peer sends, and the peer reads what it sends.
        writeBytes(server, Array("hello".utf8))
        #expect(readBytes(copy, count: 5) == Array("hello".utf8))
        writeBytes(copy, Array("back".utf8))
        #expect(readBytes(server, count: 4) == Array("back".utf8))
    }

    @Test("shutdown(with:) after letGo shuts the socket down, for the copies too (a release that must end the connection)")
    func shutdownAfterLetGo() async throws {
        let (client, server) = socketPair()
        defer { close(server) }
        let connection = Connection.adopt(fd: client, path: "fake", timeout: .seconds(10))
        let copy = connection.duplicateDescriptor()
        #expect(copy >= 0)
        defer { close(copy) }
        connection.letGo(after: RefusalTests.ping)
        #expect(readBytes(server, count: RefusalTests.ping.count) == RefusalTests.ping)
        connection.shutdown(with: .closed)
        #expect(readBytes(server, count: 1).isEmpty, "the peer sees the end of the stream")
        #expect(readBytes(copy, count: 1).isEmpty, "so does the copy")
    }
}
