@testable import ActorKVClient
import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Glibc
import Testing

/// The Swift client's change streams (`CHANGES`), mirrors and RemoteRepository.changes() against
/// real `actorkvd` processes: order and completeness under concurrent writers, prefixes, resuming
/// across a kill -9 and a `-LAGGING` drop, `COMPACTED` as a typed error (and a mirror that takes
/// a new snapshot instead), and cancellation closing the connection.
@Suite("Client: CHANGES streams and mirrors")
struct ChangesClientTests {
    @Test("a stream from 0 sees exactly the acknowledged writes of 4 concurrent writers: in order, consecutive sequences, batches whole",
          .localOnly("checks consecutive sequences; an agent's are etcd revisions, with gaps (protocol.md, Cluster mode)"))
    func concurrentWriters() async throws {
        try await withServer { server, kv in
            let stream = kv.changes("feed", from: .after(0)).makeAsyncIterator()
            let writers = 4, writes = 30
            // Each writer's acknowledged writes, in its order, as the keys each one wrote.
            let written = try await withThrowingTaskGroup(of: (Int, [[ChangedKey]]).self) { group in
                for w in 0..<writers {
                    group.addTask {
                        let client = ActorKVClient(socketPath: server.socketPath)
                        var mine: [[ChangedKey]] = []
                        for j in 0..<writes {
                            switch j % 3 {
                            case 0:
                                let a = "w\(w)-\(j)-a", b = "w\(w)-\(j)-b"
                                _ = try await client.batch("feed", [.put(a, "\(j)a"), .put(b, "\(j)b")])
                                mine.append([ChangedKey(key: a.bytes, value: "\(j)a".bytes), ChangedKey(key: b.bytes, value: "\(j)b".bytes)])
                            case 1:
                                try await client.put("feed", "w\(w)-\(j)", "v\(j)")
                                mine.append([ChangedKey(key: "w\(w)-\(j)".bytes, value: "v\(j)".bytes)])
                            default:
                                #expect(try await client.delete("feed", "w\(w)-\(j - 1)"))
                                mine.append([ChangedKey(key: "w\(w)-\(j - 1)".bytes, value: nil)])
                            }
                        }
                        await client.close()
                        return (w, mine)
                    }
                }
                var all: [Int: [[ChangedKey]]] = [:]
                for try await (w, mine) in group { all[w] = mine }
                return all
            }
            let changes = try await readChanges(stream, count: writers * writes)
            #expect(changes.map(\.sequence) == Array(1...UInt64(writers * writes)), "consecutive, from 1, none twice")
            #expect(changes.allSatisfy { $0.namespace == "feed" })
            for w in 0..<writers {
                let seen = changes.filter { $0.keys[0].keyString.hasPrefix("w\(w)-") }.map(\.keys)
                #expect(seen == written[w], "writer \(w)'s writes, each whole and in its order")
            }
            // The sequence of a change is the version it gave its keys.
            for change in changes where change.keys.count == 2 {
                #expect(try await kv.getVersioned("feed", change.keys[0].key)?.version == change.sequence)
            }
        }
    }

