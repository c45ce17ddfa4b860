/// Where one follower (CHANGES) reads a namespace's changes, in sequence order: the local
/// engine's ``ChangeFeed`` (one per namespace, shared by its followers) or, in cluster mode, the
/// follower's own etcd watch. The server's follower asks it for the changes after its cursor
/// and is told when there are more through the back end's ``ChangeListener``.
public protocol ChangeSource: AnyObject, Sendable {
    /// The namespace whose changes it holds.
    var namespace: String { get }
    /// The deliverable changes after `cursor`, at most `limit` of them, or why there are none.
    func read(after cursor: UInt64, limit: Int) -> ChangeFeed.Read
    /// Whether a follower at `cursor` has fallen further behind than the source holds for it
    /// (it is dropped with `-LAGGING`, to resume from its cursor).
    func hasTrimmed(after cursor: UInt64) -> Bool
    /// The follower is gone (its connection ended or was dropped).
    func removeFollower()
    /// Counts `count` messages sent to the follower (INFO).
    func countSent(_ count: Int)
    /// Counts a follower dropped for lagging (INFO).
    func countDropped()
}
