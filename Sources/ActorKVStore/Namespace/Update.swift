/// A read-modify-write: computes a key's new state from its current value (nil: absent). It runs
/// on the namespace's actor, so nothing can write the key between the read and the write; it must
/// be quick and must not block.
public struct Update: Sendable {
    /// The computation, given the current value.
    public let compute: @Sendable (_ current: [UInt8]?) -> UpdateResult
    /// Whether a value it sets keeps the key's deadline and owner, as an INCR does (a counter
    /// changed, not replaced: Redis's HINCRBYFLOAT); otherwise the key is written anew, without
    /// them, as a PUT writes it.
    public let keepsLifetime: Bool
    /// Whether it may store a value (``UpdateResult/set(_:)``); one that cannot never brings a
    /// namespace that does not exist into existence (see ``Operation/mayCreateNamespace(floor:)``).
    public let mayStore: Bool

    /// An update that runs `compute`; with `keepsLifetime`, a value it sets keeps the key's
    /// deadline and owner.
    public init(keepsLifetime: Bool = false, _ compute: @escaping @Sendable (_ current: [UInt8]?) -> UpdateResult) {
        self.init(keepsLifetime: keepsLifetime, mayStore: true, compute)
    }

    private init(keepsLifetime: Bool, mayStore: Bool, _ compute: @escaping @Sendable (_ current: [UInt8]?) -> UpdateResult) {
        self.compute = compute
        self.keepsLifetime = keepsLifetime
        self.mayStore = mayStore
    }

    /// An update that writes nothing: its outcome is the key's current value, a read of one key
    /// inside a batch (MULTI's GET, HGETDEL's read before its delete).
    public static let keep = Update(keepsLifetime: false, mayStore: false) { _ in .keep }
}

/// What an ``Update`` decided.
public enum UpdateResult: Sendable, Equatable {
    /// Store this value.
    case set([UInt8])
    /// Remove the key.
    case delete
    /// Leave the key as it is: nothing is written or logged.
    case keep
    /// Refuse the update with this error: nothing is written (in a batch, no step is).
    case refuse(StoreError)
}