    @Test("PREFIX: only the keys under it, changes that touch none are not sent; from now; snapshot of the prefix",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func prefixFiltering() async throws {
        try await withServer { _, kv in
            let fromZero = kv.changes("cfg", prefix: "app:", from: .after(0)).makeAsyncIterator()
            try await kv.put("cfg", "app:x", "1")                                              // 1
            try await kv.put("cfg", "other", "2")                                              // 2
            _ = try await kv.batch("cfg", [.put("app:y", "3"), .put("zzz", "4"), .delete("app:x")])  // 3
            try await kv.put("cfg", "zz", "5")                                                 // 4
            try await kv.put("cfg", "app:z", "6")                                              // 5
            let changes = try await readChanges(fromZero, count: 3)
            #expect(changes == [
                ChangeRecord(sequence: 1, namespace: "cfg", keys: [ChangedKey(key: "app:x".bytes, value: "1".bytes)]),
                ChangeRecord(sequence: 3, namespace: "cfg", keys: [ChangedKey(key: "app:y".bytes, value: "3".bytes),
                                                                    ChangedKey(key: "app:x".bytes, value: nil)]),
                ChangeRecord(sequence: 5, namespace: "cfg", keys: [ChangedKey(key: "app:z".bytes, value: "6".bytes)]),
            ])

            // A snapshot of the prefix, then synced at the last sequence.
            let snapshot = kv.changes("cfg", prefix: "app:", from: .snapshot).makeAsyncIterator()
            #expect(try await nextEvent(snapshot) == .snapshot(SnapshotPage(sequence: 5, entries: [
                ScanEntry(key: "app:y".bytes, value: "3".bytes), ScanEntry(key: "app:z".bytes, value: "6".bytes),
            ], isFirst: true)))
            #expect(try await nextEvent(snapshot) == .synced(5))

            // From now: the stream starts at the last sequence; later writes under the prefix only.
            let now = kv.changes("cfg", prefix: "app:").makeAsyncIterator()
            #expect(try await nextEvent(now) == .synced(5))
            try await kv.put("cfg", "outside", "7")                                            // 6
            try await kv.put("cfg", "app:w", "8")                                              // 7
            #expect(try await nextEvent(now) == .change(ChangeRecord(sequence: 7, namespace: "cfg",
                                                                      keys: [ChangedKey(key: "app:w".bytes, value: "8".bytes)])))
            #expect(try await nextEvent(snapshot) == .change(ChangeRecord(sequence: 7, namespace: "cfg",
                                                                           keys: [ChangedKey(key: "app:w".bytes, value: "8".bytes)])))
        }
    }

    @Test("a mirror (2,500 keys: 3 snapshot pages) kept current under concurrent writers equals a final SCAN; a prefix mirror too; updates in order")
    func mirrorEqualsFinalState() async throws {
        try await withServer { server, kv in
            for page in 0..<5 {
                _ = try await kv.batch("m", (0..<500).map { .put(String(format: "k%04d", page * 500 + $0), "v\($0)") })
            }
            let loaded = try #require(try await kv.getVersioned("m", "k2499")).version  // 5 locally: the fifth batch
            let whole = try await kv.mirror("m")
            let part = try await kv.mirror("m", prefix: "k1")
            // An agent's snapshot is at the cluster's revision, which other clients' writes move on.
            #expect(whole.entries.count == 2500 && (ClusterTarget.active ? whole.sequence >= loaded : whole.sequence == loaded))
            #expect(part.entries.count == 1000)
            let updates = whole.updates()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for w in 0..<3 {
                    group.addTask {
                        let client = ActorKVClient(socketPath: server.socketPath)
                        for i in 0..<100 {
                            let key = String(format: "k%04d", (w * 977 + i * 31) % 2600)
                            if i % 4 == 3 {
                                _ = try await client.delete("m", [key])
                            } else {
                                try await client.put("m", key, "w\(w)-\(i)")
                            }
                        }
                        await client.close()
                    }
                }
                try await group.waitForAll()
            }
            let last = try #require(try await kv.put("m", "k1-last", "end", ifVersion: 0))
            try await withDeadline("the mirrors to catch up") {
                try await whole.waitUntil(sequence: last)
                try await part.waitUntil(sequence: last)
            }
            #expect(whole.entries == (try await scanned(kv, "m", prefix: "")))
            #expect(part.entries == (try await scanned(kv, "m", prefix: "k1")))
            #expect(whole["k1-last"] == "end".bytes && whole.sequence == last)

            // The updates: each change after the subscription, in order, through the last.
            let sequences = try await withDeadline("the updates") {
                var sequences: [UInt64] = []
                for try await update in updates {
                    sequences.append(update.sequence)
                    if update.sequence == last { break }
                }
                return sequences
            }
            if ClusterTarget.active {
                // An agent's sequences are etcd revisions, shared by every namespace: increasing, with gaps.
                #expect(sequences.first.map { $0 > loaded } == true && sequences == sequences.sorted() && Set(sequences).count == sequences.count)
            } else {
                #expect(sequences == Array((loaded + 1)...last), "one update per change")
            }
            whole.close()
            part.close()
            #expect(whole.failure == nil)
            #expect(whole["k1-last"] == "end".bytes, "the state stays readable after close")
        }
    }

    @Test("resume across kill -9 and restart (--fsync always): every acknowledged write once, in order, none missed or repeated")
    func resumeAcrossKill() async throws {
        try await withServer(fsync: "always") { server, kv in
            let stream = kv.changes("dur", from: .after(0)).makeAsyncIterator()
            for i in 1...40 { try await kv.put("dur", "k\(i)", "v\(i)") }
            let before = try await readChanges(stream, count: 10)
            try await server.signal(SIGKILL)
            // While the stream cannot reach it, another server on the same data writes 41 to 60:
            // a stream that resumed from "now" rather than after its last change would miss them.
            let side = try await ServerProcess.started(arguments: ["--data-dir", server.dataPath, "--fsync", "always"] + server.agentArguments)
            let other = ActorKVClient(socketPath: side.socketPath)
            for i in 41...60 { try await other.put("dur", "k\(i)", "v\(i)") }
            await other.close()
            try await side.signal(SIGKILL)
            try await server.restart()
            await kv.close()  // drop the dead connection; the next call opens one to the new server
            for i in 61...80 { try await kv.put("dur", "k\(i)", "v\(i)") }
            let changes = try await before + readChanges(stream, count: 70)
            let sequences = changes.map(\.sequence)
            // An agent's sequences are etcd revisions, shared by every namespace: increasing, with gaps.
            #expect(ClusterTarget.active ? sequences == sequences.sorted() && Set(sequences).count == 80 : sequences == Array(1...80))
            #expect(changes.map { $0.keys } == (1...80).map { [ChangedKey(key: "k\($0)".bytes, value: "v\($0)".bytes)] })
        }
    }

    @Test("a slow consumer is dropped with -LAGGING and resumes from the log: nothing missed or repeated",
          .localOnly("an agent delays a slow follower (etcd holds the rest) rather than dropping it with -LAGGING (protocol.md, Cluster mode)"))
    func resumeAfterLagging() async throws {
        try await withServer(arguments: ["--changes-lag-bytes", "4096", "--max-output-bytes", "4096"]) { _, kv in
            let stream = kv.changes("lag", from: .after(0)).makeAsyncIterator()
            #expect(try await nextEvent(stream) == .synced(0))
            // Not reading: the stream's buffer fills, then the socket's, then the server's.
            let value = String(repeating: "x", count: 2000)
            for i in 0..<200 { _ = try await kv.batch("lag", [.put("a\(i)", value), .put("b\(i)", value)]) }
            let changes = try await readChanges(stream, count: 200)
            #expect(changes.map(\.sequence) == Array(1...200))
            #expect(changes.allSatisfy { $0.keys.count == 2 && $0.keys[0].value == value.bytes })
            let dropped = try await kv.info().split(whereSeparator: \.isNewline).first { $0.hasPrefix("ns_lag:") }
            #expect(dropped?.contains("followers_dropped=0") == false, "the server dropped the stream: \(dropped ?? "")")
        }
    }

    @Test("FROM a compacted sequence ends the stream with the typed COMPACTED error; FROM a held one works",
          .localOnly("COMPACT compacts the whole etcd cluster's history, under the tests running beside it (protocol.md, Cluster mode)"))
    func compactedIsTyped() async throws {
        try await withServer(arguments: ["--changes-history", "1"]) { _, kv in
            try await writeAndCompactTwice(kv, "old")
            let stream = kv.changes("old", from: .after(0)).makeAsyncIterator()
            let error = await expectError(ActorKVError.self) { _ = try await nextEvent(stream) }
            #expect(error == .compacted(namespace: "old", requested: 0, oldestAvailable: 4))
            #expect(error?.wireCode == .compacted)
            let afterError = try await withDeadline("the end of the stream") {
                var copy = stream
                return try await copy.next()
            }
            #expect(afterError == nil, "the stream has ended")

            let held = kv.changes("old", from: .after(3)).makeAsyncIterator()
            #expect(try await readChanges(held, count: 2).map(\.sequence) == [4, 5])

            let ahead = kv.changes("old", from: .after(99)).makeAsyncIterator()
            let refused = await expectError(ActorKVError.self) { _ = try await nextEvent(ahead) }
            #expect(refused?.serverCode == "ERR")
        }
    }

    @Test("a mirror that resumes into compacted history takes a new snapshot; its updates report the difference, deletions included",
          .localOnly("COMPACT compacts the whole etcd cluster's history, under the tests running beside it (protocol.md, Cluster mode)"))
    func mirrorResnapshots() async throws {
        try await withServer(fsync: "always", arguments: ["--changes-history", "1"]) { server, kv in
            for key in ["a", "b", "c"] { try await kv.put("gap", key, "1") }                     // 1 2 3
            let mirror = try await kv.mirror("gap", reconnect: ReconnectPolicy(maximumDelay: .milliseconds(200)))
            let updates = mirror.updates()
            try await server.signal(SIGKILL)
            // While the mirror cannot reach it, another server on the same data writes and
            // compacts the changes after 3 away.
            let side = try await ServerProcess.started(arguments: ["--data-dir", server.dataPath, "--fsync", "always",
                                                                    "--changes-history", "1"])
            let other = ActorKVClient(socketPath: side.socketPath)
            #expect(try await other.delete("gap", "a"))                                            // 4
            try await other.put("gap", "b", "2")                                                   // 5
            try await other.compact("gap")
            try await other.put("gap", "d", "1")                                                   // 6
            try await other.compact("gap")
            await other.close()
            try await side.signal(SIGTERM)
            try await server.restart()
            await kv.close()
            // The mirror resumes from 3, is told COMPACTED, and takes a snapshot at 6.
            try await withDeadline("the new snapshot") { try await mirror.waitUntil(sequence: 6) }
            let last = try #require(try await kv.put("gap", "e", "1", ifVersion: 0))               // 7
            try await withDeadline("the mirror to catch up") { try await mirror.waitUntil(sequence: last) }
            #expect(mirror.entries == ["b": "2", "c": "1", "d": "1", "e": "1"].reduce(into: [:]) { $0[$1.key.bytes] = $1.value.bytes })
            let first = try await withDeadline("an update") { () async throws -> ChangeRecord? in
                for try await update in updates { return update }
                return nil
            }
            #expect(first == ChangeRecord(sequence: 6, namespace: "gap", keys: [
                ChangedKey(key: "a".bytes, value: nil), ChangedKey(key: "b".bytes, value: "2".bytes),
                ChangedKey(key: "d".bytes, value: "1".bytes),
            ]), "the new snapshot's difference, at its sequence")
            #expect(mirror.failure == nil)
            mirror.close()
        }
    }

    @Test("a task waiting on a mirror that is cancelled throws cancelled; the mirror goes on")
    func cancelledMirrorWait() async throws {
        try await withServer { _, kv in
            let first = try #require(try await kv.put("wait", "a", "1", ifVersion: 0))
            let mirror = try await kv.mirror("wait")
            // Far past any sequence this test makes (an agent's are etcd revisions, shared).
            let waiter = Task { try await mirror.waitUntil(sequence: first + 1_000_000) }
            try await Task.sleep(for: .milliseconds(50))  // cancelled waiting or before: both throw
            waiter.cancel()
            await #expect(throws: ActorKVError.cancelled) { try await waiter.value }
            let next = try #require(try await kv.put("wait", "b", "2", ifVersion: 0))
            try await withDeadline("the mirror goes on") { try await mirror.waitUntil(sequence: next) }
            #expect(mirror["b"] == "2".bytes && mirror.failure == nil)
            mirror.close()
        }
    }

    @Test("cancelling the consuming task, or leaving the loop, closes the stream's connection",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func cancellationCloses() async throws {
        try await withServer { _, kv in
            try await kv.put("c", "k", "v")
            let baseline = try await connectedClients(kv)
            let consumer = Task {
                for try await _ in kv.changes("c") {}
            }
            try await waitFor("the stream's connection") { try await connectedClients(kv) == baseline + 1 }
            consumer.cancel()
            _ = try await consumer.value  // the loop ends without an error
            try await waitFor("the connection to close after cancel") { try await connectedClients(kv) == baseline }

            for try await event in kv.changes("c", from: .snapshot) {
                #expect(event == .snapshot(SnapshotPage(sequence: 1, entries: [ScanEntry(key: "k".bytes, value: "v".bytes)], isFirst: true)))
                break
            }
            try await waitFor("the connection to close after break") { try await connectedClients(kv) == baseline }
        }
    }

    @Test("the first connection failing is thrown at once; reconnection gives up after giveUpAfter",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func connectionFailures() async throws {
        let nowhere = ActorKVClient(socketPath: TemporaryDirectory("chg").path + "/none.sock")
        let stream = nowhere.changes("x").makeAsyncIterator()
        let error = await expectError(ActorKVError.self) { _ = try await nextEvent(stream) }
        #expect(error?.isConnectionError == true)

        try await withServer { server, kv in
            let stream = kv.changes("g", reconnect: ReconnectPolicy(giveUpAfter: .milliseconds(300))).makeAsyncIterator()
            #expect(try await nextEvent(stream) == .synced(0))
            try await server.signal(SIGKILL)
            let lost = await expectError(ActorKVError.self) { _ = try await nextEvent(stream) }
            #expect(lost?.isConnectionError == true, "\(String(describing: lost))")
            try await server.restart()
        }
    }

    @Test("a stopped server that accepts but never answers CHANGES: a stream and a mirror throw timedOut after the client's timeout, not wait for ever")
    func firstAnswerTimesOut() async throws {
        try await withServer { server, kv in
            try await kv.put("h", "k", "v")
            try await server.signal(SIGSTOP)
            let quick = ActorKVClient(socketPath: server.socketPath, timeout: .milliseconds(300))
            let stream = quick.changes("h").makeAsyncIterator()
            let error = await expectError(ActorKVError.self) { _ = try await nextEvent(stream) }
            guard case .timedOut(let reason)? = error else { throw TestFailure("expected timedOut, got \(String(describing: error))") }
            #expect(reason.contains("no answer to CHANGES"), "\(reason)")
            let mirrorError = try await withDeadline("the mirror throws") {
                await expectError(ActorKVError.self) { _ = try await quick.mirror("h") }
            }
            #expect(mirrorError?.isConnectionError == true, "\(String(describing: mirrorError))")
            try await server.signal(SIGCONT)
            // Once the server answers, the same client follows. A server just woken may take
            // longer than the client's 0.3 s to answer (an agent built with AddressSanitizer on a
            // busy CI host did): it is asked again, each try timing out as the one above did.
            var followed = false
            for _ in 0..<20 where !followed {
                followed = (try? await quick.mirror("h").entries) == [Array("k".utf8): Array("v".utf8)]
            }
            #expect(followed, "once it answers, the same client follows")
        }
    }

    @Test("a policy that retries the first connection waits out a server that is not there yet, or does not answer, within giveUpAfter")
    func firstConnectionRetried() async throws {
        try await withServer { server, kv in
            try await kv.put("h", "k", "v")
            let quick = ActorKVClient(socketPath: server.socketPath, timeout: .milliseconds(300))
            let patient = ReconnectPolicy(giveUpAfter: .seconds(30), retriesFirstConnection: true)
            try await server.signal(SIGSTOP)   // accepts, never answers: the first CHANGES times out
            let stalled = quick.changes("h", from: .now, reconnect: patient).makeAsyncIterator()
            let first = Task { try await nextEvent(stalled) }
            try await Task.sleep(for: .seconds(1))   // more than three client timeouts
            try await server.signal(SIGCONT)
            let event = try await withDeadline("the stream connects once the server answers") { try await first.value }
            guard case .synced = event else { throw TestFailure("expected synced, got \(event)") }
            try await server.signal(SIGKILL)   // not there at all: the first connection is refused
            let waiting = quick.changes("h", from: .now, reconnect: patient).makeAsyncIterator()
            let second = Task { try await nextEvent(waiting) }
            try await Task.sleep(for: .seconds(1))
            try await server.restart()
            let again = try await withDeadline("the stream connects once the server is back") { try await second.value }
            guard case .synced = again else { throw TestFailure("expected synced, got \(again)") }
            #expect(ReconnectPolicy(giveUpAfter: .seconds(1)).retriesFirstConnection == false, "by default a first failure ends the stream")
        }
    }

    @Test("RemoteRepository.changes(): items decoded, deletes as a nil item, a snapshot of items; undecodable bytes throw",
          .localOnly("checks the local engine's sequence numbers (1, 2, …); an agent's sequences are etcd revisions, shared by every namespace (protocol.md, Cluster mode)"))
    func repositoryChanges() async throws {
        try await withServer { _, kv in
            let repo = RemoteRepository<Counter>(client: kv, namespace: "counters")
            try await repo.save(Counter(id: 1, value: 10, note: nil))
            try await repo.save(Counter(id: 2, value: 20, note: "two"))
            let stream = repo.changes(from: .snapshot).makeAsyncIterator()
            #expect(try await nextEvent(stream) == .snapshot(sequence: 2, items: [Counter(id: 1, value: 10, note: nil),
                                                                                 Counter(id: 2, value: 20, note: "two")], isFirst: true))
            #expect(try await nextEvent(stream) == .synced(sequence: 2))
            try await repo.save(contentsOf: [Counter(id: 3, value: 30, note: nil), Counter(id: 1, value: 11, note: nil)])
            try await repo.delete(2)
            #expect(try await nextEvent(stream) == .change(sequence: 3, items: [
                RepositoryItemChange(id: 3, item: Counter(id: 3, value: 30, note: nil)),
                RepositoryItemChange(id: 1, item: Counter(id: 1, value: 11, note: nil)),
            ]))
            #expect(try await nextEvent(stream) == .change(sequence: 4, items: [RepositoryItemChange(id: 2, item: nil)]))

            try await kv.put("counters", "5", "not json")
            let error = await expectError(ActorKVError.self) { _ = try await nextEvent(stream) }
            guard case .decodingFailed(let namespace, let key, _)? = error else {
                Issue.record("expected decodingFailed, got \(String(describing: error))"); return
            }
            #expect(namespace == "counters" && key == "5".bytes)
        }
    }
}

