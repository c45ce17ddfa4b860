@testable import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The engine's side of CHANGES: the feed of recent changes, what log segments compaction keeps
/// for history, history read back from them across restarts, the refusals of `follow`, and a
/// change that is never delivered because its fsync failed.
@Suite("Change feeds in the engine")
struct ChangeFeedTests {
    private static func put(_ sequence: UInt64, _ key: String, _ value: String) -> Change {
        Change(sequence: sequence, mutations: [.put(key: b(key), value: b(value))])
    }

    /// Everything a follower at `cursor` reads from `feed` until it is caught up (or behind).
    private static func drain(_ feed: ChangeFeed, after cursor: UInt64) -> (changes: [UInt64], end: ChangeFeed.Read) {
        var cursor = cursor
        var seen: [UInt64] = []
        while true {
            let read = feed.read(after: cursor, limit: 3)
            guard case .changes(let changes) = read else { return (seen, read) }
            seen += changes.map(\.sequence)
            cursor = changes.last!.sequence
        }
    }

    @Test("the feed hands out only deliverable changes, in order, and only while followed")
    func feedDeliversWhatIsDeliverable() {
        let feed = ChangeFeed(namespace: "n", lagBytes: 1 << 20, listener: ChangeListener())
        feed.publish([Self.put(1, "a", "1")])
        #expect(!feed.isFollowed)
        feed.addFollower(lastSequence: 1, deliverable: 1)
        #expect(feed.deliverable == 1)
        #expect(Self.drain(feed, after: 1).end == .caughtUp)
        #expect(Self.drain(feed, after: 0).end == .beforeWindow(windowStart: 2, deliverable: 1), "change 1 was written before anyone followed")
        feed.publish((2...9).map { Self.put($0, "k\($0)", "v") })
        #expect(Self.drain(feed, after: 1).changes.isEmpty, "published but not yet durable")
        #expect(feed.deliverable == 1)
        feed.advanceDeliverable(to: 6)
        #expect(feed.deliverable == 6, "what followers check without the lock moves with the window")
        #expect(Self.drain(feed, after: 1).changes == [2, 3, 4, 5, 6])
        feed.advanceDeliverable(to: 9)
        #expect(Self.drain(feed, after: 4).changes == [5, 6, 7, 8, 9])
        feed.removeFollower()
        #expect(!feed.isFollowed)
        #expect(feed.deliverable == 0, "an emptied window")
        feed.addFollower(lastSequence: 9, deliverable: 9)
        #expect(feed.deliverable == 9)
        #expect(Self.drain(feed, after: 5).end == .beforeWindow(windowStart: 10, deliverable: 9), "the window starts anew with the next follower")
    }

    @Test("the window keeps about lagBytes of deliverable changes; a follower left behind it reads from before the window")
    func windowIsBounded() {
        let feed = ChangeFeed(namespace: "n", lagBytes: 2000, listener: ChangeListener())
        feed.addFollower(lastSequence: 0, deliverable: 0)
        let value = String(repeating: "x", count: 200)
        feed.publish((1...50).map { Self.put($0, "k", value) })
        #expect(Self.drain(feed, after: 0).changes.count == 0, "nothing deliverable yet: nothing trimmed")
        feed.advanceDeliverable(to: 50)
        let (changes, end) = Self.drain(feed, after: 0)
        #expect(changes.isEmpty)
        guard case .beforeWindow(let start, 50) = end else { Issue.record("expected beforeWindow, got \(end)"); return }
        #expect(start > 40 && start <= 50, "about 2000 bytes of 200-byte values are kept (from \(start))")
        #expect(Self.drain(feed, after: start - 1).changes == Array(start...50))
        #expect(feed.hasTrimmed(after: start - 2) && !feed.hasTrimmed(after: start - 1))
        feed.removeFollower()
        feed.addFollower(lastSequence: 50, deliverable: 50)
        #expect(!feed.hasTrimmed(after: 0), "a new window has lost nothing: a follower behind it reads the log")
    }

