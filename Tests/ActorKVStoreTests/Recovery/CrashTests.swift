import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Crash tests with real child processes: `actorkv-stress` is killed with SIGKILL at random
/// moments, or stops itself with _exit(86) at a compaction failpoint, and the directory is then
/// reopened in this process and compared with what the child acknowledged.
@Suite("Crash tests (child processes)", .tags(.slow), .skippedWhenQuick)
struct CrashTests {
    // MARK: - The child

    /// The actorkv-stress executable, which SwiftPM builds next to the test bundle (or $ACTORKV_STRESS).
    static func stressExecutable() throws -> String {
        try builtBinary("actorkv-stress", environment: "ACTORKV_STRESS")
    }

    /// A running actorkv-stress.
    struct Child {
        let process: ChildProcess
        let stderrPath: String

        init(_ arguments: [String], environment: [String: String] = [:], stderrPath: String) throws {
            let merged = ProcessInfo.processInfo.environment.merging(environment) { $1 }
            process = try ChildProcess(try CrashTests.stressExecutable(), arguments, environment: merged,
                                       stderr: .file(stderrPath))
            self.stderrPath = stderrPath
        }

        func kill9() { process.signal(SIGKILL) }

        /// Waits for the child to end (it always does: killed, failpoint, or error).
        func wait() async -> ChildProcess.Termination {
            while process.isRunning { try? await Task.sleep(nanoseconds: 2_000_000) }
            return process.waitForExit()
        }

        var stderr: String {
            (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "(no stderr)"
        }
    }

    // MARK: - The model of what the child acknowledged

    enum Change: Equatable { case put(String, String), delete(String) }

    /// Replays the ack file: acknowledged operations are applied; the one operation in flight
    /// when the child died (intent, no ack) may or may not be on disk.
    struct AckModel {
        var state: [String: String] = [:]
        var pending: (id: UInt64, changes: [Change])?
        var lastID: UInt64 = 0
        var acknowledged = 0
        private var consumed = 0

        static func apply(_ changes: [Change], to state: inout [String: String]) {
            for change in changes {
                switch change {
                case .put(let k, let v): state[k] = v
                case .delete(let k): state[k] = nil
                }
            }
        }

        /// Reads the lines appended since the last call. A last line without its newline (the
        /// child died inside write(2)) is cut off the file so the next child starts a clean line.
        mutating func consume(_ path: String) throws {
            var bytes = try readFile(path)
            if let lastNewline = bytes.lastIndex(of: UInt8(ascii: "\n")), lastNewline + 1 < bytes.count {
                bytes.removeSubrange((lastNewline + 1)...)
                guard truncate(path, off_t(bytes.count)) == 0 else { throw TestFailure("truncate \(path) failed") }
            } else if !bytes.contains(UInt8(ascii: "\n")) {
                if !bytes.isEmpty { guard truncate(path, 0) == 0 else { throw TestFailure("truncate failed") } }
                bytes = []
            }
            let text = String(decoding: bytes[min(consumed, bytes.count)...], as: UTF8.self)
            consumed = bytes.count
            for line in text.split(separator: "\n") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
                guard parts.count >= 2, let id = UInt64(parts[1]) else { throw TestFailure("bad ack line: \(line)") }
                switch parts[0] {
                case "I":
                    guard parts.count == 4 else { throw TestFailure("bad intent line: \(line)") }
                    guard pending == nil else { throw TestFailure("intent \(id) while \(pending!.id) was not acknowledged") }
                    guard id > lastID else { throw TestFailure("operation ids must increase: \(id) after \(lastID)") }
                    let changes = try parts[3].split(separator: ";").map { m -> Change in
                        if m.hasPrefix("+"), let eq = m.firstIndex(of: "=") {
                            return .put(String(m[m.index(after: m.startIndex)..<eq]), String(m[m.index(after: eq)...]))
                        }
                        if m.hasPrefix("-") { return .delete(String(m.dropFirst())) }
                        throw TestFailure("bad mutation \(m) in \(line)")
                    }
                    pending = (id, changes)
                    lastID = id
                case "A":
                    guard let p = pending, p.id == id else { throw TestFailure("ack \(id) without its intent") }
                    Self.apply(p.changes, to: &state)
                    pending = nil
                    acknowledged += 1
                default:
                    throw TestFailure("bad ack line: \(line)")
                }
            }
        }

