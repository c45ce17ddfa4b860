// `actorkv lock`: runs a command holding a lock, as flock(1) does with a file.
import ActorKVClient
import Foundation
import Glibc

/// The options of `lock` and where its arguments start.
struct LockOptions {
    /// How long to wait for the lock: nil for ever (the default), zero for one attempt.
    var timeout: Duration?
    /// The lock's time to live, if any.
    var ttl: Duration?
}

/// Removes `lock`'s options (`--timeout SECS`, `--ttl SECS`, also as `--option=SECS`), which
/// come before NS; a `--` ends them.
func takeLockOptions(from arguments: ArraySlice<[UInt8]>) throws(Failure) -> (LockOptions, ArraySlice<[UInt8]>) {
    var options = LockOptions()
    var seen: Set<String> = []
    var rest = arguments
    var ended = false
    while let first = rest.first, first.starts(with: Array("--".utf8)) {
        rest.removeFirst()
        let word = text(first)
        if word == "--" { ended = true; break }
        let name: String, value: String
        if let eq = word.firstIndex(of: "=") {
            name = String(word[..<eq])
            value = String(word[word.index(after: eq)...])
        } else {
            name = word
            guard name == "--timeout" || name == "--ttl" else {
                throw usageFailure("lock: unknown option '\(word)' (expected --timeout SECS or --ttl SECS)")
            }
            guard let next = rest.popFirst() else { throw usageFailure("lock: \(name) needs a number of seconds") }
            value = text(next)
        }
        guard seen.insert(name).inserted else { throw usageFailure("lock: \(name) given twice") }
        switch name {
        case "--timeout": options.timeout = try parseSeconds(value, "lock: --timeout", positive: false)
        case "--ttl": options.ttl = try parseSeconds(value, "lock: --ttl", positive: true)
        default: throw usageFailure("lock: unknown option '\(word)' (expected --timeout SECS or --ttl SECS)")
        }
    }
    // flock(1)'s -w SECS and -n would otherwise be taken for NS (and its value for KEY).
    if !ended, let first = rest.first { try refuseShortOption(first) }
    return (options, rest)
}

extension CommandRunner {
    /// `lock NS KEY [--] COMMAND [ARG...]`: waits for the lock (up to `--timeout`), runs COMMAND
    /// holding it, releases it; COMMAND's status, or the failure that kept it from running or
    /// lost the lock.
    func lock() async throws -> Int32 {
        let form = "lock [--timeout SECS] [--ttl SECS] NS KEY [--] COMMAND [ARG...]"
        try need(3...Self.many, form)
        var commandLine = Array(args[2...])
        if commandLine.first == Array("--".utf8) { commandLine.removeFirst() }
        guard !commandLine.isEmpty, !commandLine[0].isEmpty else { throw usageFailure("usage: actorkv \(form)") }
        let held = try await acquire()
        let descriptor = held.inheritableDescriptor()
        let connection = descriptor < 0 ? nil : socketInode(descriptor)
        let outcome = await run(commandLine, holding: held, descriptor: descriptor)
        if case .success(let commandStatus) = outcome, socketOpenElsewhere(inode: connection) != false {
            return try await leaveHeld(held, commandStatus: commandStatus)
        }
        try await release(held, after: outcome)
        return try outcome.get()
    }

    /// Waits for the lock; a timeout fails with exit 7, naming the holder when it can be read.
    private func acquire() async throws -> HeldLock {
        do throws(ActorKVError) {
            let options = invocation.lockOptions
            return try await client.acquireLock(namespace, args[1], timeout: options.timeout, ttl: options.ttl)
        } catch {
            guard case .lockTimedOut = error else { throw error }
            var message = "actorkv: \(error)"
            if let owner = try? await client.get(namespace, args[1]) { message += " (held by \(text(owner)))" }
            throw Failure(code: Exit.lockTimedOut, message: message)
        }
    }

