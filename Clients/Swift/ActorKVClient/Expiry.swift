import ActorKVProtocol

/// Keys that expire: `PUT … PX ms` (``put(_:_:_:ttl:ephemeral:)-(_,[UInt8],[UInt8],_,_)`` with a
/// `ttl`), `PEXPIRE`, `PERSIST` and `PTTL`, with Redis's conventions; and whole namespaces, with
/// the same commands given no key (``pexpire(_:ttl:)``, ``persist(_:)``, ``pttl(_:)``).
///
/// An expired key is gone for every read at once (GET, GETV, EXISTS, COUNT, SCAN, a change
/// stream's snapshot); the server then removes it with a delete that change streams see. Setting
/// or removing an expiry (``pexpire(_:_:ttl:)-([UInt8])``, ``persist(_:_:)-([UInt8])``) keeps the
/// key's value, version and owner, and is not a change.
extension ActorKVClient {
    /// Makes `key` in `namespace` expire `ttl` from now (`PEXPIRE`, in whole milliseconds rounded
    /// up), keeping its value, version and owner. A `ttl` of zero or less deletes the key now, as
    /// Redis does. Returns whether the key exists (false: nothing was done). A `ttl` whose
    /// deadline would pass `Int64.max` milliseconds since the epoch (a `ttl` of more milliseconds
    /// than an `Int64` holds is sent as `Int64.max`) is refused by the server with
    /// ``ActorKVError/server(code:message:)``, code `ERR` (`invalid expire time in 'PEXPIRE'
    /// command`), the key unchanged.
    @discardableResult
    public func pexpire(_ namespace: String, _ key: [UInt8], ttl: Duration) async throws(ActorKVError) -> Bool {
        let reply = try await send([Array("PEXPIRE".utf8), Array(namespace.utf8), key, Self.milliseconds(ttl)])
        switch reply {
        case .integer(0): return false
        case .integer(1): return true
        default: throw Self.unexpected(reply, for: "PEXPIRE")
        }
    }

    /// ``pexpire(_:_:ttl:)-([UInt8])`` of the UTF-8 bytes of `key`.
    @discardableResult
    public func pexpire(_ namespace: String, _ key: String, ttl: Duration) async throws(ActorKVError) -> Bool {
        try await pexpire(namespace, Array(key.utf8), ttl: ttl)
    }

    /// Removes the expiry of `key` in `namespace` (`PERSIST`). Returns true if it had one; false
    /// if the key is absent or does not expire (Redis's rule).
    @discardableResult
    public func persist(_ namespace: String, _ key: [UInt8]) async throws(ActorKVError) -> Bool {
        let reply = try await send([Array("PERSIST".utf8), Array(namespace.utf8), key])
        switch reply {
        case .integer(0): return false
        case .integer(1): return true
        default: throw Self.unexpected(reply, for: "PERSIST")
        }
    }

    /// ``persist(_:_:)-([UInt8])`` of the UTF-8 bytes of `key`.
    @discardableResult
    public func persist(_ namespace: String, _ key: String) async throws(ActorKVError) -> Bool {
        try await persist(namespace, Array(key.utf8))
    }

    /// How long `key` in `namespace` has left before it expires (`PTTL`): see ``TimeToLive``.
    public func pttl(_ namespace: String, _ key: [UInt8]) async throws(ActorKVError) -> TimeToLive {
        let reply = try await send([Array("PTTL".utf8), Array(namespace.utf8), key])
        switch reply {
        case .integer(-2): return .absent
        case .integer(-1): return .persistent
        case .integer(let left) where left >= 0: return .remaining(.milliseconds(left))
        default: throw Self.unexpected(reply, for: "PTTL")
        }
    }

    /// ``pttl(_:_:)-([UInt8])`` of the UTF-8 bytes of `key`.
    public func pttl(_ namespace: String, _ key: String) async throws(ActorKVError) -> TimeToLive {
        try await pttl(namespace, Array(key.utf8))
    }