        /// Checks the reopened contents: exactly the acknowledged state, or that plus the one
        /// operation in flight. Adopts whichever it was.
        mutating func verify(_ found: [[UInt8]: [UInt8]], _ context: String,
                             sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
            var actual: [String: String] = [:]
            for (k, v) in found { actual[String(decoding: k, as: UTF8.self)] = String(decoding: v, as: UTF8.self) }
            defer { pending = nil }
            if actual == state { return true }
            if let p = pending {
                var applied = state
                Self.apply(p.changes, to: &applied)
                if actual == applied {
                    state = applied
                    return true
                }
            }
            var problems: [String] = []
            for (k, v) in state where actual[k] != v {
                problems.append(actual[k] == nil ? "acknowledged key \(k) missing" : "\(k) = \(actual[k]!.prefix(30)), acknowledged \(v.prefix(30))")
            }
            for (k, v) in actual where state[k] == nil { problems.append("unacknowledged key \(k) = \(v.prefix(30))") }
            Issue.record("\(context): reopened data is neither the acknowledged state nor it plus the operation in flight \(pending.map { "\($0.id): \($0.changes)" } ?? "(none)"): \(problems.count) differences: \(problems.prefix(8).joined(separator: "; "))",
                         sourceLocation: sourceLocation)
            return false
        }
    }

    /// Every batch wrote `b:<id>:0…4` = `<id>` in one record: all five keys or none.
    static func checkBatches(_ found: [[UInt8]: [UInt8]], _ context: String, sourceLocation: SourceLocation = #_sourceLocation) {
        var groups: [String: Set<String>] = [:]
        for (k, v) in found {
            let key = String(decoding: k, as: UTF8.self)
            let parts = key.split(separator: ":")
            guard parts.count == 3, parts[0] == "b" else { continue }
            if String(decoding: v, as: UTF8.self) != parts[1] {
                Issue.record("\(context): \(key) holds \(String(decoding: v, as: UTF8.self)), not its batch id", sourceLocation: sourceLocation)
            }
            groups[String(parts[1]), default: []].insert(String(parts[2]))
        }
        for (id, members) in groups where members != ["0", "1", "2", "3", "4"] {
            Issue.record("\(context): batch \(id) is half applied: \(members.sorted())", sourceLocation: sourceLocation)
        }
    }

    /// Waits until `path` exists or the child has ended (at most 60 s).
    static func waitForFile(_ path: String, while child: Child) async {
        var waited = 0
        while access(path, F_OK) != 0 && child.process.isRunning && waited < 30_000 {
            try? await Task.sleep(nanoseconds: 2_000_000)
            waited += 1
        }
    }

    static func reopen(_ directory: String) async throws -> (contents: [[UInt8]: [UInt8]], stats: NamespaceStatistics) {
        try await withStore(directory) { store in
            let ns = try await store.namespace("crash")
            return (await contents(ns), await ns.currentStatistics())
        }
    }

    // MARK: - kill -9

