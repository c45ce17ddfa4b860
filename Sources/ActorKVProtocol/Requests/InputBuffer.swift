/// The bytes a decoder has received, with a read position that only moves forward.
///
/// Consumed bytes are dropped lazily: when they are at least as many as the unread ones (so each
/// byte is moved at most once on average), when everything is consumed, or on request. Memory is
/// therefore bounded by about twice the unread bytes plus the last appended chunk.
struct InputBuffer: Sendable {
    /// Capacity kept for reuse after a buffer empties; bigger buffers are released.
    private static let retainedCapacity = 256 * 1024

    /// Received bytes; `storage[readIndex...]` are not consumed yet.
    private(set) var storage: [UInt8] = []
    /// Index of the first unconsumed byte.
    var readIndex = 0

    /// Number of bytes received but not consumed yet.
    var unreadCount: Int { storage.count - readIndex }

    /// Appends raw bytes, compacting first when that is cheap enough.
    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        compactIfWorthIt()
        bytes.withMemoryRebound(to: UInt8.self) { storage.append(contentsOf: $0) }
    }

    /// Appends bytes, compacting first when that is cheap enough.
    mutating func append(_ bytes: [UInt8]) {
        compactIfWorthIt()
        storage.append(contentsOf: bytes)
    }

    /// Drops consumed bytes if they are at least as many as the unread ones.
    mutating func compactIfWorthIt() {
        if readIndex > 0 && readIndex >= unreadCount {
            compact()
        }
    }

    /// Drops all consumed bytes, so the first unread byte moves to index 0.
    mutating func compact() {
        guard readIndex > 0 else { return }
        if readIndex == storage.count {
            storage.removeAll(keepingCapacityUpTo: Self.retainedCapacity)
        } else {
            storage.removeSubrange(0..<readIndex)
        }
        readIndex = 0
    }

    /// Makes room for `count` more bytes than are unread, so a large payload arrives without
    /// repeated reallocation (call only after the payload's size was checked against the limits).
    mutating func reserve(unread count: Int) {
        compact()
        storage.reserveCapacity(count)
    }

    /// Takes the whole storage, without copying, when it holds exactly `count` payload bytes
    /// followed by `\r\n` starting at index 0 and nothing after. Returns nil otherwise.
    mutating func takeWholePayload(count: Int) -> [UInt8]? {
        guard readIndex == 0, storage.count == count + 2 else { return nil }
        var payload: [UInt8] = []
        swap(&payload, &storage)
        payload.removeLast(2)
        return payload
    }
}

extension InputBuffer {
    /// Resets the buffer when every byte has been consumed (cheap: nothing moves).
    mutating func compactIfConsumed() {
        if readIndex > 0 && readIndex == storage.count { compact() }
    }
}
