#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Counters shared between the event loop and INFO.
public final class ServerStatistics: Sendable {
    /// Clients connected now.
    public let connectedClients = Atomic<Int>(0)
    /// Connections accepted since start.
    public let totalConnections = Atomic<Int>(0)
    /// Connections refused (max clients reached or peer not allowed).
    public let rejectedConnections = Atomic<Int>(0)
    /// Requests processed since start.
    public let commandsProcessed = Atomic<Int>(0)
    /// Connections closed for a framing error.
    public let protocolErrors = Atomic<Int>(0)

    /// Creates zeroed counters.
    public init() {}
}

extension ServerStatistics {
    /// The process's resident set size in bytes: `/proc/self/statm`'s second field times the
    /// page size (one small read; 0 if it cannot be read). INFO's `used_memory`.
    static func residentBytes() -> Int {
        let fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return 0 }
        // "size resident shared text lib data dt": the second number, in pages.
        let fields = buffer[0..<count].split(separator: UInt8(ascii: " "))
        guard fields.count > 1, let pages = Int(String(decoding: fields[1], as: UTF8.self)) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// `bytes` as Redis's INFO shows sizes for people (`used_memory_human`): `512B`, `965.62K`,
    /// `11.55M`, `1.50G`, two decimals, in units of 1024.
    static func humanBytes(_ bytes: Int) -> String {
        guard bytes >= 1024 else { return "\(bytes)B" }
        var unit = 0, scale = 1024.0
        let units = ["K", "M", "G", "T", "P"]
        while unit < units.count - 1 && Double(bytes) >= scale * 1024 { (unit, scale) = (unit + 1, scale * 1024) }
        let hundredths = Int((Double(bytes) / scale * 100).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100).\(fraction < 10 ? "0" : "")\(fraction)\(units[unit])"
    }
}
