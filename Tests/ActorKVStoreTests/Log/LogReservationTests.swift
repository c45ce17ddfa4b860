import ActorKVStore
import Testing

@Suite("Log space reservation policy")
struct LogReservationTests {
    let chunk = 1 << 20

    @Test("reserves a chunk past the write when less than half a chunk is left, never over records")
    func fillRule() {
        let policy = LogReservation(chunkBytes: chunk)
        // A new segment: the first write reserves a chunk beyond itself.
        #expect(policy.fill(appendingAt: 0, count: 100, reserved: 0) == 0..<(100 + chunk))
        // Plenty left: nothing.
        #expect(policy.fill(appendingAt: 1000, count: 100, reserved: chunk) == nil)
        // Under half a chunk left after the write: extend from the reserved end.
        let length = chunk / 2 + 10
        #expect(policy.fill(appendingAt: length, count: 100, reserved: chunk) == chunk..<(length + 100 + chunk))
        // Records already past the reservation (after an append without one): start at the records' end.
        #expect(policy.fill(appendingAt: 5000, count: 100, reserved: 10)?.lowerBound == 5000)
    }

    @Test("large writes and a zero chunk reserve nothing; the defaults follow the fsync policy")
    func offCases() {
        #expect(LogReservation(chunkBytes: chunk).fill(appendingAt: 0, count: chunk / 2, reserved: 0) == nil)
        #expect(LogReservation.off.fill(appendingAt: 0, count: 1, reserved: 0) == nil)
        #expect(LogReservation(chunkBytes: -5) == .off)
        #expect(LogReservation.standard(for: .always).chunkBytes == chunk)
        #expect(LogReservation.standard(for: .everysec) == .off)
        #expect(LogReservation.standard(for: .no) == .off)
        #expect(StoreOptions(durability: .always).reservation.chunkBytes == chunk)
        #expect(StoreOptions().reservation == .off)
    }
}
