import ActorKVProtocol
import Testing

/// Emptying a buffer for reuse (the input buffer, the write planner's arrays): kept up to a
/// capacity, let go above it.
@Suite("Arrays emptied for reuse")
struct ArrayReuseTests {
    @Test("an array is emptied and keeps its capacity up to the limit; above it, it is let go; an empty one stays as it is")
    func keepsOnlyBoundedCapacity() {
        var small = [UInt8](repeating: 7, count: 100)
        let smallCapacity = small.capacity
        small.removeAll(keepingCapacityUpTo: 1024)
        #expect(small.isEmpty)
        #expect(small.capacity == smallCapacity)

        var large = [UInt8](repeating: 7, count: 2000)
        large.removeAll(keepingCapacityUpTo: 1024)
        #expect(large.isEmpty)
        #expect(large.capacity == 0)

        var reserved: [Int] = []
        reserved.reserveCapacity(50)
        let reservedCapacity = reserved.capacity
        reserved.removeAll(keepingCapacityUpTo: 1024)
        #expect(reserved.capacity == reservedCapacity)
    }
}
