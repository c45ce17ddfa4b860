import ActorKVProtocol

/// How one turn of the event loop shares its time among the connections that follow change
/// feeds, and the order in which those put off are served: a policy, no I/O (the loop does the
/// sending, see `EventLoopFollowers.swift`).
///
/// A turn serves followers until it has given them ``bytesPerTurn`` bytes or served
/// ``connectionsPerTurn`` connections, whichever comes first; a connection it cannot serve is put
/// off (``putOff(_:)``) and served in a later turn before any other, in the order they were put
/// off (``nextPutOff()``); one that falls behind by more than its feed holds is dropped with
/// `-LAGGING` meanwhile. The byte budget keeps a flood of large changes from crowding out the
/// requests. The connection budget does the same for many watchers of small changes: each
/// connection served costs a system call (a send) whatever it sends, so a turn that gave a
/// thousand watchers one change each would hold up every request for a thousand sends. Under
/// a stream of changes faster than one turn can send to every watcher, a watcher put off is
/// served a few turns later with every change it missed in one send: the sends per change
/// delivered fall as the load rises, while at a load that lets every watcher be served as its
/// changes come, nothing is put off and nothing waits.
struct FollowerTurns {
    /// About how many bytes of changes all followers together are given per turn: a turn busy
    /// with writers gives them this much of its time, so that watchers that cannot keep up with
    /// a flood fall behind (and are dropped with `-LAGGING`, to resume from history) rather than
    /// slow the writers down.
    static let bytesPerTurn = 128 * 1024
    /// How many following connections that are sent something are served per turn at most.
    static let connectionsPerTurn = 16

    /// What is left of this turn's byte budget.
    private(set) var bytesLeft: Int
    /// How many more connections this turn may serve.
    private(set) var connectionsLeft: Int
    private let bytesPerTurn: Int
    private let connectionsPerTurn: Int
    /// The connections put off, in order.
    private var queue = FIFO<UInt64>()

    /// A policy with the given budgets per turn (the defaults: ``bytesPerTurn``,
    /// ``connectionsPerTurn``); the first turn starts with ``startTurn()``.
    init(bytesPerTurn: Int = Self.bytesPerTurn, connectionsPerTurn: Int = Self.connectionsPerTurn) {
        precondition(bytesPerTurn > 0 && connectionsPerTurn > 0, "FollowerTurns: budgets must be positive")
        self.bytesPerTurn = bytesPerTurn
        self.connectionsPerTurn = connectionsPerTurn
        bytesLeft = 0
        connectionsLeft = 0
    }

    /// Starts a turn: the budgets are renewed.
    mutating func startTurn() {
        bytesLeft = bytesPerTurn
        connectionsLeft = connectionsPerTurn
    }

    /// Whether this turn's budget is spent: no more followers are served in it.
    var isSpent: Bool { bytesLeft <= 0 || connectionsLeft <= 0 }

    /// Whether any connection is waiting for its turn (the loop must then not sleep).
    var hasPutOff: Bool { !queue.isEmpty }

    /// Counts a connection served: `bytes` of changes given to it; one that was given nothing
    /// (its changes were outside its prefix, or its socket had no room) costs no connection.
    mutating func charge(bytes: Int) {
        guard bytes > 0 else { return }
        bytesLeft -= bytes
        connectionsLeft -= 1
    }

    /// Puts a connection off to a later turn, after those put off before it. The caller puts
    /// each connection off once until ``nextPutOff()`` gives it back.
    mutating func putOff(_ id: UInt64) {
        queue.append(id)
    }

    /// The connection put off longest ago, taken from the queue, if the budget is not spent.
    mutating func nextPutOff() -> UInt64? {
        isSpent ? nil : queue.popFirst()
    }
}
