#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The one door through which the storage engine reaches the kernel.
///
/// Every file operation the engine performs passes through here, so that tests can make any of
/// them fail with a chosen errno without a real full disk or a broken device. Each function
/// retries on `EINTR` and reports failure as an ``Errno``.
///
/// The calls a test can make fail are methods of a value that carries its store's
/// ``FaultInjector`` (``StoreOptions/faults``), handed down to wherever the store's files are
/// touched (``NamespaceFiles``, ``LogSegment``, ``FileWindow``, ``DirectoryLock``); without an
/// injector each costs one nil check. An injector may also carry a ``FileOperationRecorder``, to
/// which each mutating call reports once it has succeeded. The calls no test makes fail (`close`, `fstat`, `stat`,
/// `flock`) are static.
struct SystemCalls: Sendable {
    /// The injector consulted before each call; nil for none.
    let faults: FaultInjector?

    /// Calls that no injector can make fail: for reads outside a store (``Store/check(directory:)``)
    /// and for tests of the file formats.
    static let plain = SystemCalls(faults: nil)

    /// Marks the named step `name` of the engine: stops there if `ACTORKV_FAILPOINT` names it,
    /// or if this store's injector has it armed (see ``FaultInjector``).
    func failpoint(_ name: String) throws(StoreError) {
        try FaultInjector.failpoint(name, in: faults)
    }

    /// Opens `path` with `flags` and `mode`. The corresponding C function is `open`.
    ///
    /// A file (anything but an `O_DIRECTORY` open) is never opened through a symbolic link
    /// (`O_NOFOLLOW`, failing with ELOOP): nothing the engine opens inside the data directory is
    /// one, and someone who could plant one there must not redirect its writes to another file.
    /// A directory may be a link: the data directory itself is often one, by the operator's choice.
    func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(Errno) -> Int32 {
        try faults?.check(.open, path: path)
        let noFollow = flags & O_DIRECTORY == 0 ? O_NOFOLLOW : 0
        while true {
            let fd = Glibc.open(path, flags | O_CLOEXEC | noFollow, mode)
            if fd >= 0 {
                if flags & (O_CREAT | O_TRUNC) != 0 {
                    faults?.recorder?.record(.open(path: path, truncates: flags & O_TRUNC != 0))
                }
                return fd
            }
            if errno != EINTR { throw Errno(errno) }
        }
    }

