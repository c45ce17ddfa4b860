import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A fresh private directory (mode 0700, made by `mkdtemp`) under `/tmp`, removed with
/// everything in it by ``remove()`` or, at the latest, when the last reference to it goes.
///
/// Always under `/tmp` with a short name, not under `$TMPDIR`: a server's socket inside it must
/// fit in `sun_path` (107 bytes).
public final class TemporaryDirectory: Sendable {
    /// The directory, e.g. `/tmp/akv-t-Ab12Cd`.
    public let path: String

    /// Creates the directory; `label` goes into its name, to tell which test made it.
    public init(_ label: String = "t") {
        var template = Array("/tmp/akv-\(label)-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) != nil }
        precondition(made, "mkdtemp failed: \(String(cString: strerror(errno)))")
        path = String(decoding: template.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    deinit { remove() }

    /// `data` inside the directory: where a test's store or server keeps its data directory.
    public var data: String { path + "/data" }

    /// Removes the directory and everything in it (nothing happens if it is gone already).
    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}
