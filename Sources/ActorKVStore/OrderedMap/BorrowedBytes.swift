/// Bytes read in place: an array of their own, or a slice of a larger buffer.
///
/// The server finds a request's key and value where the decoded request holds them, so a `GET`
/// or `PUT` makes no array for its key, and a `PUT` that overwrites a value of about the same
/// size copies the new bytes into the old value's storage instead of allocating (see
/// `Benchmarks/HOTPATHS.md`, rounds 15 and 16). Only `count` and the bytes are read: a slice's
/// indices need not start at zero.
///
/// Internal: the engine's public API takes arrays and slices by name, and each generic body is
/// specialized for them inside this module. (A public generic called from another module runs
/// unspecialized: `map-latency`, which calls ``OrderedMap`` from the benchmark target, measured
/// 0.3 µs per update at 1k keys that way against 0.1 µs.)
protocol BorrowedBytes: Sendable {
    /// The number of bytes.
    var count: Int { get }
    /// Calls `body` with the bytes.
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: BorrowedBytes where Element == UInt8 {}
extension ArraySlice: BorrowedBytes where Element == UInt8 {}
