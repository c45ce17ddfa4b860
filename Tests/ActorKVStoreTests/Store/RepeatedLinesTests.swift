@testable import ActorKVStore
import Testing

/// A failure repeated on every request (a namespace that cannot be created on a full disk) is
/// logged once a while, with how often it was held back; found by an operator audit (hundreds
/// of lines a second).
@Suite("Repeated log lines")
struct RepeatedLinesTests {
    @Test("the same line for the same subject is held back for 10 s, then logged with the count; another line or subject is logged at once")
    func holdsBackRepeats() {
        var lines = RepeatedLines()
        let start = ContinuousClock.now
        #expect(lines.line(for: "a", "full", now: start) == "full")
        #expect(lines.line(for: "a", "full", now: start + .seconds(1)) == nil)
        #expect(lines.line(for: "a", "full", now: start + .seconds(9)) == nil)
        #expect(lines.line(for: "b", "full", now: start + .seconds(9)) == "full", "another subject")
        #expect(lines.line(for: "a", "full", now: start + .seconds(11)) == "full (and 2 times more since it was last logged)")
        #expect(lines.line(for: "a", "full", now: start + .seconds(12)) == nil)
        #expect(lines.line(for: "a", "denied", now: start + .seconds(13)) == "denied", "another line")
        lines.forget("a")
        #expect(lines.line(for: "a", "denied", now: start + .seconds(14)) == "denied", "forgotten once it recovered")
    }
}
