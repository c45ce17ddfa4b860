/// Bytes a key is read from in place: an array of its own, or a slice of a larger buffer.
///
/// The server finds a request's key where the decoded request holds it, so a `GET` or `PUT`
/// makes no array for its key (the map copies a new key's bytes into its node; see
/// `Benchmarks/HOTPATHS.md`, round 15). Only `count` and the bytes are read: a slice's indices
/// need not start at zero.
public protocol KeyBytes: Sendable {
    /// The number of bytes.
    var count: Int { get }
    /// Calls `body` with the bytes.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: KeyBytes where Element == UInt8 {}
extension ArraySlice: KeyBytes where Element == UInt8 {}
