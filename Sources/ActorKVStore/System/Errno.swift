#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A POSIX error number with a readable description.
public struct Errno: Error, Hashable, Sendable, CustomStringConvertible {
    /// The raw `errno` value.
    public let rawValue: Int32

    /// Wraps a raw `errno` value.
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    /// No space left on device.
    public static let noSpace = Errno(ENOSPC)
    /// Input/output error.
    public static let io = Errno(EIO)
    /// Resource temporarily unavailable (a lock held elsewhere).
    public static let wouldBlock = Errno(EWOULDBLOCK)

    /// The C library's text for this error, e.g. "No space left on device".
    public var description: String { String(cString: strerror(rawValue)) }
}
