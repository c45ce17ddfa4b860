#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An exclusive `flock` on `<data-dir>/.lock`, held for as long as this object lives, so that
/// only one process at a time opens a data directory. The file holds the owner's pid.
final class DirectoryLock: Sendable {
    private let fd: Int32

    /// Takes the lock or throws `locked`, naming the pid that holds it.
    init(directory: String) throws(StoreError) {
        let path = directory + "/.lock"
        let fd: Int32
        do { fd = try SystemCalls.open(path, O_RDWR | O_CREAT, mode: 0o600) } catch {
            throw StoreError.io("opening", path, error)
        }
        do {
            try SystemCalls.lockExclusive(fd)
        } catch {
            let holder = (try? NamespaceFiles.readAll(path)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            SystemCalls.close(fd)
            let who = holder.isEmpty ? "another process" : "process \(holder.trimmingSpaces)"
            throw StoreError(.locked, "data directory \(directory) is in use by \(who); one process per data directory")
        }
        let pid = Array(String(getpid()).utf8)
        _ = try? SystemCalls.ftruncate(fd, 0, path: path)
        _ = try? pid.withBytes { (raw) throws(Errno) in try SystemCalls.pwriteAll(fd, raw, at: 0, path: path) }
        self.fd = fd
    }

    deinit { SystemCalls.close(fd) }
}

extension String {
    var trimmingSpaces: String {
        String(self.drop(while: { $0.isWhitespace }).reversed().drop(while: { $0.isWhitespace }).reversed())
    }
}
