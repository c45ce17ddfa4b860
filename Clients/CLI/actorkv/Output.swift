// Standard output, buffered, and the errors written to standard error.
import Glibc

/// Writes all of `bytes` to `fd`, retrying on EINTR and short writes. Returns 0, or the errno of
/// the write that failed.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n > 0 { offset += n; continue }
        if n < 0 && errno == EINTR { continue }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
            // A non-blocking descriptor inherited from the parent: wait until the reader drains it.
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&entry, 1, -1)
            continue
        }
        return n < 0 ? errno : EIO
    }
    return 0
}

/// Buffered standard output: flushed when it grows past 64 KiB and at exit. A failed write
/// throws (exit 3, "cannot write standard output: ..."); what is written after it is dropped.
final class Output {
    private var buffer: [UInt8] = []
    private var failed = false

    func write(_ bytes: [UInt8]) throws(Failure) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= 64 * 1024 { try flush() }
    }

    func write(_ text: String) throws(Failure) { try write(Array(text.utf8)) }

    func line(_ text: String) throws(Failure) { try write(Array(text.utf8) + [0x0A]) }

    func flush() throws(Failure) {
        defer { buffer.removeAll(keepingCapacity: true) }
        guard !failed else { return }
        let code = writeAll(1, buffer)
        guard code == 0 else {
            failed = true
            throw Failure(code: Exit.output, message: "actorkv: cannot write standard output: \(errnoText(code))")
        }
    }
}

/// The text of an errno value, e.g. "No space left on device".
func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }

/// If descriptor 0, 1 or 2 was closed when the program started (`actorkv ping >&-`), fills it
/// with /dev/null opened the wrong way round, so that the socket cannot become standard output
/// and using it still fails (EBADF) as it would have.
func reserveStandardDescriptors() {
    for fd in Int32(0)...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
        let opened = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY)
        if opened >= 0 && opened != fd { _ = close(opened) }
    }
}

/// Writes `text` on standard error, ending it with a newline if it has none.
func printError(_ text: String) {
    _ = writeAll(2, Array((text.hasSuffix("\n") ? text : text + "\n").utf8))
}

/// For a command that prints until it is stopped (`changes`): once whoever reads standard output
/// has gone away (`actorkv changes ns key | head -n 1` after its line), ends the process by
/// SIGPIPE, as its next write would have ended it, without waiting for that write (a next
/// change that may never come), as GNU `tail -f` does. Standard output that is not a pipe or a
/// socket (a file, a terminal until it hangs up) never ends it.
func endWhenOutputReaderLeaves() {
    var thread = pthread_t()
    let started = pthread_create(&thread, nil, { _ in
        // Events 0: poll reports only POLLERR (a pipe whose reader closed), POLLHUP (a socket
        // shut down, a terminal hung up) and POLLNVAL.
        var entry = pollfd(fd: 1, events: 0, revents: 0)
        while poll(&entry, 1, -1) < 0 && errno == EINTR {}
        guard entry.revents & Int16(POLLERR | POLLHUP) != 0 else { return nil }
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        signal(SIGPIPE, SIG_DFL)
        pthread_sigmask(SIG_UNBLOCK, &pipeSignal, nil)
        raise(SIGPIPE)
        return nil
    }, nil)
    if started == 0 { pthread_detach(thread) }
}