    @Test("changes every follower took are let go: the window starts after them, nobody is marked behind, a later follower from before reads the log; a release behind a trimmed window changes nothing")
    func releaseLetsGoOfWhatWasTaken() {
        let feed = ChangeFeed(namespace: "n", lagBytes: 2000, listener: ChangeListener())
        feed.addFollower(lastSequence: 0, deliverable: 0)
        feed.publish((1...10).map { Self.put($0, "k\($0)", "v") })
        feed.advanceDeliverable(to: 8)
        feed.release(through: 9)
        #expect(feed.windowStart == 9, "only what is deliverable is let go")
        #expect(Self.drain(feed, after: 8).changes == [])
        feed.advanceDeliverable(to: 10)
        #expect(Self.drain(feed, after: 8).changes == [9, 10])
        #expect(feed.read(after: 3, limit: 10) == .beforeWindow(windowStart: 9, deliverable: 10), "a follower from before reads the log files")
        #expect(!feed.hasTrimmed(after: 3), "nobody lost what was let go")
        feed.release(through: 10)
        #expect(feed.windowStart == 11 && feed.read(after: 10, limit: 10) == .caughtUp)
        feed.publish([Self.put(11, "k", "v")])
        feed.advanceDeliverable(to: 11)
        #expect(Self.drain(feed, after: 10).changes == [11], "the emptied window goes on")
        // Trimmed past a follower for lagging: a release behind the window keeps it lagging.
        let value = String(repeating: "x", count: 200)
        feed.publish((12...60).map { Self.put($0, "k", value) })
        feed.advanceDeliverable(to: 60)
        let start = feed.windowStart
        #expect(start > 20 && feed.hasTrimmed(after: 11))
        feed.release(through: 11)
        #expect(feed.windowStart == start && feed.hasTrimmed(after: 11), "a follower at 11 still lags")
    }

    @Test("records written before the first follower, durable only after it caught up, are before the window but not trimmed")
    func windowStartsAfterUndurableRecords() {
        let feed = ChangeFeed(namespace: "n", lagBytes: 1 << 20, listener: ChangeListener())
        feed.addFollower(lastSequence: 13, deliverable: 11)  // 12 and 13 wait for their fsync
        #expect(feed.read(after: 11, limit: 10) == .caughtUp)
        feed.publish([Self.put(14, "k", "v")])
        feed.advanceDeliverable(to: 14)
        #expect(feed.read(after: 11, limit: 10) == .beforeWindow(windowStart: 14, deliverable: 14), "12-13 are read from the log")
        #expect(!feed.hasTrimmed(after: 11), "a follower at 11 is not behind by more than the bound")
        #expect(Self.drain(feed, after: 13).changes == [14])
    }

