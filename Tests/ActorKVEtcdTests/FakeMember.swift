@testable import ActorKVEtcd
import Foundation
import Glibc
import Synchronization

/// A fake etcd member: accepts TCP connections on 127.0.0.1 (a port of its own), reads HTTP
/// requests (by Content-Length) and does what `script` says for each, numbered from 0 across
/// connections. Runs on a thread of its own until the process ends; each connection is served
/// on a thread of its own, so a script may block to hold an answer back.
final class FakeMember: Sendable {
    enum Action: Sendable {
        case answer(Int, [UInt8])
        case answerAndClose(Int, [UInt8])
        case closeWithoutAnswer
    }

    /// A request as read: its path and its body.
    struct Request: Sendable {
        let path: String
        let body: [UInt8]

        /// The body's JSON object (empty if it is not one).
        var json: [String: Any] {
            (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
        }
    }

    let endpoint: EtcdEndpoint
    private let count = Atomic<Int>(0)
    private let paths = Mutex<[String]>([])

    /// How many requests it has read.
    var requests: Int { count.load(ordering: .relaxed) }
    /// The paths of the requests read, in order.
    var requestPaths: [String] { paths.withLock { $0 } }

    /// A member that answers the request numbered `index` as `script(index)` says.
    convenience init(_ script: @escaping @Sendable (Int) -> Action) throws {
        try self.init(requests: { index, _ in script(index) })
    }

    /// A member that answers each request as `script(index, request)` says.
    init(requests script: @escaping @Sendable (Int, Request) -> Action) throws {
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

    private func serve(_ connection: Int32, script: @Sendable (Int, Request) -> Action) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            guard let request = Self.readRequest(connection, &buffer, &chunk) else { return }
            paths.withLock { $0.append(request.path) }
            let action = script(count.add(1, ordering: .relaxed).oldValue, request)
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
    private static func readRequest(_ connection: Int32, _ buffer: inout [UInt8], _ chunk: inout [UInt8]) -> Request? {
        while true {
            if let end = find(Array("\r\n\r\n".utf8), in: buffer) {
                let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if buffer.count >= end + 4 + length {
                    let path = head.split(separator: " ").dropFirst().first.map(String.init) ?? ""
                    let request = Request(path: path, body: Array(buffer[(end + 4)..<(end + 4 + length)]))
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
