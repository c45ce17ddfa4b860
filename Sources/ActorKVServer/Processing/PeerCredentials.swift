import ActorKVProtocol
import ActorKVStore
import Synchronization

/// A peer's identity as the kernel reports it for a Unix socket (`SO_PEERCRED`): the process
/// that connected, as it was when it connected.
public struct PeerCredentials: Sendable, Equatable {
    /// Its user id.
    public let uid: UInt32
    /// Its primary group id.
    public let gid: UInt32
    /// Its process id.
    public let pid: Int32
    /// Its supplementary groups (`SO_PEERGROUPS`; empty if the kernel could not say).
    public let groups: [UInt32]

    /// Credentials of these ids.
    public init(uid: UInt32, gid: UInt32, pid: Int32, groups: [UInt32] = []) {
        self.uid = uid
        self.gid = gid
        self.pid = pid
        self.groups = groups
    }

    /// The ids that namespace permissions go by.
    var identity: PeerIdentity { PeerIdentity(uid: uid, gid: gid, groups: groups) }
}