/// The state machine that reads `CHANGES` messages and keeps the position to resume from,
/// fed replies directly (no server).
@Suite("FollowState: CHANGES messages and the position to resume from")
struct FollowStateTests {
    /// `*3`/`*4` message `kind ns :sequence [pairs]`.
    static func message(_ kind: String, _ sequence: Int64, _ pairs: [Reply]? = nil, namespace: String = "ns") -> Reply {
        .array([.bulk(kind.bytes), .bulk(namespace.bytes), .integer(sequence)] + (pairs.map { [.array($0)] } ?? []))
    }

    static func words(_ text: String) -> [[UInt8]] { text.split(separator: " ").map { Array($0.utf8) } }

    static func change(_ sequence: UInt64, _ key: String, _ value: String?) -> ChangeEvent {
        .change(ChangeRecord(sequence: sequence, namespace: "ns", keys: [ChangedKey(key: key.bytes, value: value?.bytes)]))
    }

    @Test("from now, then FROM the last change or synced sequence; PREFIX; the header must match the FROM sent")
    func resumePosition() {
        var s = FollowState(namespace: "ns", prefix: "p".bytes, start: .now, resnapshots: false)
        #expect(s.request == Self.words("CHANGES ns PREFIX p"))
        s.connectionStarted()
        #expect(s.handle(Self.message("changes", 7)) == .deliver([]))
        #expect(s.request == Self.words("CHANGES ns PREFIX p FROM 7"))
        #expect(s.handle(Self.message("change", 9, [.bulk("pk".bytes), .null])) == .deliver([Self.change(9, "pk", nil)]))
        #expect(s.handle(Self.message("synced", 12)) == .deliver([.synced(12)]))
        #expect(s.request == Self.words("CHANGES ns PREFIX p FROM 12"), "synced passes over changes outside the prefix")
        s.connectionStarted()
        guard case .fail(.protocolViolation) = s.handle(Self.message("changes", 11)) else {
            Issue.record("a header that is not the FROM sent is a violation"); return
        }

        var after = FollowState(namespace: "ns", prefix: [], start: .after(3), resnapshots: false)
        #expect(after.request == Self.words("CHANGES ns FROM 3"))
        after.connectionStarted()
        #expect(after.handle(Self.message("changes", 3)) == .deliver([]))
        #expect(after.handle(Self.message("change", 4, [.bulk("k".bytes), .bulk("v".bytes)])) == .deliver([Self.change(4, "k", "v")]))

        // FROM 0 of a name used again after a removal starts where its life began, after 0.
        var fromZero = FollowState(namespace: "ns", prefix: [], start: .after(0), resnapshots: false)
        fromZero.connectionStarted()
        #expect(fromZero.handle(Self.message("changes", 2)) == .deliver([]))
        #expect(fromZero.request == Self.words("CHANGES ns FROM 2"))
    }