    /// Makes the whole `namespace` expire `ttl` from now (`PEXPIRE ns ms`, Redis's `EXPIRE` of a
    /// hash, in whole milliseconds rounded up): every key goes then. Writes keep the deadline;
    /// the delete that leaves no key ends it. A `ttl` of zero or less deletes every key now.
    /// Returns whether the namespace holds a key (false: nothing was done). Local data only: an
    /// agent of an etcd cluster refuses it (``ActorKVError/server(code:message:)``, `ERR`).
    @discardableResult
    public func pexpire(_ namespace: String, ttl: Duration) async throws(ActorKVError) -> Bool {
        let reply = try await send([Array("PEXPIRE".utf8), Array(namespace.utf8), Self.milliseconds(ttl)])
        switch reply {
        case .integer(0): return false
        case .integer(1): return true
        default: throw Self.unexpected(reply, for: "PEXPIRE")
        }
    }

    /// Removes the whole `namespace`'s deadline (`PERSIST ns`). Returns true if it had one.
    @discardableResult
    public func persist(_ namespace: String) async throws(ActorKVError) -> Bool {
        let reply = try await send([Array("PERSIST".utf8), Array(namespace.utf8)])
        switch reply {
        case .integer(0): return false
        case .integer(1): return true
        default: throw Self.unexpected(reply, for: "PERSIST")
        }
    }

    /// How long the whole `namespace` has left before every key goes (`PTTL ns`): ``TimeToLive``,
    /// ``TimeToLive/absent`` when it holds no key.
    public func pttl(_ namespace: String) async throws(ActorKVError) -> TimeToLive {
        let reply = try await send([Array("PTTL".utf8), Array(namespace.utf8)])
        switch reply {
        case .integer(-2): return .absent
        case .integer(-1): return .persistent
        case .integer(let left) where left >= 0: return .remaining(.milliseconds(left))
        default: throw Self.unexpected(reply, for: "PTTL")
        }
    }

    /// The arguments of `PUT namespace key value [PX ms] [EPHEMERAL] [IFVERSION v]`: without
    /// options, the plain PUT every server knows.
    static func putArguments(_ namespace: String, _ key: [UInt8], _ value: [UInt8], ttl: Duration?, ephemeral: Bool,
                             ifVersion: UInt64?) -> [[UInt8]] {
        var arguments = [Array("PUT".utf8), Array(namespace.utf8), key, value]
        if let ttl { arguments += [Array("PX".utf8), milliseconds(ttl)] }
        if ephemeral { arguments.append(Array("EPHEMERAL".utf8)) }
        if let ifVersion { arguments += [Array("IFVERSION".utf8), Array(String(ifVersion).utf8)] }
        return arguments
    }

    /// `duration` as decimal milliseconds, rounded up (so that a positive duration never becomes
    /// 0, which would mean "now"), within the signed 64-bit range.
    static func milliseconds(_ duration: Duration) -> [UInt8] {
        let (seconds, attoseconds) = duration.components
        // Whole milliseconds, rounded toward +infinity; the components may have mixed signs.
        let attoPerMilli: Int64 = 1_000_000_000_000_000
        var fromAtto = attoseconds / attoPerMilli
        if attoseconds % attoPerMilli > 0 { fromAtto += 1 }
        let (fromSeconds, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        let (total, overflow2) = fromSeconds.addingReportingOverflow(fromAtto)
        let value = overflow || overflow2 ? (seconds < 0 ? Int64.min : Int64.max) : total
        return Array(String(value).utf8)
    }
}

/// How long a key has left before it expires, as ``ActorKVClient/pttl(_:_:)-([UInt8])`` reports it
/// (`PTTL`'s `-2`, `-1`, or the milliseconds left).
public enum TimeToLive: Sendable, Equatable, Hashable {
    /// The key does not exist (or has expired).
    case absent
    /// The key exists and does not expire.
    case persistent
    /// The key expires after this long (whole milliseconds; zero: in less than one).
    case remaining(Duration)
}
