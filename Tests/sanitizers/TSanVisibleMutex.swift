#if ACTORKV_TSAN
import Glibc

/// For ThreadSanitizer builds only (`Tests/sanitizers/run.sh thread` copies this file into each
/// module of a clone and builds with `-DACTORKV_TSAN`; no target here compiles it): a lock that
/// ThreadSanitizer sees, a pthread mutex, in place of Synchronization's `Mutex`, which takes a
/// contended lock in the kernel (a PI futex) where ThreadSanitizer cannot see it. Declared in the
/// module, it shadows the imported one; the same `init` and `withLock` as that one.
final class Mutex<Value: ~Copyable>: @unchecked Sendable {
    private var value: Value
    private let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)

    init(_ initialValue: consuming sending Value) {
        value = initialValue
        pthread_mutex_init(lock, nil)
    }

    deinit {
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }

    func withLock<Result: ~Copyable, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        pthread_mutex_lock(lock)
        defer { pthread_mutex_unlock(lock) }
        return try body(&value)
    }
}
#endif