    @Test("SNAPSHOT is asked for again until a snapshot is complete; a new one's first page is marked first")
    func snapshotRestarts() {
        var s = FollowState(namespace: "ns", prefix: [], start: .snapshot, resnapshots: false)
        #expect(s.request == Self.words("CHANGES ns SNAPSHOT"))
        s.connectionStarted()
        #expect(s.handle(Self.message("changes", 5)) == .deliver([]))
        let page = [Reply.bulk("a".bytes), .bulk("1".bytes)]
        #expect(s.handle(Self.message("snapshot", 5, page))
                == .deliver([.snapshot(SnapshotPage(sequence: 5, entries: [ScanEntry(key: "a".bytes, value: "1".bytes)], isFirst: true))]))
        #expect(s.handle(Self.message("snapshot", 5, [])) == .deliver([.snapshot(SnapshotPage(sequence: 5, entries: [], isFirst: false))]))
        #expect(s.request == Self.words("CHANGES ns SNAPSHOT"), "the connection broke here: the snapshot is incomplete")
        s.connectionStarted()
        #expect(s.handle(Self.message("changes", 8)) == .deliver([]))
        #expect(s.handle(Self.message("snapshot", 8, [])) == .deliver([.snapshot(SnapshotPage(sequence: 8, entries: [], isFirst: true))]))
        #expect(s.handle(Self.message("change", 9, [.bulk("b".bytes), .bulk("2".bytes)])) == .deliver([Self.change(9, "b", "2")]))
        #expect(s.request == Self.words("CHANGES ns FROM 9"))
    }

    @Test("violations: a change not after the last, a second header, another namespace, a change before the header, a bad shape")
    func violations() {
        func fails(_ replies: [Reply], _ what: Comment) {
            var s = FollowState(namespace: "ns", prefix: [], start: .now, resnapshots: false)
            s.connectionStarted()
            var last: FollowState.Step = .deliver([])
            for reply in replies { last = s.handle(reply) }
            guard case .fail(.protocolViolation) = last else { Issue.record(what); return }
        }
        let kv = [Reply.bulk("k".bytes), .bulk("v".bytes)]
        fails([Self.message("changes", 5), Self.message("change", 5, kv)], "a change at the position")
        fails([Self.message("changes", 5), Self.message("change", 7, kv), Self.message("change", 6, kv)], "a change going back")
        fails([Self.message("changes", 5), Self.message("changes", 5)], "a second header")
        fails([Self.message("changes", 5, namespace: "other")], "another namespace")
        fails([Self.message("change", 6, kv)], "a change before the header")
        fails([Self.message("changes", 5), Self.message("snapshot", 5, kv)], "a snapshot page not asked for")
        fails([Self.message("changes", 5), Self.message("change", 6, [.bulk("k".bytes)])], "an odd number of elements")
        fails([.simple("OK")], "a status reply")
    }

    @Test("errors: COMPACTED fails typed, or asks for SNAPSHOT on the same connection; LAGGING, SHUTDOWN and (cluster mode) UNAVAILABLE reconnect; others fail")
    func errors() {
        var s = FollowState(namespace: "ns", prefix: [], start: .after(2), resnapshots: false)
        s.connectionStarted()
        #expect(s.handle(.error("COMPACTED oldest available sequence is 4"))
                == .fail(.compacted(namespace: "ns", requested: 2, oldestAvailable: 4)))

        var mirror = FollowState(namespace: "ns", prefix: [], start: .after(2), resnapshots: true)
        mirror.connectionStarted()
        #expect(mirror.handle(.error("COMPACTED oldest available sequence is 4")) == .resend)
        #expect(mirror.request == Self.words("CHANGES ns SNAPSHOT"))
        #expect(mirror.handle(.error("ERR FROM sequence 9 is after the last sequence of namespace 'ns' (6)")) == .resend)

        var following = FollowState(namespace: "ns", prefix: [], start: .after(2), resnapshots: false)
        following.connectionStarted()
        _ = following.handle(Self.message("changes", 2))
        guard case .reconnect = following.handle(.error("LAGGING resume from sequence 2 of namespace 'ns'")),
              case .reconnect = following.handle(.error("SHUTDOWN the server is shutting down")),
              case .reconnect = following.handle(.error("UNAVAILABLE the change feed lost etcd: no etcd member answered")) else {
            Issue.record("LAGGING, SHUTDOWN and UNAVAILABLE reconnect"); return
        }
        #expect(following.request == Self.words("CHANGES ns FROM 2"))
        #expect(following.handle(.error("BADNS bad name")) == .fail(.server(code: "BADNS", message: "bad name")))
    }
}

