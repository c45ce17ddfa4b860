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
    /// Keeps the handler's eventfd open for as long as the handler may write to it: a signal can
    /// come at any time, also after the event loop has stopped (a second SIGTERM during shutdown).
    nonisolated(unsafe) private static var installed: WakeSignal?

    /// Installs the handlers; `wake` is signalled when a shutdown signal arrives. Call before any
    /// slow startup step, so that a signal during recovery is not lost: the caller checks
    /// ``received`` afterwards.
    static func install(wake: WakeSignal) {
        _ = received.load(ordering: .relaxed)
        let previous = installed
        installed = wake
        wakeFD = wake.fd
        withExtendedLifetime(previous) {}
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
