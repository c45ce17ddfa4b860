/// The numbers of a run's log records, handed out in operation order: the record of the
/// operation `written[i]` is numbered `start + i + 1` (the planner numbered them so).
struct RecordNumbers {
    private let written: [Int]
    private let start: UInt64
    private var next = 0

    init(written: [Int], after start: UInt64) {
        self.written = written
        self.start = start
    }

    /// The number of operation `index`'s record, or 0 if it has none (a delete of no keys);
    /// operations ask in increasing order.
    mutating func number(of index: Int) -> UInt64 {
        while next < written.count && written[next] < index { next += 1 }
        guard next < written.count && written[next] == index else { return 0 }
        next += 1
        return start + UInt64(next)
    }
}
