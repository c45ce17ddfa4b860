/// The ID of a lease an agent grants, which says what the lease is for, so that every agent
/// reading a key's lease knows it without asking anyone: whether the key belongs to a
/// connection (EPHEMERAL) and the second its deadline falls in (PX/EX). The agent asks etcd for
/// the ID (etcd takes a requested ID, and refuses one already in use: the agent then draws again).
///
/// Layout of the positive 63 bits: bits 0-3 the kind, bits 4-11 the tag `0xAC`, bits 12-27
/// random, bits 28-62 the deadline's second since the epoch (random too for a lease without
/// deadline). An ID without the tag (a lease etcd numbered itself, as older agents asked for)
/// decodes to nil.
struct EtcdLeaseID: Equatable {
    /// What the lease's keys are.
    enum Kind: Int64 {
        /// Keys of a connection (EPHEMERAL), without deadline: renewed while it lives.
        case owner = 1
        /// Keys of a connection with a deadline (EPHEMERAL and PX/EX): renewed while it lives,
        /// until its deadline.
        case ownerUntilDeadline = 2
        /// Keys with a deadline (PX/EX): never renewed, it runs out at the deadline.
        case deadline = 3
    }

    /// What the lease is for.
    let kind: Kind
    /// The second since the epoch its keys expire at (the end of the second their deadlines fall
    /// in); nil for ``Kind/owner``.
    let deadlineSecond: Int64?
    /// The ID etcd knows the lease by.
    let id: Int64

    private static let tag: Int64 = 0xAC
    private static let secondBits: Int64 = 35

    /// A new ID of `kind`, with `random` bits (a fresh draw for each attempt to grant it).
    init(kind: Kind, deadlineSecond: Int64?, random: UInt64) {
        precondition((kind == .owner) == (deadlineSecond == nil), "only an owner lease has no deadline")
        let secondField = deadlineSecond ?? Int64(truncatingIfNeeded: random >> 16)
        let high = secondField & ((1 << Self.secondBits) - 1)
        self.kind = kind
        self.deadlineSecond = deadlineSecond
        self.id = high << 28 | Int64(truncatingIfNeeded: random & 0xFFFF) << 12 | Self.tag << 4 | kind.rawValue
    }

    /// Decodes an agent's lease ID; nil for 0, or an ID no agent of this version chose.
    init?(_ id: Int64) {
        guard id > 0, (id >> 4) & 0xFF == Self.tag, let kind = Kind(rawValue: id & 0xF) else { return nil }
        self.kind = kind
        self.deadlineSecond = kind == .owner ? nil : id >> 28
        self.id = id
    }

    /// Whether the lease's keys belong to a connection (they go when it ends).
    var isOwned: Bool { kind != .deadline }
}
