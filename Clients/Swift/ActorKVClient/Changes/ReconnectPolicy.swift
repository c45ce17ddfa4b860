/// How a change stream reconnects after its connection breaks (the server restarted or was
/// killed, dropped the stream with `-LAGGING`, a read failed).
///
/// The first reconnection is tried after `initialDelay`; each failed attempt doubles the delay,
/// up to `maximumDelay`. A connection that got as far as the server's answer to `CHANGES`
/// resets the delay. After `giveUpAfter` of failed attempts in a row, the stream ends with the
/// last attempt's error; nil tries for ever.
///
/// A first connection that cannot be made (no server, or no answer to `CHANGES` within the
/// client's timeout) ends the stream at once with its error, so that a wrong path or a hung
/// server is reported rather than waited out, unless `retriesFirstConnection` is set.
public struct ReconnectPolicy: Sendable, Equatable, Hashable {
    /// The wait before the first attempt to reconnect.
    public var initialDelay: Duration
    /// The longest wait between two attempts.
    public var maximumDelay: Duration
    /// How long to go on trying; nil: for ever.
    public var giveUpAfter: Duration?
    /// Whether a first connection that cannot be made is retried as a broken one is (within
    /// `giveUpAfter`) instead of ending the stream. A lock's waiter sets it: the server has just
    /// answered its attempt, so a slow answer to `CHANGES` is load to wait out, not a wrong path.
    public var retriesFirstConnection: Bool

    /// A policy with the given delays (see the type's description).
    public init(initialDelay: Duration = .milliseconds(50), maximumDelay: Duration = .seconds(2),
                giveUpAfter: Duration? = nil, retriesFirstConnection: Bool = false) {
        self.initialDelay = max(initialDelay, .zero)
        self.maximumDelay = max(maximumDelay, self.initialDelay)
        self.giveUpAfter = giveUpAfter
        self.retriesFirstConnection = retriesFirstConnection
    }

    /// 50 ms doubling up to 2 s, for ever.
    public static let `default` = ReconnectPolicy()
}
