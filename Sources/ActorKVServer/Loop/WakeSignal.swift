#if canImport(Glibc)
import Glibc
#endif
import CActorKVSys

/// The eventfd that wakes the event loop: written by the loop's executor, by replies posted from
/// other threads, by a stop request and by the SIGTERM/SIGINT handler.
///
/// The descriptor is closed only when the last reference goes. Writers hold a reference (the
/// executor's wake closure, ``SignalHandling`` for as long as its handler may run), so a late
/// write — a reply finishing after the shutdown grace, a second signal during shutdown — lands
/// in this eventfd and never in a descriptor number the process has since reused for a data file.
final class WakeSignal: Sendable {
    /// The eventfd.
    let fd: Int32

    /// Creates the eventfd (non-blocking, close-on-exec).
    init() throws(SocketCalls.Failure) {
        let fd = actorkv_eventfd()
        guard fd >= 0 else { throw SocketCalls.Failure(what: "eventfd", code: errno) }
        self.fd = fd
    }

    /// Wakes the loop. Async-signal-safe when called as `write` on ``fd`` directly.
    func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(fd, &one, 8)
    }

    /// Consumes pending wake-ups (the loop calls this when epoll reports the eventfd readable).
    func drain() {
        var counter: UInt64 = 0
        _ = Glibc.read(fd, &counter, 8)
    }

    deinit { SocketCalls.close(fd) }
}