    /// Runs `commandLine` with the lock's connection (`descriptor`, a copy of it; -1 if none
    /// could be made) passed on: its status, or why it did not run.
    private func run(_ commandLine: [[UInt8]], holding held: HeldLock, descriptor: Int32) async -> Result<Int32, Failure> {
        guard descriptor >= 0 else {
            return .failure(Failure(code: Exit.commandNotRunnable,
                                    message: "actorkv: lock: cannot pass the lock's connection on: \(errnoText(errno))"))
        }
        do throws(Failure) {
            return .success(try await runCommand(commandLine, token: held.token, descriptor: descriptor, signalMask: signalMask))
        } catch {
            return .failure(error)
        }
    }

    /// A process that COMMAND started (a daemon) still has the lock's connection open: it keeps
    /// the lock, as it would keep flock(1)'s. Releasing would delete the key, for every process
    /// that has the connection (as flock -u); so actorkv only checks that the lock is still held
    /// and exits with COMMAND's status, closing its own copy: the server releases the lock when
    /// the last copy is closed. (Lost or not, the connection is the daemon's too: it is not
    /// shut down.)
    private func leaveHeld(_ held: HeldLock, commandStatus: Int32) async throws(Failure) -> Int32 {
        keepUntilExit(held)
        if let reason = try await lockLostReason(held, checkingWith: client) {
            let lost = ActorKVError.lockLost(namespace: held.namespace, key: held.key, token: held.token, reason: reason)
            throw Failure(code: Exit.connection, message: "actorkv: \(lost) (the command exited with status \(commandStatus))")
        }
        return commandStatus
    }

    /// Releases the lock after COMMAND's `outcome`: a lock found lost after COMMAND ran fails
    /// with exit 4; another failure to release is reported, the connection's close having
    /// released the lock.
    private func release(_ held: HeldLock, after outcome: Result<Int32, Failure>) async throws(Failure) {
        do throws(ActorKVError) {
            try await held.release()
        } catch {
            if case .lockLost = error, case .success(let commandStatus) = outcome {
                throw Failure(code: Exit.connection, message: "actorkv: \(error) (the command exited with status \(commandStatus))")
            }
            if case .success = outcome {
                printError("actorkv: lock: releasing the lock: \(error) (closing its connection released it)")
            }
        }
    }
}

/// The signal mask the program started with, for the command (threads of this process may
/// block signals the command should not find blocked).
func currentSignalMask() -> sigset_t {
    var mask = sigset_t()
    sigemptyset(&mask)
    pthread_sigmask(SIG_SETMASK, nil, &mask)
    return mask
}

/// Where posix_spawnp finds `name`, for running it with /bin/sh: `name` itself if it has a
/// slash, else the first DIR/`name` of $PATH (an empty DIR is the current directory; without
/// PATH, /bin:/usr/bin as glibc's) that is a regular file this process may execute.
func executablePath(_ name: [UInt8]) -> [UInt8]? {
    let slash = UInt8(ascii: "/")
    if name.contains(slash) { return name }
    let path = getenv("PATH").map { Array(UnsafeBufferPointer(start: $0, count: strlen($0))).map { UInt8(bitPattern: $0) } }
        ?? Array("/bin:/usr/bin".utf8)
    for directory in path.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false) {
        let candidate = directory.isEmpty ? name : Array(directory) + [slash] + name
        let found = candidate.withUnsafeBufferPointer { bytes -> Bool in
            var cPath = bytes.map { CChar(bitPattern: $0) }
            cPath.append(0)
            var info = stat()
            return stat(cPath, &info) == 0 && (info.st_mode & S_IFMT) == S_IFREG && access(cPath, X_OK) == 0
        }
        if found { return candidate }
    }
    return nil
}

