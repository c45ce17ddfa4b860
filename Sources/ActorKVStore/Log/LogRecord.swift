/// One entry of the append-only log: every mutation of one write, applied all-or-nothing.
///
/// A put is one mutation, a multi-key delete several, a batch any mix. Because a batch is one
/// record with one checksum, a crash can never leave part of it applied.
public struct LogRecord: Sendable, Equatable {
    /// The namespace's sequence number of this write; consecutive records increase by exactly one.
    public var sequence: UInt64
    /// The changes, in order.
    public var mutations: [Mutation]
    /// The highest sequence number that was on stable storage (fsync'd) before this record was
    /// written; 0 for no claim. Recovery uses it to tell writes that were never fsync'd, which a
    /// power loss may leave out of order, from damage to records known durable. Always below
    /// `sequence`; a claim more than 2³² − 1 behind it is not recorded (0).
    public var durableThrough: UInt64

    /// Creates a record.
    public init(sequence: UInt64, mutations: [Mutation], durableThrough: UInt64 = 0) {
        precondition(durableThrough < sequence || durableThrough == 0, "a record cannot be durable before it is written")
        self.sequence = sequence
        self.mutations = mutations
        self.durableThrough = durableThrough
    }
}
