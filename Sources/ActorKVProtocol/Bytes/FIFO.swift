/// A first-in first-out queue with O(1) amortized `append` and `popFirst`: taken elements stay
/// in the buffer until they are half of it (or all of it), then are let go at once. Used by the
/// client for replies awaited in order and by the server's loop for the following connections
/// it puts off to later turns.
package struct FIFO<Element> {
    @usableFromInline var storage: [Element] = []
    @usableFromInline var head = 0

    /// An empty queue.
    @inlinable
    package init() {}

    /// Whether nothing is queued.
    @inlinable
    package var isEmpty: Bool { head == storage.count }

    /// How many elements are queued.
    @inlinable
    package var count: Int { storage.count - head }

    /// Queues `element` after the others.
    @inlinable
    package mutating func append(_ element: Element) { storage.append(element) }

    /// Takes the element queued first, or nil when the queue is empty.
    @inlinable
    package mutating func popFirst() -> Element? {
        guard head < storage.count else { return nil }
        let element = storage[head]
        head += 1
        if head == storage.count {
            storage.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= storage.count {
            storage.removeFirst(head)
            head = 0
        }
        return element
    }

    /// Takes every queued element, in order, and lets the buffer go.
    @inlinable
    package mutating func removeAll() -> [Element] {
        let rest = Array(storage[head...])
        storage = []
        head = 0
        return rest
    }
}

extension FIFO: Sendable where Element: Sendable {}
