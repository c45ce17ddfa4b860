#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVProtocol

/// A blocking RESP client on one Unix-socket connection (benchmarks only: no timeouts beyond
/// the ones run.sh puts around the whole process).
final class SocketClient {
    /// The connection's descriptor (for `poll`).
    let fd: Int32
    private var decoder = ReplyDecoder()
    private var readBuffer = [UInt8](repeating: 0, count: 256 * 1024)
    /// The start of a message that ``receiveRaw(into:_:)`` read but its caller could not use yet.
    private var unfinished: [UInt8] = []

    /// Connects, or returns nil if nothing listens at `path` (yet).
    init?(path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { close(fd); return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard ok == 0 else { close(fd); return nil }
        self.fd = fd
    }

    deinit { close(fd) }

    /// Sends raw bytes, all of them.
    func send(_ bytes: [UInt8]) throws(ClientError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ClientError("write: errno \(errno)")
            }
            offset += n
        }
    }

    /// The next reply, blocking until it has arrived.
    func receive() throws(ClientError) -> Reply {
        while true {
            do {
                if let reply = try decoder.next() { return reply }
            } catch {
                throw ClientError("bad reply: \(error)")
            }
            let n = readBuffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ClientError("read: errno \(errno)")
            }
            if n == 0 { throw ClientError("connection closed by the server") }
            readBuffer.withUnsafeBytes { decoder.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
    }

    /// Reads once (blocking until something comes) into `scratch`, after the unfinished message
    /// kept from the last such read, and hands `body` those bytes; `body` returns how many it
    /// used (whole messages), and the rest is kept for the next read. No allocation unless a
    /// message is split across reads. Must not follow a ``receive()`` that left bytes buffered.
    func receiveRaw(into scratch: inout [UInt8], _ body: (UnsafeBufferPointer<UInt8>) throws(ClientError) -> Int) throws(ClientError) {
        guard decoder.bufferedByteCount == 0 else { throw ClientError("receiveRaw after receive left bytes buffered") }
        let kept = unfinished.count
        if scratch.count < kept + 64 * 1024 { scratch = [UInt8](repeating: 0, count: kept + 256 * 1024) }
        scratch.withUnsafeMutableBufferPointer { $0.baseAddress!.update(from: unfinished, count: kept) }
        let n = scratch.withUnsafeMutableBytes { read(fd, $0.baseAddress! + kept, $0.count - kept) }
        if n < 0 {
            if errno == EINTR { return }
            throw ClientError("read: errno \(errno)")
        }
        if n == 0 { throw ClientError("connection closed by the server") }
        let total = kept + n
        let used = try scratch.withUnsafeBufferPointer { (all) throws(ClientError) in try body(UnsafeBufferPointer(rebasing: all[0..<total])) }
        unfinished.removeAll(keepingCapacity: true)
        unfinished.append(contentsOf: scratch[used..<total])
    }

    /// Sends one request and waits for its reply.
    func call(_ arguments: [[UInt8]]) throws(ClientError) -> Reply {
        var buffer: [UInt8] = []
        RequestEncoder.encode(arguments, into: &buffer)
        try send(buffer)
        return try receive()
    }

    func call(_ arguments: String...) throws(ClientError) -> Reply {
        try call(arguments.map { Array($0.utf8) })
    }
}

struct ClientError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

enum SocketBench {
    /// `wait-ping`: polls `path` every `intervalMicros` until a PING gets +PONG (a -LOADING error,
    /// a refused connection or a missing socket count as not ready); prints the milliseconds
    /// since `sinceNanos` (CLOCK_REALTIME, e.g. from `date +%s%N` just before the server started).
    static func waitPing(path: String, sinceNanos: UInt64, timeoutSeconds: Double, intervalMicros: UInt32) {
        let start = sinceNanos > 0 ? sinceNanos : wallNanos()
        let deadline = nowNanos() + UInt64(timeoutSeconds * 1e9)
        var attempts = 0
        while nowNanos() < deadline {
            attempts += 1
            if let client = SocketClient(path: path), let reply = try? client.call("PING"), reply == .simple("PONG") {
                let ms = Double(wallNanos() &- start) / 1e6
                result("ping ready_ms=\(fmt(ms)) attempts=\(attempts)")
                return
            }
            usleep(intervalMicros)
        }
        fail("no PONG from \(path) within \(timeoutSeconds) s")
    }

    /// `socket-latency`: fills namespace `ns` of a running actorkvd to `keys` keys with pipelined
    /// BATCHes, COMPACTs it, then times `puts` sequential PUTs on one connection.
    static func putLatency(path: String, namespace: String, keys n: Int, puts: Int) throws(ClientError) {
        guard let client = SocketClient(path: path) else { throw ClientError("cannot connect to \(path)") }
        let ns = Array(namespace.utf8)
        let fillStart = nowNanos()
        let batch = 1000
        var pending = 0
        var i = 0
        var out: [UInt8] = []
        func drain(_ upTo: Int) throws(ClientError) {
            while pending > upTo {
                let reply = try client.receive()
                guard case .array(let items) = reply, items.count > 0 else { throw ClientError("BATCH failed: \(reply)") }
                pending -= 1
            }
        }
        while i < n {
            let end = min(n, i + batch)
            var args: [[UInt8]] = [Array("BATCH".utf8), ns]
            args.reserveCapacity(2 + 3 * (end - i))
            for k in i..<end { args.append(Array("PUT".utf8)); args.append(benchKey(2 * k)); args.append(benchValue) }
            out.removeAll(keepingCapacity: true)
            RequestEncoder.encode(args, into: &out)
            try client.send(out)
            pending += 1
            // One batch in flight at a time: this client sends and receives on one thread, and
            // pipelining more would only shorten the fill, which is not what is timed.
            try drain(0)
            i = end
        }
        try drain(0)
        let filled = nowNanos()
        let compactReply = try client.call("COMPACT", namespace)
        guard compactReply == .simple("OK") else { throw ClientError("COMPACT: \(compactReply)") }
        let compacted = nowNanos()
        guard case .integer(let count) = try client.call("COUNT", namespace), count == n else {
            throw ClientError("COUNT \(namespace) is not \(n) after the fill")
        }

        var rng = SplitMix(seed: 42)
        var request: [UInt8] = []
        for w in 0..<min(100, puts) {
            request.removeAll(keepingCapacity: true)
            RequestEncoder.encode([Array("PUT".utf8), ns, benchKey(2 * (w % max(n, 1))), benchValue], into: &request)
            try client.send(request)
            _ = try client.receive()
        }
        var all = Samples(capacity: puts), fresh = Samples(capacity: puts), over = Samples(capacity: puts)
        for p in 0..<puts {
            let (key, isNew) = timedKey(p, existing: n, rng: &rng)
            request.removeAll(keepingCapacity: true)
            RequestEncoder.encode([Array("PUT".utf8), ns, key, benchValue], into: &request)
            let t0 = nowNanos()
            try client.send(request)
            let reply = try client.receive()
            let dt = nowNanos() - t0
            guard reply == .simple("OK") else { throw ClientError("PUT: \(reply)") }
            all.add(dt)
            if isNew { fresh.add(dt) } else { over.add(dt) }
        }
        result("socket keys=\(n) \(all.fields()) \(fresh.fields("new_")) \(over.fields("over_")) fill_s=\(secs(filled - fillStart)) compact_s=\(secs(compacted - filled))")
    }
}
