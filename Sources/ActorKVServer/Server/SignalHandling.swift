#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Turns SIGTERM and SIGINT (shutdown) and SIGHUP (reload the `--acl` file) into a wake-up of
/// the event loop (the handlers only store to an atomic and write to an eventfd, both
/// async-signal-safe) and ignores SIGPIPE.
enum SignalHandling {
    /// The signal that asked for shutdown, 0 if none.
    static let received = Atomic<Int32>(0)
    /// A SIGHUP came and its reload has not been done yet.
    private static let reloadRequested = Atomic<Bool>(false)
    nonisolated(unsafe) private static var wakeFD: Int32 = -1
    /// Keeps the handler's eventfd open for as long as the handler may write to it: a signal can
    /// come at any time, also after the event loop has stopped (a second SIGTERM during shutdown).
    nonisolated(unsafe) private static var installed: WakeSignal?

    /// Installs the handlers; `wake` is signalled when a shutdown signal or SIGHUP arrives. Call before any
    /// slow startup step, so that a signal during recovery is not lost: the caller checks
    /// ``received`` afterwards.
    static func install(wake: WakeSignal) {
        _ = received.load(ordering: .relaxed)
        let previous = installed
        installed = wake
        wakeFD = wake.fd
        withExtendedLifetime(previous) {}
        signal(SIGPIPE, SIG_IGN)
        handle([SIGTERM, SIGINT]) { number in
            SignalHandling.received.store(number, ordering: .relaxed)
            SignalHandling.wakeLoop()
        }
        handle([SIGHUP]) { _ in
            SignalHandling.reloadRequested.store(true, ordering: .relaxed)
            SignalHandling.wakeLoop()
        }
    }

    /// Installs `handler` (async-signal-safe code only) for `signals`.
    private static func handle(_ signals: [Int32], _ handler: @convention(c) (Int32) -> Void) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = handler
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0
        for number in signals { sigaction(number, &action, nil) }
    }

    /// Wakes the event loop (from a signal handler: one write to its eventfd).
    private static func wakeLoop() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Whether a SIGHUP came since the last call (the event loop reloads the `--acl` file then).
    static func takeReloadRequest() -> Bool {
        reloadRequested.exchange(false, ordering: .relaxed)
    }
}
