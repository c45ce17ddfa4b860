#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A window onto a snapshot file: up to `capacity` bytes from file position `start`, read through
/// ``SystemCalls``. ``SnapshotCodec/decode(window:)`` slides it forward between entries, so that
/// loading a snapshot holds about one window of the file in memory instead of all of it (a 1M-key
/// snapshot is 125 MB).
final class SnapshotWindow {
    /// How many bytes the window holds at most.
    let capacity: Int
    /// The decoder slides the window forward when fewer than this many bytes are left ahead of the
    /// entry it is about to read; a longer entry makes it fall back to reading the whole file.
    let reserve: Int
    /// The window's position in the file.
    private(set) var start = 0
    /// Whether the window holds everything up to the end of the file.
    private(set) var reachesEnd = false

    private let fd: Int32
    private let path: String
    private let fileSize: Int
    private let storage: UnsafeMutableRawBufferPointer
    private var count = 0

    /// The bytes standard recovery reads at a time, and the reserve ahead of each entry.
    static let standardCapacity = 16 << 20
    static let standardReserve = 8 << 20

    /// Opens `path` and reads its first window.
    init(path: String, capacity: Int = standardCapacity, reserve: Int = standardReserve) throws(StoreError) {
        precondition(reserve > 0 && reserve <= capacity, "the reserve must fit in the window")
        self.path = path
        do {
            fd = try SystemCalls.open(path, O_RDONLY)
        } catch {
            throw StoreError.io("reading", path, error)
        }
        do {
            fileSize = try SystemCalls.fileSize(fd)
        } catch {
            SystemCalls.close(fd)
            throw StoreError.io("reading", path, error)
        }
        // A small file gets a window of its own size (and is read in one go).
        self.capacity = min(capacity, max(fileSize, 1))
        self.reserve = min(reserve, self.capacity)
        storage = .allocate(byteCount: self.capacity, alignment: 16)
        try fill()
    }

    deinit {
        storage.deallocate()
        SystemCalls.close(fd)
    }

    /// The bytes in the window.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[0..<count]) }

    /// Drops the first `n` bytes of the window and reads on from the file.
    func slide(droppingFirst n: Int) throws(StoreError) {
        precondition(n >= 0 && n <= count, "cannot drop bytes the window does not hold")
        if n > 0 && n < count { memmove(storage.baseAddress!, storage.baseAddress! + n, count - n) }
        start += n
        count -= n
        try fill()
    }

    private func fill() throws(StoreError) {
        while count < capacity && start + count < fileSize {
            let n: Int
            do {
                n = try SystemCalls.pread(fd, UnsafeMutableRawBufferPointer(rebasing: storage[count..<capacity]),
                                          at: start + count, path: path)
            } catch {
                throw StoreError.io("reading", path, error)
            }
            if n == 0 { break }  // the file shrank
            count += n
        }
        reachesEnd = start + count >= fileSize || count < capacity
    }
}
