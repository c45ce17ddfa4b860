#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A window onto a file being read from start to end: up to `capacity` bytes from file position
/// `start`, read through its store's ``SystemCalls``. Recovery reads log segments (``LogSegmentScanner``) and
/// snapshots (``SnapshotCodec/decode(window:reserve:)``) through one, sliding it forward as it
/// goes, so it holds about one window of a file in memory instead of all of it.
final class FileWindow {
    /// The window's position in the file.
    private(set) var start = 0
    /// How many bytes the window can hold; ``grow(to:)`` raises it.
    private(set) var capacity: Int
    /// The file's size when opened, or less if a read found the end sooner (it shrank).
    private(set) var fileSize: Int

    private let fd: Int32
    private let path: String
    private let system: SystemCalls
    private var storage: UnsafeMutableRawBufferPointer
    private var count = 0

    /// Opens `path` and reads its first window, through `system`. A file smaller than `capacity`
    /// gets a window of its own size, read in one go.
    init(path: String, capacity: Int, system: SystemCalls) throws(StoreError) {
        precondition(capacity > 0, "a window holds at least one byte")
        self.path = path
        self.system = system
        do {
            fd = try system.open(path, O_RDONLY)
        } catch {
            throw StoreError.io("reading", path, error)
        }
        do {
            fileSize = try SystemCalls.fileSize(fd)
        } catch {
            SystemCalls.close(fd)
            throw StoreError.io("reading", path, error)
        }
        self.capacity = min(capacity, max(fileSize, 1))
        storage = .allocate(byteCount: self.capacity, alignment: 16)
        try fill()
    }

    deinit {
        storage.deallocate()
        SystemCalls.close(fd)
    }

    /// The bytes in the window. Valid only while the window lives and until it slides or grows:
    /// hold the window (or use ``withBytes(_:)``) for as long as they are read.
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[0..<count]) }

    /// Calls `body` with the bytes in the window, keeping the window alive meanwhile.
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(bytes)
    }

    /// Whether the window holds everything up to the end of the file.
    var reachesEnd: Bool { start + count >= fileSize }

    /// Drops the first `n` bytes of the window and reads on from the file.
    func slide(droppingFirst n: Int) throws(StoreError) {
        precondition(n >= 0 && n <= count, "cannot drop bytes the window does not hold")
        if n > 0 && n < count { memmove(storage.baseAddress!, storage.baseAddress! + n, count - n) }
        start += n
        count -= n
        try fill()
    }

    /// Lets the window hold `newCapacity` bytes (for something longer than it) and reads on.
    func grow(to newCapacity: Int) throws(StoreError) {
        guard newCapacity > capacity else { return }
        let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: newCapacity, alignment: 16)
        larger.baseAddress!.copyMemory(from: storage.baseAddress!, byteCount: count)
        storage.deallocate()
        storage = larger
        capacity = newCapacity
        try fill()
    }

    private func fill() throws(StoreError) {
        while count < capacity && start + count < fileSize {
            let n: Int
            do {
                n = try system.pread(fd, UnsafeMutableRawBufferPointer(rebasing: storage[count..<capacity]),
                                     at: start + count, path: path)
            } catch {
                throw StoreError.io("reading", path, error)
            }
            if n == 0 {
                fileSize = start + count  // the file shrank
                return
            }
            count += n
        }
    }
}
