import ActorKVProtocol
import Testing

/// The queue the client's pending replies and the server's put-off followers wait in.
@Suite("FIFO")
struct FIFOTests {
    @Test("elements come out in the order they went in, across the buffer being let go and compacted")
    func order() {
        var queue = FIFO<Int>()
        #expect(queue.isEmpty && queue.count == 0 && queue.popFirst() == nil)
        var expected = 0
        var next = 0
        // Interleaved: 3 in, 2 out, so taken elements pile up and the buffer is compacted
        // (at 1,024 taken, half of it) many times over.
        for _ in 0..<5_000 {
            for _ in 0..<3 { queue.append(next); next += 1 }
            for _ in 0..<2 {
                #expect(queue.popFirst() == expected)
                expected += 1
            }
        }
        #expect(queue.count == 5_000)
        while let element = queue.popFirst() {
            #expect(element == expected)
            expected += 1
        }
        #expect(expected == 15_000 && queue.isEmpty)
    }

    @Test("removeAll takes what is queued, in order, and leaves the queue empty and usable")
    func removeAll() {
        var queue = FIFO<String>()
        for word in ["a", "b", "c", "d"] { queue.append(word) }
        #expect(queue.popFirst() == "a")
        #expect(queue.removeAll() == ["b", "c", "d"])
        #expect(queue.isEmpty && queue.removeAll().isEmpty)
        queue.append("e")
        #expect(queue.count == 1 && queue.popFirst() == "e")
    }
}
