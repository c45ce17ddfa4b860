#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import ActorKVProtocol

/// Writes the bulk-load files fed to `redis-cli --pipe`.
enum RESPFile {
    /// N puts of keys `key:000000000000` … in ascending order, each with its own pseudo-random
    /// 100-byte alphanumeric value (deterministic; not the repetitive bench value, which Redis's
    /// RDB compression would shrink to almost nothing): `PUT bench key value` for ActorKV,
    /// `SET key value` for Redis. Both files hold the same keys and values.
    static func generate(target: String, keys n: Int, path: String) throws(ClientError) {
        let prefix: [[UInt8]]
        switch target {
        case "akv": prefix = [Array("PUT".utf8), Array("bench".utf8)]
        case "redis": prefix = [Array("SET".utf8)]
        default: throw ClientError("--target must be akv or redis")
        }
        guard let file = fopen(path, "w") else { throw ClientError("cannot create \(path): errno \(errno)") }
        defer { fclose(file) }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(1 << 20)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789".utf8)
        var rng = SplitMix(seed: 2024)
        var value = [UInt8](repeating: 0, count: benchValue.count)
        for k in 0..<n {
            for i in value.indices { value[i] = alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            RequestEncoder.encode(prefix + [benchKey(k), value], into: &buffer)
            if buffer.count >= 1 << 20 || k == n - 1 {
                guard fwrite(buffer, 1, buffer.count, file) == buffer.count else { throw ClientError("writing \(path) failed") }
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }
}