/// Runs `command` (`command[0]` looked up in PATH; a file that is neither a binary nor a `#!`
/// script is run with /bin/sh, as execvp(3) runs it) with ACTORKV_LOCK_TOKEN=`token` added to the
/// environment and `descriptor` (the lock's connection) inherited, and waits for it to end.
/// Closes `descriptor` here once the command is started. Returns the command's exit status, or
/// 128 + the number of the signal that killed it. Throws exit 127 (not found) or 126 (cannot
/// be run) when the command cannot be started.
func runCommand(_ command: [[UInt8]], token: UInt64, descriptor: Int32, signalMask: sigset_t) async throws(Failure) -> Int32 {
    let started = spawn(command, environment: environmentWithToken(token), signalMask: signalMask)
    _ = close(descriptor)
    switch started {
    case .failure(let code):
        throw Failure(code: code.rawValue == ENOENT ? Exit.commandNotFound : Exit.commandNotRunnable,
                      message: "actorkv: lock: cannot run '\(text(command[0]))': \(errnoText(code.rawValue))")
    case .success(let pid):
        let status = await waitForExit(pid)
        let signal = status & 0x7f
        return signal == 0 ? (status >> 8) & 0xff : 128 + signal
    }
}

/// An errno value, as a spawn's failure.
struct SpawnFailure: Error {
    let rawValue: Int32
}

/// This process's environment as `NAME=VALUE` lines, with ACTORKV_LOCK_TOKEN=`token` instead of
/// any it had.
private func environmentWithToken(_ token: UInt64) -> [[UInt8]] {
    let tokenVariable = Array("ACTORKV_LOCK_TOKEN=".utf8)
    var environment: [[UInt8]] = []
    var entry = environ
    while let pointer = entry.pointee {
        let bytes = Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map { UInt8(bitPattern: $0) }
        if !bytes.starts(with: tokenVariable) { environment.append(bytes) }
        entry += 1
    }
    environment.append(tokenVariable + Array(String(token).utf8))
    return environment
}

/// Starts `command` with `environment` and `signalMask` (posix_spawnp; a file that is neither a
/// binary nor a `#!` script again through /bin/sh): its pid, or the errno of the failure.
private func spawn(_ command: [[UInt8]], environment: [[UInt8]], signalMask: sigset_t) -> Result<pid_t, SpawnFailure> {
    func cString(_ bytes: [UInt8]) -> UnsafeMutablePointer<CChar> {
        let pointer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count + 1)
        for (i, byte) in bytes.enumerated() { pointer[i] = CChar(bitPattern: byte) }
        pointer[bytes.count] = 0
        return pointer
    }
    let argv: [UnsafeMutablePointer<CChar>?] = command.map(cString) + [nil]
    defer { for pointer in argv { pointer?.deallocate() } }
    let envp: [UnsafeMutablePointer<CChar>?] = environment.map(cString) + [nil]
    defer { for pointer in envp { pointer?.deallocate() } }

    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var mask = signalMask
    posix_spawnattr_setsigmask(&attributes, &mask)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK))

    var pid: pid_t = 0
    var rc = posix_spawnp(&pid, argv[0]!, nil, &attributes, argv, envp)
    if rc == ENOEXEC, let path = executablePath(command[0]) {
        // Neither a binary nor a script with #!: run it with /bin/sh, as execvp(3) does (and so
        // flock(1), env, nohup, a shell), which glibc's posix_spawnp no longer does. As execvp
        // does it: /bin/sh PATH ARG..., PATH being where COMMAND was found.
        let shell = cString(Array("/bin/sh".utf8)), script = cString(path)
        defer { shell.deallocate(); script.deallocate() }
        let shellArgv: [UnsafeMutablePointer<CChar>?] = [shell, script] + argv.dropFirst()
        rc = posix_spawn(&pid, shell, nil, &attributes, shellArgv, envp)
    }
    return rc == 0 ? .success(pid) : .failure(SpawnFailure(rawValue: rc))
}

/// Waits, on a thread of its own, for the child `pid` to end; its raw wait status.
private func waitForExit(_ pid: pid_t) async -> Int32 {
    await withCheckedContinuation { (continuation: CheckedContinuation<Int32, Never>) in
        let thread = Thread {
            var raw: Int32 = 0
            while waitpid(pid, &raw, 0) < 0 && errno == EINTR {}
            continuation.resume(returning: raw)
        }
        thread.name = "actorkv-lock-wait"
        thread.start()
    }
}