    @Test("compaction keeps the segments that hold the last --changes-history changes, and drops the rest")
    func retentionRule() {
        let spans = [SegmentSpan(number: 1, firstSequence: 1, bytes: 100), SegmentSpan(number: 2, firstSequence: 11, bytes: 100),
                     SegmentSpan(number: 3, firstSequence: 21, bytes: 100)]  // 1-10, 11-20, 21-30; the next starts at 31
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 0) == 3)
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 5) == 2, "26-30 are in segment 3")
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 10) == 2, "21-30: segment 3 alone")
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 11) == 1, "20-30 reach into segment 2")
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 100_000) == 0)
        let empty = [SegmentSpan(number: 1, firstSequence: 1, bytes: 8), SegmentSpan(number: 2, firstSequence: 1, bytes: 100)]
        #expect(HistoryRetention.droppable(empty, next: 5, covered: 4, history: 100) == 1, "a segment with no records holds no history")
    }

    @Test("compaction keeps for history at most --changes-history-bytes of segments: the oldest go first, whatever the count says")
    func retentionByBytes() {
        let spans = [SegmentSpan(number: 1, firstSequence: 1, bytes: 100), SegmentSpan(number: 2, firstSequence: 11, bytes: 100),
                     SegmentSpan(number: 3, firstSequence: 21, bytes: 100)]  // 1-10, 11-20, 21-30; the next starts at 31
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 100_000, historyBytes: 300) == 0, "300 bytes fit")
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 100_000, historyBytes: 299) == 1)
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 100_000, historyBytes: 100) == 2)
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 100_000, historyBytes: 0) == 3)
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 5, historyBytes: 1000) == 2, "the count still bounds")
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 25, history: 100_000, historyBytes: 0) == 2,
                "never a segment the snapshot does not cover: 21-30 holds 26-30")
        #expect(HistoryRetention.droppable(spans, next: 31, covered: 30, history: 100_000, historyBytes: -1) == 3, "less than 0: 0")
    }

    @Test("a namespace of large values keeps at most --changes-history-bytes of log for history; FROM older than that is COMPACTED, newer is served")
    func largeValuesKeepBoundedHistory() async throws {
        let dir = TemporaryDirectory("changes-bytes")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.changesHistory = 100_000
        options.changesHistoryBytes = 256 << 10
        options.segmentSealBytes = 32 << 10
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("big")
            let value = [UInt8](repeating: UInt8(ascii: "x"), count: 10_000)
            for round in 0..<10 {
                for i in 0..<10 { try await ns.put(b("k\(i)"), value) }
                try await ns.compact()
                let stats = await ns.currentStatistics()
                #expect(stats.historyBytes <= options.changesHistoryBytes, "round \(round): \(stats)")
            }
            let stats = await ns.currentStatistics()
            #expect(stats.snapshotSequence == 100 && stats.oldestSequence > 1, "the oldest changes went: \(stats)")
            #expect(stats.historyBytes >= 128 << 10, "it keeps what fits, not nothing: \(stats)")
            #expect(await storeError { _ = try await ns.readHistory(after: 0, through: 100, maxBytes: 1 << 20, from: nil) }?.code == .compacted)
            let recent = try await ns.readHistory(after: 95, through: 100, maxBytes: 1 << 20, from: nil)
            #expect(recent.changes.map(\.sequence) == Array(96...100))
        }
    }

    @Test("compaction seals the active segment only when it holds a change older than the history kept, or enough bytes")
    func sealingRule() {
        // The active segment holds changes 11-30, 400 bytes of records.
        #expect(!HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: 100, sealBytes: 1 << 20),
                "all of 11-30 is among the last 100: history keeps it, a new file would only add one")
        #expect(!HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: 20, sealBytes: 1 << 20), "11-30 is the last 20")
        #expect(HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: 19, sealBytes: 1 << 20), "11 is older than the last 19")
        #expect(HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: 0, sealBytes: 1 << 20))
        #expect(HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: 100, sealBytes: 400), "bytes enough")
        #expect(!HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: 100, sealBytes: 401))
        #expect(!HistoryRetention.seals(activeFirst: 31, recordBytes: 0, covered: 30, history: 0, sealBytes: 0), "no records: nothing to seal")
        #expect(HistoryRetention.seals(activeFirst: 11, recordBytes: 400, covered: 30, history: -1, sealBytes: 1 << 20), "an embedder's -1: 0")
        #expect(HistoryRetention.droppable([SegmentSpan(number: 1, firstSequence: 1, bytes: 100)], next: 11, covered: 10, history: -1) == 1)
    }

    @Test("a namespace compacted after each of a few writes keeps one segment, its records before the snapshot history, not log, also after a restart")
    func quietNamespaceKeepsOneSegment() async throws {
        let dir = TemporaryDirectory("changes-quiet")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.changesHistory = 100_000   // the defaults
        options.segmentSealBytes = 1 << 20
        let nsDir = dir.data + "/q"
        let segment = nsDir + "/000001.log"
        var history = 0
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("q")
            for i in 1...50 {
                try await ns.put(b("k\(i % 3)"), b("v\(i)"))
                try await ns.compact()   // what the periodic compaction does to a namespace written once a minute
            }
            #expect(segmentFiles(nsDir) == [segment], "one file, not one per compaction")
            let before = await ns.currentStatistics()
            history = before.historyBytes
            #expect(before.compactions == 50 && before.snapshotSequence == 50 && before.oldestSequence == 1)
            #expect(before.logBytes == LogSegmentHeader.length, "nothing after the snapshot: \(before)")
            #expect(before.historyBytes == logLength(segment) - LogSegmentHeader.length, "\(before)")
            let start = try await store.follow("q", from: .sequence(0))
            start.feed.removeFollower()
            let chunk = try await ns.readHistory(after: 0, through: 50, maxBytes: 1 << 20, from: nil)
            #expect(chunk.changes.map(\.sequence) == Array(1...50), "the whole history, from the one segment")
            try await ns.put(b("k9"), b("after"))
            let grown = await ns.currentStatistics().logBytes
            #expect(grown == LogSegmentHeader.length + logLength(segment) - (before.historyBytes + LogSegmentHeader.length), "the log is the new record alone")
        }
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("q")
            let after = await ns.currentStatistics()
            #expect(after.recordsReplayed == 1, "the snapshot covers 1-50")
            #expect(after.historyBytes == history, "recovery finds where the records after the snapshot begin: \(after)")
            #expect(after.logBytes == logLength(segment) - history, "\(after)")
            #expect(await ns.get(b("k9")) == b("after") && after.oldestSequence == 1)
            try await ns.compact()
            #expect(segmentFiles(nsDir) == [segment])
            #expect(await ns.currentStatistics().logBytes == LogSegmentHeader.length)
        }
    }

    @Test("a write made while a compaction that leaves the active segment in place fsyncs it is fsync'd before the snapshot that covers it: a power loss after the compaction leaves no snapshot ahead of the log, and the next write after recovery follows its last record")
    func snapshotNotAheadOfTheActiveSegment() async throws {
        let dir = TemporaryDirectory("changes-ahead")
        defer { dir.remove() }
        let recorder = FileOperationRecorder()
        var options = testOptions(.no, faults: FaultInjector(recording: recorder))
        options.changesHistory = 100_000   // the defaults: history needs all the active segment holds
        options.segmentSealBytes = 64 << 20  // and its few MiB are no reason to seal it
        var point = 0
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("s")
            let value = [UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20)
            // Unsynced under `no`: the compaction's first fsync writes them back, which takes a while.
            for i in 1...4 { try await ns.put(b("big\(i)"), value) }
            let compaction = await ns.startCompaction()
            // On the actor, queued behind the compaction: once its fsync is done, and before the
            // compaction goes on, a write (a client's, arriving then).
            let late = try #require(await ns.executeOnceDurable(through: 4, [ActorKVStore.Operation.put(key: b("late"), value: b("x"))]))
            try await late.durability.wait()
            try await compaction.value
            let statistics = await ns.currentStatistics()
            try #require(statistics.lastSequence == 5 && statistics.snapshotSequence == 5,
                         "the write landed after the compaction's fsync and the snapshot covers it: \(statistics)")
            #expect(segmentFiles(dir.data + "/s") == [dir.data + "/s/000001.log"], "the compaction left the active segment in place")
            point = recorder.count
        }
        // A power loss right after the compaction: only what was fsync'd is on disk.
        var model = CrashModel(root: dir.path)
        for operation in recorder.operations.prefix(point) { try model.apply(operation) }
        var garbage = SeededGenerator(seed: 1)
        let image = model.image(Array(repeating: 0, count: model.dimensions.count), garbage: &garbage)
        let root = dir.path + "/after-power-loss"
        try image.write(to: root)
        let plain = testOptions(.no)
        try await withStore(root + "/data", plain) { store in
            let ns = try await store.namespace("s")
            #expect(await ns.get(b("late")) == b("x"), "the snapshot holds it")
            try await ns.put(b("next"), b("y"))   // sequence 6
            do {
                let history = try await ns.readHistory(after: 0, through: 6, maxBytes: 64 << 20, from: nil)
                #expect(history.changes.map(\.sequence) == Array(1...6), "the history runs without a gap")
            } catch {
                Issue.record("the history runs without a gap: \(error)")
            }
        }
        #expect(try Store.check(directory: root + "/data").first?.failure == nil)
        try await withStore(root + "/data", plain) { store in
            let ns = try await store.namespace("s")
            #expect(await ns.get(b("late")) == b("x"))
            #expect(await ns.get(b("next")) == b("y"))
        }
    }

    @Test("a segment sealed by a compaction that then failed holds records before the snapshot (left there by an earlier compaction) and after it: only those after count as log, the others as history, also after a restart")
    func sealedSegmentWithCoveredRecords() async throws {
        let dir = TemporaryDirectory("changes-mixed")
        defer { dir.remove() }
        let faults = FaultInjector()
        var options = testOptions(.everysec, faults: faults)
        options.changesHistory = 100_000
        options.segmentSealBytes = 4096
        let segment = dir.data + "/m/000001.log"
        var covered = 0
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("m")
            for i in 1...3 { try await ns.put(b("k\(i)"), b("small")) }
            try await ns.compact()                    // leaves the segment in place: 1-3 are history
            covered = await ns.currentStatistics().historyBytes
            #expect(covered == logLength(segment) - LogSegmentHeader.length)
            try await ns.put(b("big"), [UInt8](repeating: UInt8(ascii: "b"), count: 8192))
            faults.arm(failpoint: "compaction.afterRotate", .fail)
            #expect(await storeError { try await ns.compact() }?.code == .io)   // sealed (4096 bytes), no snapshot
            faults.reset()
            #expect(segmentFiles(dir.data + "/m").count == 2)
            let statistics = await ns.currentStatistics()
            #expect(statistics.snapshotSequence == 3)
            #expect(statistics.historyBytes == covered, "1-3, which the snapshot holds: \(statistics)")
            #expect(statistics.logBytes == logLength(segment) - covered + LogSegmentHeader.length, "4, and the two headers: \(statistics)")
        }
        try await withStore(dir.data, options) { store in
            let statistics = await (try store.namespace("m")).currentStatistics()
            #expect(statistics.recordsReplayed == 1)
            #expect(statistics.historyBytes == covered, "\(statistics)")
            #expect(statistics.logBytes == logLength(segment) - covered + LogSegmentHeader.length, "\(statistics)")
        }
    }

    @Test("FROM is served from the log across compactions and restarts; older than the history kept: compacted")
    func historyAcrossCompactionAndRestart() async throws {
        let dir = TemporaryDirectory("changes-history")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.changesHistory = 15
        options.segmentSealBytes = 0   // a segment per compaction
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("h")
            for round in 0..<4 {
                for i in 1...10 { try await ns.put(b("k\(i)"), b("r\(round)")) }
                try await ns.compact()                 // segments of 10 records each: 1-10, 11-20, 21-30, 31-40
            }
        }
        try await withStore(dir.data, options) { store in
            let ns = try #require(try await store.existingNamespace("h"))
            let statistics = await ns.currentStatistics()
            #expect(statistics.lastSequence == 40)
            #expect(statistics.oldestSequence == 21, "the last 15 changes (26-40) need segments 21-30 and 31-40")
            #expect(statistics.recordsReplayed == 0, "the kept segments are history: the snapshot covers them")
            let error = await storeError { _ = try await store.follow("h", from: .sequence(19)) }
            #expect(error?.code == .compacted && error?.message == "oldest available sequence is 21")
            let ahead = await storeError { _ = try await store.follow("h", from: .sequence(41)) }
            #expect(ahead?.code == .invalidArgument)
            let start = try await store.follow("h", from: .sequence(20))
            defer { start.feed.removeFollower() }
            #expect(start.sequence == 20)
            var cursor: UInt64 = 20
            var position: HistoryPosition?
            var values: [String] = []
            while cursor < 40 {
                let chunk = try await ns.readHistory(after: cursor, through: 40, maxBytes: 100, from: position)
                #expect(chunk.changes.first?.sequence == cursor + 1, "no gap")
                for change in chunk.changes {
                    guard case .put(_, let value) = change.mutations[0] else { continue }
                    values.append(String(decoding: value, as: UTF8.self))
                }
                cursor = try #require(chunk.changes.last).sequence
                position = chunk.next
            }
            #expect(values == Array(repeating: "r2", count: 10) + Array(repeating: "r3", count: 10))
        }
    }

    @Test("a history segment removed from a namespace's directory is a gap: --check names it and opening refuses it, as CHANGES … FROM would have found it")
    func missingHistorySegment() async throws {
        let dir = TemporaryDirectory("changes-gap")
        defer { dir.remove() }
        var options = testOptions(.everysec)
        options.changesHistory = 100
        options.segmentSealBytes = 0   // a segment per compaction
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("h")
            for round in 0..<4 {
                for i in 1...10 { try await ns.put(b("k\(i)"), b("r\(round)")) }
                try await ns.compact()                 // segments 1-10, 11-20, 21-30, 31-40, and the empty active one
            }
        }
        let nsDir = dir.data + "/h"
        #expect(segmentFiles(nsDir) == (1...5).map { "\(nsDir)/00000\($0).log" })
        #expect(try Store.check(directory: dir.data).first?.isReadable == true)
        try FileManager.default.removeItem(atPath: nsDir + "/000002.log")
        let checked = try #require(try Store.check(directory: dir.data).first)
        #expect(checked.failure?.code == .corrupt)
        #expect(checked.summary.hasPrefix("namespace h: UNAVAILABLE: \(nsDir): the log has a gap between \(nsDir)/000001.log (its last change is sequence 10) and \(nsDir)/000003.log (its first is sequence 21): log segment 000002.log is missing, and changes 11 through 20 with it; the snapshot (through sequence 40) holds what the missing changes did, so the data is whole"), "\(checked.summary)")
        try await withStore(dir.data, options) { store in
            let error = await storeError { _ = try await store.namespace("h") }
            #expect(error == checked.failure, "opening refuses with what the check reported")
        }
    }

    @Test("a compaction dropping several segments makes each removal durable before the next: a power loss keeps no later one without an earlier")
    func droppedSegmentsOneAtATime() async throws {
        let dir = TemporaryDirectory("changes-drop")
        defer { dir.remove() }
        let recorder = FileOperationRecorder()
        var options = testOptions(.everysec, faults: FaultInjector(recording: recorder))
        options.changesHistory = 4
        options.segmentSealBytes = 0   // a segment per compaction
        let nsDir = dir.data + "/d"
        var start = 0
        try await withStore(dir.data, options) { store in
            let ns = try await store.namespace("d")
            for (first, last) in [(1, 2), (3, 4), (5, 12)] {
                start = recorder.count
                for i in first...last { try await ns.put(b("k\(i)"), b("v")) }
                try await ns.compact()                 // the last one covers 12, keeps 9-12: drops 1-2 and 3-4
            }
        }
        #expect(segmentFiles(nsDir) == [nsDir + "/000003.log", nsDir + "/000004.log"])
        let operations = Array(recorder.operations[start...])
        let unlinks = operations.indices.filter { operations[$0] == .unlink(path: nsDir + "/000001.log") || operations[$0] == .unlink(path: nsDir + "/000002.log") }
        try #require(unlinks.count == 2)
        #expect(operations[unlinks[0]] == .unlink(path: nsDir + "/000001.log"), "the oldest first")
        #expect(operations[unlinks[0]..<unlinks[1]].contains(.sync(path: nsDir)), "the first removal is durable before the second")
        #expect(operations[unlinks[1]...].contains(.sync(path: nsDir)))
    }

    @Test("a follower added with a snapshot gets the state as of its sequence; later writes do not show in it")
    func snapshotIsAsOfItsSequence() async throws {
        let dir = TemporaryDirectory("changes-snapshot")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("s")
            try await ns.put(b("a/1"), b("x"))
            try await ns.put(b("b/1"), b("y"))
            let start = try await store.follow("s", from: .snapshot)
            defer { start.feed.removeFollower() }
            try await ns.put(b("a/2"), b("z"))
            #expect(start.sequence == 2)
            let page = try #require(start.snapshot).page(after: nil, prefix: b("a/"), limit: 10).entries
            #expect(page.map(\.key) == [b("a/1")])
            #expect(start.feed.read(after: 2, limit: 10) == .changes([Change(sequence: 3, mutations: [.put(key: b("a/2"), value: b("z"))])]))
        }
    }

    @Test("a namespace that does not exist yet can be followed; its first write is change 1")
    func followBeforeCreation() async throws {
        let dir = TemporaryDirectory("changes-new")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let start = try await store.follow("fresh", from: .now)
            defer { start.feed.removeFollower() }
            #expect(start.sequence == 0 && start.namespace == nil)
            #expect(await storeError { _ = try await store.follow("fresh2", from: .sequence(1)) }?.code == .invalidArgument)
            try await store.namespace("fresh").put(b("k"), b("v"))
            #expect(start.feed.read(after: 0, limit: 10) == .changes([Change(sequence: 1, mutations: [.put(key: b("k"), value: b("v"))])]))
        }
    }

    @Test("under always, a change whose fsync failed is never delivered, though its record was written")
    func failedFsyncIsNeverDelivered() async throws {
        let dir = TemporaryDirectory("changes-fsync")
        defer { dir.remove() }
        let faults = FaultInjector()
        try await withStore(dir.data, testOptions(.always, faults: faults)) { store in
            let ns = try await store.namespace("d")
            try await ns.put(b("k"), b("durable"))
            let start = try await store.follow("d", from: .now)
            defer { start.feed.removeFollower() }
            faults.failSyscall(.fsync, pathContains: ".log", errno: EIO)
            let error = await storeError { try await ns.put(b("k"), b("lost")) }
            #expect(error?.code == .durabilityLost)
            #expect(await ns.currentStatistics().lastSequence == 2, "the record was written")
            #expect(start.feed.read(after: 1, limit: 10) == .caughtUp, "but never delivered")
        }
    }
}

private extension Namespace {
    /// Waits, holding the actor, until the log is fsync'd through `sequence` (by a compaction that
    /// started before and is now waiting for its fsync, which cannot go on while this runs), then
    /// executes `operations`; nil if that fsync did not come within 10 seconds.
    func executeOnceDurable(through sequence: UInt64, _ operations: [ActorKVStore.Operation]) -> Execution? {
        for _ in 0..<100_000 where syncer.durableSequence < sequence { usleep(100) }
        guard syncer.durableSequence >= sequence else { return nil }
        return execute(operations)
    }
}
