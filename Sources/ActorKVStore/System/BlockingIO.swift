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
}
