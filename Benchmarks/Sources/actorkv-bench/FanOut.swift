#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVProtocol

/// `fanout`: one writer, W watchers of the same stream (issue #19's fan-out row). ActorKV: the
/// writer PUTs to one namespace, each watcher follows it with `CHANGES ns` (durable, gapless);
/// Redis: the writer PUBLISHes to one channel, each watcher SUBSCRIBEs (fire-and-forget). Each
/// message's payload starts with `i:<index>:`, padded to `--payload` bytes.
///
/// With `--rate R` the writer sends message i no earlier than i/R seconds after the first (it
/// still waits for each acknowledgement): latency compared at one load, below what either
/// server can carry, rather than at each one's own saturation, where a server that lets its
/// writer go faster also has longer queues at its watchers.
///
/// The writer sends its messages one at a time and notes when each is acknowledged; reader
/// threads (`--readers`, each polling its share of the watchers' sockets) note when each
/// watcher reads each message, reading messages where they lie in the receive buffer
/// (``FrameScanner``: no allocation per message, for either server). Delivered messages per second = W x N over the time from the
/// first write to the last delivery; latency = delivery time - acknowledgement time (0 when a
/// message is read before its writer's reply arrives, which Redis's PUBLISH allows).
///
/// With `--messages 0 --seconds S` it only holds W watchers for S seconds, draining what comes
/// (to measure writers' throughput with watchers attached, from redis-benchmark beside it), and
/// reports the messages they received and how many were dropped (`-LAGGING`, or closed) on the way.
enum FanOut {
    enum Target: String { case akv, redis }

    /// One reader thread: its watchers and what they read.
    final class Reader {
        let clients: [SocketClient]
        let target: Target
        let expected: Int
        let holdUntil: UInt64
        var deliveries: [(index: Int, at: UInt64)] = []
        var counts: [Int]
        /// Messages of any kind received (holding).
        var received = 0
        /// Watchers the server dropped (holding).
        var dropped = 0
        var error: String?

        init(clients: [SocketClient], target: Target, expected: Int, holdUntil: UInt64) {
            self.clients = clients; self.target = target; self.expected = expected; self.holdUntil = holdUntil
            counts = Array(repeating: 0, count: clients.count)
            deliveries.reserveCapacity(clients.count * expected)
        }

