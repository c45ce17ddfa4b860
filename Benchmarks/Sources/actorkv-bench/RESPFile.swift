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
    ///
    /// `prefix` replaces the keys' `key:`; a `pxSpread` above 0 gives each key `PX ms`, `ms` drawn
    /// evenly from 1 to `pxSpread` (the same for both servers): the keys then expire over that
    /// many milliseconds after they are loaded.
    static func generate(target: String, keys n: Int, path: String, prefix keyPrefix: String = "key:",
                         pxSpread: Int = 0) throws(ClientError) {
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
        var expiry = SplitMix(seed: 2025)
        for k in 0..<n {
            for i in value.indices { value[i] = alphabet[Int(rng.next() % UInt64(alphabet.count))] }
            let key = Array(keyPrefix.utf8) + benchKey(k).dropFirst(4)
            let px: [[UInt8]] = pxSpread > 0 ? [Array("PX".utf8), Array(String(1 + expiry.next() % UInt64(pxSpread)).utf8)] : []
            RequestEncoder.encode(prefix + [key, value] + px, into: &buffer)
            if buffer.count >= 1 << 20 || k == n - 1 {
                guard fwrite(buffer, 1, buffer.count, file) == buffer.count else { throw ClientError("writing \(path) failed") }
                buffer.removeAll(keepingCapacity: true)
            }
        }
    }
}