    /// Closes a descriptor, ignoring errors (there is nothing useful to do with them).
    static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// Writes all of `bytes` at `offset`. The corresponding C function is `pwrite`.
    ///
    /// A failure can leave a prefix of `bytes` written; callers that need all-or-nothing
    /// truncate back to `offset`.
    func pwriteAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int, path: String) throws(Errno) {
        var done = 0
        while done < bytes.count {
            try faults?.check(.write, path: path)
            let n = Glibc.pwrite(fd, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            if n < 0 {
                if errno == EINTR { continue }
                throw Errno(errno)
            }
            if let recorder = faults?.recorder {
                recorder.record(.write(path: path, offset: offset + done, bytes: Array(UnsafeRawBufferPointer(rebasing: bytes[done..<done + n]))))
            }
            done += n
        }
    }

    /// Reads up to `count` bytes at `offset` into `buffer`; returns the number read (0 at end of file).
    func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, at offset: Int, path: String) throws(Errno) -> Int {
        try faults?.check(.read, path: path)
        while true {
            let n = Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n >= 0 { return n }
            if errno != EINTR { throw Errno(errno) }
        }
    }

    /// Flushes a file's data (and the metadata needed to read it) to stable storage.
    /// The corresponding C function is `fdatasync`.
    func fdatasync(_ fd: Int32, path: String) throws(Errno) {
        try faults?.check(.fsync, path: path)
        while Glibc.fdatasync(fd) != 0 {
            if errno != EINTR { throw Errno(errno) }
        }
        faults?.recorder?.record(.sync(path: path))
    }

    /// Flushes a file or directory completely. The corresponding C function is `fsync`.
    func fsync(_ fd: Int32, path: String) throws(Errno) {
        try faults?.check(.fsync, path: path)
        while Glibc.fsync(fd) != 0 {
            if errno != EINTR { throw Errno(errno) }
        }
        faults?.recorder?.record(.sync(path: path))
    }

    /// Opens a directory and fsyncs it, so that entries created, renamed or removed in it are durable.
    func fsyncDirectory(_ path: String) throws(Errno) {
        let fd = try open(path, O_RDONLY | O_DIRECTORY)
        defer { Self.close(fd) }
        try fsync(fd, path: path)
    }

    /// Cuts a file to `length` bytes. The corresponding C function is `ftruncate`.
    func ftruncate(_ fd: Int32, _ length: Int, path: String) throws(Errno) {
        try faults?.check(.truncate, path: path)
        while Glibc.ftruncate(fd, off_t(length)) != 0 {
            if errno != EINTR { throw Errno(errno) }
        }
        faults?.recorder?.record(.truncate(path: path, length: length))
    }

    /// The size of an open file in bytes. The corresponding C function is `fstat`.
    static func fileSize(_ fd: Int32) throws(Errno) -> Int {
        var st = stat()
        guard Glibc.fstat(fd, &st) == 0 else { throw Errno(errno) }
        return Int(st.st_size)
    }

    /// `stat` of a path, or nil when it does not exist.
    static func status(_ path: String) throws(Errno) -> stat? {
        var st = stat()
        if fstatat(AT_FDCWD, path, &st, 0) == 0 { return st }
        if errno == ENOENT { return nil }
        throw Errno(errno)
    }

    /// ``status(_:)`` of the path itself when it is a symbolic link (nil if nothing is there).
    /// The corresponding C function is `lstat`.
    static func linkStatus(_ path: String) throws(Errno) -> stat? {
        var st = stat()
        if fstatat(AT_FDCWD, path, &st, AT_SYMLINK_NOFOLLOW) == 0 { return st }
        if errno == ENOENT { return nil }
        throw Errno(errno)
    }

    /// Whether a process numbered `pid` exists (it may be another user's). The corresponding C
    /// function is `kill`, with signal 0.
    static func processExists(_ pid: Int32) -> Bool {
        Glibc.kill(pid, 0) == 0 || errno == EPERM
    }

    /// The absolute path of `path` with every symbolic link, `.` and `..` resolved. The
    /// corresponding C function is `realpath`.
    static func realPath(_ path: String) throws(Errno) -> String {
        guard let resolved = Glibc.realpath(path, nil) else { throw Errno(errno) }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// Atomically replaces `to` with `from`. The corresponding C function is `rename`.
    func rename(_ from: String, _ to: String) throws(Errno) {
        try faults?.check(.rename, path: to)
        guard Glibc.rename(from, to) == 0 else { throw Errno(errno) }
        faults?.recorder?.record(.rename(from: from, to: to))
    }

    /// Removes a file; a missing file is not an error. The corresponding C function is `unlink`.
    func unlink(_ path: String) throws(Errno) {
        try faults?.check(.unlink, path: path)
        guard Glibc.unlink(path) == 0 || errno == ENOENT else { throw Errno(errno) }
        faults?.recorder?.record(.unlink(path: path))
    }

    /// Creates a directory; an existing one is not an error. Returns whether it was created here.
    /// The corresponding C function is `mkdir`.
    @discardableResult
    func mkdir(_ path: String, mode: mode_t = 0o700) throws(Errno) -> Bool {
        try faults?.check(.mkdir, path: path)
        if Glibc.mkdir(path, mode) == 0 {
            faults?.recorder?.record(.mkdir(path: path))
            return true
        }
        guard errno == EEXIST else { throw Errno(errno) }
        return false
    }

    /// Removes an empty directory; one with anything in it stays (ENOTEMPTY). Not recorded by a
    /// ``FileOperationRecorder``: only a namespace creation that failed removes a directory. The
    /// corresponding C function is `rmdir`; an injector fails it as an ``FaultInjector/Operation/unlink``.
    func removeDirectory(_ path: String) throws(Errno) {
        try faults?.check(.unlink, path: path)
        while Glibc.rmdir(path) != 0 {
            if errno != EINTR { throw Errno(errno) }
        }
    }

    /// The names in a directory, without "." and "..".
    func listDirectory(_ path: String) throws(Errno) -> [String] {
        try faults?.check(.read, path: path)
        guard let dir = opendir(path) else { throw Errno(errno) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    // Glibc's `struct flock` hides the function of the same name from Swift; look it up by symbol.
    private static let flockFunction: @convention(c) (Int32, Int32) -> Int32 = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "flock") else { fatalError("flock(2) not found in libc") }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }()

    /// Takes an exclusive advisory lock without waiting. The corresponding C function is `flock`.
    static func lockExclusive(_ fd: Int32) throws(Errno) {
        while flockFunction(fd, LOCK_EX | LOCK_NB) != 0 {
            if errno != EINTR { throw Errno(errno) }
        }
    }
}

extension SystemCalls {
    /// Replaces the small file `path` in `directory` with `text`, durably: a temporary file
    /// written and fsync'd, renamed over it, and the directory fsync'd (the sequence floor, a
    /// rename's journal). On an error the temporary file is removed.
    func replaceDurably(_ path: String, with text: String, directory: String) throws(Errno) {
        let temporary = path + ".tmp"
        do throws(Errno) {
            let fd = try open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            defer { SystemCalls.close(fd) }
            try Array(text.utf8).withBytes { (raw) throws(Errno) in try pwriteAll(fd, raw, at: 0, path: temporary) }
            try fsync(fd, path: temporary)
            try rename(temporary, path)
            try fsyncDirectory(directory)
        } catch {
            try? unlink(temporary)
            throw error
        }
    }
}