        func run() {
            var fds = clients.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) }
            var remaining = expected > 0 ? clients.count : -1
            var scanner = FrameScanner()
            var scratch = [UInt8](repeating: 0, count: 256 * 1024)
            let deadline = nowNanos() + 300_000_000_000
            while remaining != 0 {
                let now = nowNanos()
                if expected == 0 && now >= holdUntil { return }
                if now > deadline { error = "timed out with \(remaining) watchers short"; return }
                guard poll(&fds, nfds_t(fds.count), 100) >= 0 else { if errno == EINTR { continue }; error = "poll: errno \(errno)"; return }
                for i in fds.indices where fds[i].revents != 0 && fds[i].fd >= 0 {
                    do {
                        try clients[i].receiveRaw(into: &scratch) { (bytes) throws(ClientError) in
                            var at = 0
                            while let end = try scanner.scan(bytes, from: at) {
                                at = end
                                if expected == 0 {
                                    if scanner.tokens[0].type == UInt8(ascii: "-") { dropped += 1; fds[i].fd = -1; break }
                                    received += 1
                                    continue
                                }
                                guard let index = FanOut.index(of: scanner, in: bytes, target: target) else { continue }
                                deliveries.append((index, nowNanos()))
                                counts[i] += 1
                                if counts[i] == expected { remaining -= 1 }
                            }
                            return at
                        }
                    } catch {
                        if expected == 0 {
                            if fds[i].fd >= 0 { dropped += 1 }
                            fds[i].fd = -1
                            continue
                        }
                        self.error = error.description
                        return
                    }
                }
            }
        }
    }

    /// The index in a delivered message's payload (the message `scanner` just scanned in
    /// `bytes`), or nil for any other message.
    static func index(of scanner: FrameScanner, in bytes: UnsafeBufferPointer<UInt8>, target: Target) -> Int? {
        let parts = scanner.tokens
        let payload: FrameScanner.Token
        switch target {
        case .akv:
            // *4 $change $ns :seq *2 $key $value
            guard parts.count == 7, parts[0].type == UInt8(ascii: "*"), parts[0].count == 4,
                  scanner.isBulk(parts[1], "change", in: bytes), parts[4].type == UInt8(ascii: "*"), parts[4].count == 2,
                  parts[6].type == UInt8(ascii: "$") else { return nil }
            payload = parts[6]
        case .redis:
            // *3 $message $channel $payload
            guard parts.count == 4, parts[0].type == UInt8(ascii: "*"), parts[0].count == 3,
                  scanner.isBulk(parts[1], "message", in: bytes), parts[3].type == UInt8(ascii: "$") else { return nil }
            payload = parts[3]
        }
        guard payload.count > 2, bytes[payload.start] == UInt8(ascii: "i"), bytes[payload.start + 1] == UInt8(ascii: ":") else { return nil }
        var n = 0
        for offset in 2..<payload.count {
            let byte = bytes[payload.start + offset]
            guard byte >= 0x30 && byte <= 0x39 else { break }
            n = n * 10 + Int(byte - 0x30)
        }
        return n
    }

    static func run(path: String, target: String, watchers: Int, messages: Int, payload: Int, readers: Int,
                    seconds: Int, namespace: String, rate: Int = 0) throws(ClientError) {
        guard let target = Target(rawValue: target) else { fail("--target: akv or redis") }
        let channel = Array(namespace.utf8)
        var clients: [SocketClient] = []
        for _ in 0..<watchers {
            guard let client = SocketClient(path: path) else { throw ClientError("cannot connect to \(path)") }
            switch target {
            case .akv:
                try client.send(Array("CHANGES \(namespace)\r\n".utf8))
                _ = try client.receive()   // changes ns :seq
                _ = try client.receive()   // synced ns :seq
            case .redis:
                _ = try client.call([Array("SUBSCRIBE".utf8), channel])
            }
            clients.append(client)
        }
        let holdUntil = nowNanos() + UInt64(seconds) * 1_000_000_000
        let share = (watchers + readers - 1) / max(1, readers)
        let readerObjects = stride(from: 0, to: watchers, by: max(1, share)).map {
            Reader(clients: Array(clients[$0..<min(watchers, $0 + share)]), target: target, expected: messages, holdUntil: holdUntil)
        }
        var threads: [pthread_t] = []
        for reader in readerObjects {
            var thread = pthread_t()
            let status = pthread_create(&thread, nil, { raw in
                Unmanaged<Reader>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, Unmanaged.passRetained(reader).toOpaque())
            guard status == 0 else { fail("pthread_create: error \(status)") }
            threads.append(thread)
        }
        var acknowledged = [UInt64](repeating: 0, count: messages)
        let start = nowNanos()
        if messages > 0 {
            guard let writer = SocketClient(path: path) else { throw ClientError("cannot connect to \(path)") }
            let pad = [UInt8](repeating: UInt8(ascii: "x"), count: payload)
            for index in 0..<messages {
                if rate > 0 { pace(until: start + UInt64(index) * 1_000_000_000 / UInt64(rate)) }
                var value = Array("i:\(index):".utf8)
                if value.count < payload { value += pad[0..<(payload - value.count)] }
                let reply = try writer.call(target == .akv
                    ? [Array("PUT".utf8), channel, Array("k".utf8), value] : [Array("PUBLISH".utf8), channel, value])
                if case .error(let text) = reply { throw ClientError("write \(index): -\(text)") }
                acknowledged[index] = nowNanos()
            }
        }
        for thread in threads { pthread_join(thread, nil) }
        if messages == 0 {
            let dropped = readerObjects.reduce(0) { $0 + $1.dropped }
            let received = readerObjects.reduce(0) { $0 + $1.received }
            result("fanout-hold target=\(target.rawValue) watchers=\(watchers) seconds=\(seconds) received=\(received) dropped=\(dropped)")
            return
        }
        if let failed = readerObjects.first(where: { $0.error != nil }) { throw ClientError("a reader failed: \(failed.error ?? "")") }
        var latencies = Samples(capacity: watchers * messages)
        var last = start
        var delivered = 0
        for reader in readerObjects {
            delivered += reader.deliveries.count
            for delivery in reader.deliveries {
                last = max(last, delivery.at)
                guard delivery.index < messages else { continue }
                latencies.add(delivery.at > acknowledged[delivery.index] ? delivery.at - acknowledged[delivery.index] : 0)
            }
        }
        let elapsed = Double(last - start) / 1e9
        let deliveredPerSecond = elapsed > 0 ? Double(delivered) / elapsed : 0
        result("fanout target=\(target.rawValue) watchers=\(watchers) messages=\(messages) payload=\(payload) delivered=\(delivered) "
            + "seconds=\(secs(last - start)) delivered_per_s=\(Int(deliveredPerSecond.rounded())) rate=\(rate) \(latencies.fields("lat_"))")
        if messages > 0 && delivered != watchers * messages {
            fail("fanout: \(delivered) deliveries, expected \(watchers * messages)")
        }
    }

    /// Sleeps until the monotonic clock reads `deadline` (nanoseconds), if it does not yet.
    private static func pace(until deadline: UInt64) {
        let now = nowNanos()
        guard deadline > now else { return }
        var wait = timespec(tv_sec: Int((deadline - now) / 1_000_000_000), tv_nsec: Int((deadline - now) % 1_000_000_000))
        var left = timespec()
        while nanosleep(&wait, &left) != 0 && errno == EINTR { wait = left }
    }
}
