import Dispatch

/// Runs blocking file work (fsync, snapshot writes, recovery reads) on Dispatch threads, off
/// Swift's cooperative pool, so that a slow disk never starves the tasks serving other requests.
enum BlockingIO {
    private static let queue = DispatchQueue(label: "actorkv.blocking-io", qos: .utility, attributes: .concurrent)

    /// Runs `body` on a Dispatch thread and returns its result.
    static func run<T: Sendable>(_ body: @escaping @Sendable () throws(StoreError) -> T) async throws(StoreError) -> T {
        let result: Result<T, StoreError> = await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: Result { () throws(StoreError) in try body() }) }
        }
        return try result.get()
    }

    /// Frees `value` on a Dispatch thread: a whole namespace's keys (one removed, or expired) are
    /// a million frees, which would hold up the event loop that every connection waits on. The
    /// caller hands it over with `consume`, so that the thread here drops the last reference.
    static func release<T: Sendable>(_ value: consuming T) {
        let parcel = Parcel(consume value)
        queue.async { parcel.value = nil }
    }

    /// Holds a value on its way to ``release(_:)``'s thread: only that thread touches it after.
    private final class Parcel<T: Sendable>: @unchecked Sendable {
        var value: T?
        init(_ value: consuming T) { self.value = consume value }
    }
}