// MARK: A lock kept by a process that COMMAND started

/// The inode number of the socket open on `descriptor`, or nil if it is not a socket.
func socketInode(_ descriptor: Int32) -> UInt64? {
    var info = stat()
    guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
    return UInt64(info.st_ino)
}

/// Whether a process other than this one has the socket `inode` open, as /proc shows it (as
/// fuser(1) and lsof(8) find it): true once a descriptor of another process is that socket,
/// false when none is. Only the processes this one may inspect are seen: those of its user (not
/// one made undumpable, as a setuid program is), every process for root. Nil when it cannot
/// tell: no inode, or no /proc.
///
/// The processes are read in /proc's order, by increasing pid, so a holder that passes the
/// socket on to a new child and exits while they are read is still seen: the child, created
/// before the parent exits, comes later in the order (unless pids wrapped around).
func socketOpenElsewhere(inode: UInt64?) -> Bool? {
    guard let inode, let processes = opendir("/proc") else { return nil }
    defer { closedir(processes) }
    let target = Array("socket:[\(inode)]".utf8).map { CChar(bitPattern: $0) }
    let me = getpid()
    var link = [CChar](repeating: 0, count: target.count + 1)
    while let process = readdir(processes) {
        guard let pid = Int32(entryName(process)), pid != me,
              let descriptors = opendir("/proc/\(pid)/fd") else { continue }  // not a process, or not ours to see
        defer { closedir(descriptors) }
        while let descriptor = readdir(descriptors) {
            let n = readlinkat(dirfd(descriptors), entryName(descriptor), &link, link.count)
            if n == target.count && link.prefix(n).elementsEqual(target) { return true }
        }
    }
    return false
}

/// The name of a directory entry.
private func entryName(_ entry: UnsafeMutablePointer<dirent>) -> String {
    withUnsafePointer(to: &entry.pointee.d_name) { name in
        name.withMemoryRebound(to: CChar.self, capacity: MemoryLayout.size(ofValue: name.pointee)) { String(cString: $0) }
    }
}

/// Why `held` is no longer held, or nil if it is: the server has closed the lock's connection,
/// or the lock's key no longer has the lock's token (it expired after the lock's ttl, or was
/// deleted or overwritten), as `client` reads it on a connection of its own. What
/// ``HeldLock/release()`` finds, without releasing. Throws the error of that read, with the
/// command's status in its message.
func lockLostReason(_ held: HeldLock, checkingWith client: ActorKVClient) async throws(Failure) -> String? {
    let copy = held.inheritableDescriptor()
    if copy >= 0 {
        defer { _ = close(copy) }
        // POLLRDHUP (Linux's 0x2000, which Glibc's module lacks): the server shut its end down
        // or closed it; POLLHUP: both directions are shut.
        let peerClosed: Int16 = 0x2000
        var entry = pollfd(fd: copy, events: peerClosed, revents: 0)
        if poll(&entry, 1, 0) == 1 && entry.revents & (peerClosed | Int16(POLLHUP | POLLERR)) != 0 {
            return "the connection holding it broke, and the server released the lock"
        }
    }
    let found: VersionedValue?
    do throws(ActorKVError) {
        found = try await client.getVersioned(held.namespace, held.key)
    } catch {
        throw Failure(code: Exit.connection, message: "actorkv: lock: cannot tell whether the lock is still held: \(error)")
    }
    guard found?.version == held.token else {
        return "the key no longer had this lock's version: it expired (the lock's ttl) or was deleted or overwritten by someone else"
    }
    return nil
}

/// Keeps `held` (and with it the lock's connection) as it is until this process exits, not
/// released: the kernel closes this process's copy of the connection at exit. (Its deinit would
/// close only that copy too, the descriptor having been handed out, but after a round trip.)
func keepUntilExit(_ held: HeldLock) {
    _ = Unmanaged.passRetained(held)
}
