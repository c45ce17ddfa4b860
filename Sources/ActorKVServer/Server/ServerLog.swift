#if canImport(Glibc)
import Glibc
#endif

/// Writes one line per event to stderr, prefixed with a UTC timestamp.
public enum ServerLog {
    /// Logs `message` as one line.
    @Sendable public static func line(_ message: String) {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        let stamp = String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let text = "\(stamp) actorkvd[\(getpid())] \(message.replacingNewlines)\n"
        _ = text.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }
}

extension String {
    var replacingNewlines: String { String(map { $0 == "\n" || $0 == "\r" ? " " : $0 }) }
}
