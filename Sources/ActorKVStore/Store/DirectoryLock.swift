#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// An exclusive `flock` on `<data-dir>/.lock`, held for as long as this object lives, so that
/// only one process at a time opens a data directory. A store's lock file holds its pid.
final class DirectoryLock: Sendable {
    /// The lock file's descriptor; -1 once released (or when there was no file to lock).
    private let fd: Mutex<Int32>

    /// Takes the lock or throws `locked`, naming the pid that holds it.
    ///
    /// With `writingPID` (a store) the file is created if needed and this process's pid written
    /// into it. Without (`--check`), nothing is written: the file is opened read-only, which is
    /// enough for `flock`, so a read-only copy can be checked, and if there is no lock file no
    /// server can be using the directory, so none is made. The file is never opened through a
    /// symbolic link (``SystemCalls/open(_:_:mode:)``). Files are touched through `system`.
    init(directory: String, writingPID: Bool, system: SystemCalls) throws(StoreError) {
        let path = directory + "/.lock"
        let fd: Int32
        do {
            fd = try system.open(path, writingPID ? O_RDWR | O_CREAT : O_RDONLY, mode: 0o600)
        } catch where !writingPID && error.rawValue == ENOENT {
            self.fd = Mutex(-1)
            return
        } catch {
            throw StoreError.io("opening", path, error)
        }
        do {
            try SystemCalls.lockExclusive(fd)
        } catch {
            let holder = (try? NamespaceFiles.readAll(path, system: system)).map { String(decoding: $0, as: UTF8.self) } ?? ""
            SystemCalls.close(fd)
            let who = holder.isEmpty ? "another process" : "process \(holder.trimmingSpaces)"
            throw StoreError(.locked, "data directory \(directory) is in use by \(who); one process per data directory")
        }
        if writingPID {
            let pid = Array(String(getpid()).utf8)
            _ = try? system.ftruncate(fd, 0, path: path)
            _ = try? pid.withBytes { (raw) throws(Errno) in try system.pwriteAll(fd, raw, at: 0, path: path) }
        }
        self.fd = Mutex(fd)
    }

    /// Releases the lock now rather than when this object goes.
    func release() {
        let fd = self.fd.withLock { fd in defer { fd = -1 }; return fd }
        if fd >= 0 { SystemCalls.close(fd) }
    }

    deinit { release() }
}

extension String {
    var trimmingSpaces: String {
        String(self.drop(while: { $0.isWhitespace }).reversed().drop(while: { $0.isWhitespace }).reversed())
    }
}
