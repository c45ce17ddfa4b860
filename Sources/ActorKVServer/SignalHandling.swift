#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Turns SIGTERM and SIGINT into a wake-up of the event loop (the handler only stores the signal
/// number and writes to an eventfd, both async-signal-safe) and ignores SIGPIPE.
enum SignalHandling {
    /// The signal that asked for shutdown, 0 if none.
    static let received = Atomic<Int32>(0)
    nonisolated(unsafe) private static var wakeFD: Int32 = -1

    /// Installs the handlers; `wakeFD` is written when a shutdown signal arrives.
    static func install(wakeFD fd: Int32) {
        _ = received.load(ordering: .relaxed)
        wakeFD = fd
        signal(SIGPIPE, SIG_IGN)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { number in
            SignalHandling.received.store(number, ordering: .relaxed)
            var one: UInt64 = 1
            _ = write(SignalHandling.wakeFD, &one, 8)
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        sigaction(SIGTERM, &action, nil)
        sigaction(SIGINT, &action, nil)
    }
}
