import ActorKVProtocol

/// Versions, conditional writes and counters: sharing state without lost updates.
///
/// Every key has a version, the number of the server's log record that last wrote it. Read the
/// value and its version with ``getVersioned(_:_:)``, write with ``put(_:_:_:ifVersion:ttl:ephemeral:)``, and
/// when that returns nil someone wrote the key in between: read again and retry. For counters,
/// ``increment(_:_:by:)`` needs no loop.
extension ActorKVClient {
    /// The value under `key` in `namespace` and its version, or nil if there is none (`GETV`).
    public func getVersioned(_ namespace: String, _ key: [UInt8]) async throws(ActorKVError) -> VersionedValue? {
        let reply = try await send([Array("GETV".utf8), Array(namespace.utf8), key])
        switch reply {
        case .null: return nil
        case .array(let parts):
            guard parts.count == 2, case .bulk(let value) = parts[0], case .integer(let version) = parts[1], version > 0 else {
                throw Self.unexpected(reply, for: "GETV")
            }
            return VersionedValue(value: value, version: UInt64(version))
        default: throw Self.unexpected(reply, for: "GETV")
        }
    }

    /// ``getVersioned(_:_:)`` for the UTF-8 bytes of `key`.
    public func getVersioned(_ namespace: String, _ key: String) async throws(ActorKVError) -> VersionedValue? {
        try await getVersioned(namespace, Array(key.utf8))
    }

    /// Stores `value` under `key` only if the key's version is `ifVersion` (0: only if the key is
    /// absent) (`PUT … IFVERSION`). Returns the key's new version, or nil when the condition did
    /// not hold (nothing was written). `ttl` and `ephemeral` apply to the write as in
    /// ``put(_:_:_:ttl:ephemeral:)-(_,[UInt8],[UInt8],_,_)``.
    ///
    /// A version is 0 to `Int64.max` (the versions a server gives); the server refuses a larger
    /// `ifVersion` with ``ActorKVError/server(code:message:)``, code `ERR` (`IFVERSION needs a
    /// version: an integer from 0 to 9223372036854775807, not '…'`), and writes nothing.
    public func put(_ namespace: String, _ key: [UInt8], _ value: [UInt8], ifVersion: UInt64, ttl: Duration? = nil,
                    ephemeral: Bool = false) async throws(ActorKVError) -> UInt64? {
        let reply = try await send(Self.putArguments(namespace, key, value, ttl: ttl, ephemeral: ephemeral, ifVersion: ifVersion))
        switch reply {
        case .null: return nil
        case .integer(let version) where version > 0: return UInt64(version)
        default: throw Self.unexpected(reply, for: "PUT IFVERSION")
        }
    }

    /// ``put(_:_:_:ifVersion:ttl:ephemeral:)-(_,[UInt8],[UInt8],_,_,_)`` of the UTF-8 bytes of `value` under those of `key`.
    public func put(_ namespace: String, _ key: String, _ value: String, ifVersion: UInt64, ttl: Duration? = nil,
                    ephemeral: Bool = false) async throws(ActorKVError) -> UInt64? {
        try await put(namespace, Array(key.utf8), Array(value.utf8), ifVersion: ifVersion, ttl: ttl, ephemeral: ephemeral)
    }

    /// ``put(_:_:_:ifVersion:ttl:ephemeral:)-(_,[UInt8],[UInt8],_,_,_)`` of `value` under the UTF-8 bytes of `key`:
    /// what a read-modify-write of a ``getVersioned(_:_:)-(_,String)`` value writes back.
    public func put(_ namespace: String, _ key: String, _ value: [UInt8], ifVersion: UInt64, ttl: Duration? = nil,
                    ephemeral: Bool = false) async throws(ActorKVError) -> UInt64? {
        try await put(namespace, Array(key.utf8), value, ifVersion: ifVersion, ttl: ttl, ephemeral: ephemeral)
    }

    /// Removes `key` only if its version is `ifVersion` (a guarded `BATCH`). Returns whether the
    /// condition held (with `ifVersion` 0, it holds when the key is absent, and nothing is removed).
    public func delete(_ namespace: String, _ key: [UInt8], ifVersion: UInt64) async throws(ActorKVError) -> Bool {
        try await batch(namespace, [.ifVersion(key: key, version: ifVersion), .delete(key: key)]) != nil
    }

    /// ``delete(_:_:ifVersion:)`` of the UTF-8 bytes of `key`.
    public func delete(_ namespace: String, _ key: String, ifVersion: UInt64) async throws(ActorKVError) -> Bool {
        try await delete(namespace, Array(key.utf8), ifVersion: ifVersion)
    }

    /// Adds `delta` to the signed 64-bit integer stored (in decimal) under `key`, an absent key
    /// counting as 0, and returns the sum (`INCR`). A value that is not an integer, or a sum out
    /// of range, is refused (``ActorKVError/server(code:message:)`` with code `ERR`), nothing written.
    /// The key keeps its ttl and owner (``pexpire(_:_:ttl:)-([UInt8])``, `ephemeral:`), as Redis's INCR keeps a TTL.
    @discardableResult
    public func increment(_ namespace: String, _ key: [UInt8], by delta: Int64 = 1) async throws(ActorKVError) -> Int64 {
        let reply = try await send([Array("INCR".utf8), Array(namespace.utf8), key, Array(String(delta).utf8)])
        guard case .integer(let sum) = reply else { throw Self.unexpected(reply, for: "INCR") }
        return sum
    }

    /// ``increment(_:_:by:)`` of the integer under the UTF-8 bytes of `key`.
    @discardableResult
    public func increment(_ namespace: String, _ key: String, by delta: Int64 = 1) async throws(ActorKVError) -> Int64 {
        try await increment(namespace, Array(key.utf8), by: delta)
    }
}