// MARK: Helpers

/// Runs `body`, failing with a ``TestFailure`` naming `what` if it takes more than `seconds`
/// (the body's task is cancelled then, which ends a change stream it waits on).
func withDeadline<T: Sendable>(_ what: String, seconds: Double = 30,
                               _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            return nil
        }
        defer { group.cancelAll() }
        guard let result = try await group.next()! else { throw TestFailure("\(what): not within \(seconds) s") }
        return result
    }
}

/// The next event of a stream (within 30 s); a stream that ends is a failure.
func nextEvent<S: AsyncIteratorProtocol & Sendable>(_ iterator: S) async throws -> S.Element where S.Element: Sendable {
    try await withDeadline("the next change event") {
        var copy = iterator  // the iterator is a handle: copies share the stream
        guard let event = try await copy.next() else { throw TestFailure("the change stream ended") }
        return event
    }
}

/// The next `count` changes of a stream (within 30 s), skipping `synced`.
func readChanges(_ iterator: ChangeStream.Iterator, count: Int) async throws -> [ChangeRecord] {
    try await withDeadline("\(count) changes") {
        var copy = iterator
        var changes: [ChangeRecord] = []
        while changes.count < count {
            switch try await copy.next() {
            case .change(let change)?: changes.append(change)
            case .synced?: continue
            case .snapshot?: throw TestFailure("an unexpected snapshot page")
            case nil: throw TestFailure("the change stream ended after \(changes.count) changes")
            }
        }
        return changes
    }
}