    @Test("kill -9 at random moments: acknowledged writes survive, unacknowledged ones are all-or-nothing")
    func killNineCycles() async throws {
        _ = try Self.stressExecutable()
        let dir = TemporaryDirectory("kill")
        defer { dir.remove() }
        let ackPath = dir.path + "/acks"
        _ = FileManager.default.createFile(atPath: ackPath, contents: nil)  // a child may die before it opens it
        var model = AckModel()
        let seed = UInt64.random(in: 1...1_000_000)
        var tornCuts = 0, inFlightApplied = 0, inFlightLost = 0, snapshotSeen = false
        // $ACTORKV_STRESS_CYCLES (default 24; the soak run, Tests/soak.sh, runs 200).
        let cycles = Int(ProcessInfo.processInfo.environment["ACTORKV_STRESS_CYCLES"] ?? "") ?? 24
        for cycle in 0..<cycles {
            // Mostly `always`; a few cycles with the weaker policies, which also survive kill -9.
            let fsync = cycle % 6 == 5 ? (cycle % 12 == 5 ? "no" : "everysec") : "always"
            let readyPath = dir.path + "/ready"
            unlink(readyPath)
            let child = try Child(["write", "--dir", dir.data, "--ack-file", ackPath, "--fsync", fsync,
                                   "--seed", "\(seed + UInt64(cycle))", "--first-id", "\(model.lastID + 1)",
                                   "--ready-file", readyPath],
                                  stderrPath: dir.path + "/stderr")
            // The kill is timed from the child's first write, since a loaded machine (CI runs the
            // suites in parallel) can take longer than the whole window to start it and open the
            // store; every fourth cycle times it from the start, so recovery is killed too.
            if cycle % 4 != 3 { await Self.waitForFile(readyPath, while: child) }
            try await Task.sleep(nanoseconds: UInt64.random(in: 20...300) * 1_000_000)
            child.kill9()
            let ended = await child.wait()
            try #require(ended == .signalled(SIGKILL),
                         "cycle \(cycle): the child ended by itself (\(ended)): \(child.stderr)")
            try model.consume(ackPath)
            let hadPending = model.pending != nil
            let before = model.state
            let (found, stats) = try await Self.reopen(dir.data)
            let context = "cycle \(cycle) (seed \(seed), fsync \(fsync), \(model.acknowledged) acknowledged so far)"
            let ok = model.verify(found, context)
            Self.checkBatches(found, context)
            if ok && hadPending { if model.state == before { inFlightLost += 1 } else { inFlightApplied += 1 } }
            if stats.tornBytesCut > 0 { tornCuts += 1 }
            if stats.snapshotSequence > 0 { snapshotSeen = true }
            if !ok { break }
        }
        // The children did real work (not all killed before their first write).
        #expect(model.acknowledged >= 30, "only \(model.acknowledged) operations acknowledged in \(cycles) cycles")
        print("kill -9: \(cycles) cycles, \(model.acknowledged) acknowledged operations, in flight applied \(inFlightApplied) / lost \(inFlightLost), torn tails cut \(tornCuts), a compaction seen \(snapshotSeen)")
    }

    // MARK: - Compaction failpoints

    static let failpoints = ["compaction.afterRotate", "compaction.afterTempWrite", "compaction.afterTempSync",
                             "compaction.afterRename", "compaction.afterDirectorySync", "compaction.afterLogDrop"]

    /// Each failpoint with no change history kept (each compaction seals the active segment and
    /// drops the log it covers), and, but for the log drop that then never comes, with the
    /// default history (the active segment stays, its records before the snapshot kept).
    static let compactionCases = failpoints.map { ($0, 0) } + failpoints.dropLast().map { ($0, 100_000) }

    @Test("a crash at each compaction step: reopening gives exactly the acknowledged data", arguments: compactionCases)
    func compactionCrash(failpoint: String, history: Int) async throws {
        _ = try Self.stressExecutable()
        let dir = TemporaryDirectory("fp")
        defer { dir.remove() }
        let ackPath = dir.path + "/acks"
        let nsDir = dir.data + "/crash"
        var model = AckModel()
        let step = Self.failpoints.firstIndex(of: failpoint)!
        // Round 1 stops in the first compaction (no snapshot yet); round 2 compacts normally;
        // round 3 stops again with an older snapshot in place.
        for round in 1...3 {
            let crash = round != 2
            let child = try Child(
                ["compact-crash", "--dir", dir.data, "--ack-file", ackPath, "--count", "60",
                 "--first-id", "\(model.lastID + 1)", "--history", "\(history)"] + (crash ? ["--failpoint", failpoint] : []),
                environment: crash ? ["ACTORKV_FAILPOINT": failpoint] : [:],
                stderrPath: dir.path + "/stderr")
            let ended = await child.wait()
            try #require(ended == .exited(crash ? 86 : 0),
                         "round \(round): expected exit \(crash ? 86 : 0), got \(ended): \(child.stderr)")
            try model.consume(ackPath)
            #expect(model.pending == nil, "every operation finished before compacting")

            // What the crash left on disk, before recovery touches it.
            if crash {
                let tmpExists = fileExists(nsDir + "/snapshot.json.tmp")
                #expect(tmpExists == (step == 1 || step == 2), "round \(round): snapshot.json.tmp present: \(tmpExists)")
                if step >= 3 { #expect(fileExists(nsDir + "/snapshot.json")) }
                if round == 1 && step < 3 { #expect(!fileExists(nsDir + "/snapshot.json")) }
                if round == 3 && step < 3 {
                    // The previous snapshot is still the one in place and still valid.
                    let (header, _) = try SnapshotCodec.decode(try readFile(nsDir + "/snapshot.json"))
                    #expect(header.lastSequence < model.lastID)
                }
            }
            let (found, stats) = try await Self.reopen(dir.data)
            _ = model.verify(found, "round \(round) at \(failpoint)")
            Self.checkBatches(found, "round \(round)")
            #expect(stats.tornBytesCut == 0)
            #expect(!fileExists(nsDir + "/snapshot.json.tmp"), "recovery removes the unfinished snapshot")
            // Reopen once more: recovery is repeatable and changed nothing that matters.
            let (again, _) = try await Self.reopen(dir.data)
            expectSameContents(again, found, "second reopen")
        }
        #expect(model.acknowledged == 3 * (60 + 9 + 2))
        if history > 0 {
            #expect(segmentFiles(nsDir) == [nsDir + "/000001.log"], "history needs every change: the compactions left the one segment in place")
        }
    }
}
