import ActorKVProtocol

/// The namespace name a connection's requests gave last, kept as the String the commands carry,
/// so that a run of requests on one namespace (a pipeline, a transaction) validates and decodes
/// its name once rather than once per request: the name's bytes are compared with the last
/// ones, and only new bytes are checked and decoded (``Command/namespace(_:)``).
///
/// Owned by one connection, used only by the thread that parses its requests, one access at a
/// time: so its state is `@exclusivity(unchecked)`, as the event loop's is (the runtime's check
/// of each access, a thread-local lookup, was 1% of the server's own CPU for a redis-py HSET).
final class NamespaceNames {
    /// The last name's bytes (empty: none yet; an empty name is never valid).
    @exclusivity(unchecked) private var lastBytes: [UInt8] = []
    /// The last name, as ``Command/namespace(_:)`` returned it for ``lastBytes``.
    @exclusivity(unchecked) private var lastName = ""

    /// The namespace name `bytes` give, as ``Command/namespace(_:)`` returns it (or the error it
    /// throws for an invalid name, which is not kept).
    func name(_ bytes: ArraySlice<UInt8>) throws(CommandError) -> String {
        if !lastBytes.isEmpty && Self.equal(bytes, lastBytes) { return lastName }
        let name = try Command.namespace(bytes)
        // Into the same storage (a name is at most 64 bytes): a client that alternates between
        // namespaces allocates nothing here per request.
        lastBytes.removeAll(keepingCapacity: true)
        lastBytes.append(contentsOf: bytes)
        lastName = name
        return name
    }

    private static func equal(_ bytes: ArraySlice<UInt8>, _ last: [UInt8]) -> Bool {
        guard bytes.count == last.count else { return false }
        return bytes.withUnsafeBufferPointer { a in
            last.withUnsafeBufferPointer { b in a.elementsEqual(b) }
        }
    }
}