/// `SCAN` of `namespace` (keys under `prefix`) as a dictionary.
func scanned(_ kv: ActorKVClient, _ namespace: String, prefix: String) async throws -> [[UInt8]: [UInt8]] {
    var entries: [[UInt8]: [UInt8]] = [:]
    for try await entry in kv.scan(namespace, prefix: prefix, pageSize: 1000) { entries[entry.key] = entry.value }
    return entries
}

/// Writes 1 2 3, compacts, writes 4 5, compacts: with `--changes-history 1`, changes 1 to 3 are
/// gone and the oldest held is 4.
func writeAndCompactTwice(_ kv: ActorKVClient, _ namespace: String) async throws {
    for i in 1...3 { try await kv.put(namespace, "k\(i)", "v\(i)") }
    try await kv.compact(namespace)
    for i in 4...5 { try await kv.put(namespace, "k\(i)", "v\(i)") }
    try await kv.compact(namespace)
}

/// INFO's `connected_clients`.
func connectedClients(_ kv: ActorKVClient) async throws -> Int {
    let line = try await kv.info().split(whereSeparator: \.isNewline).first { $0.hasPrefix("connected_clients:") }
    return Int(line?.split(separator: ":").last ?? "") ?? -1
}

/// Polls `condition` every 10 ms for up to 10 s.
func waitFor(_ what: String, _ condition: () async throws -> Bool) async throws {
    for _ in 0..<1000 {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(10))
    }
    throw TestFailure("\(what): not within 10 s")
}
