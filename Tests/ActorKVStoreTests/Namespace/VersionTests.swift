import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// Per-key versions: the number of the log record that last wrote a key, kept through restarts,
/// compaction and older snapshots; conditional writes and increments that write nothing when
/// refused.
@Suite("Versions, conditional writes and counters")
struct VersionTests {
    @Test("a key's version is the number of the record that last wrote it; one batch gives all its keys one version")
    func versionsAreRecordNumbers() async throws {
        let dir = TemporaryDirectory("versions")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("v")
            try await ns.put(b("a"), b("1"))                                  // record 1
            try await ns.put(b("b"), b("1"))                                  // record 2
            #expect(try await ns.delete([b("missing")]) == 0)                 // changes nothing: no record
            try await ns.apply([.delete(key: b("missing")), .delete(key: b("gone"))])  // nor this
            try await ns.apply([.put(key: b("a"), value: b("2")), .put(key: b("c"), value: b("3"))])  // record 3
            #expect(await ns.versioned(b("a")) == VersionedValue(value: b("2"), version: 3))
            #expect(await ns.versioned(b("b")) == VersionedValue(value: b("1"), version: 2))
            #expect(await ns.versioned(b("c")) == VersionedValue(value: b("3"), version: 3))
            #expect(await ns.versioned(b("missing")) == nil)
            #expect(try await ns.delete([b("missing"), b("b"), b("b")]) == 1)  // record 4: deletes b, once
            #expect(await ns.currentStatistics().lastSequence == 4)
        }
    }

    @Test("versions survive a restart, a compaction, and a restart after compaction; new writes keep counting up")
    func versionsSurviveRestartAndCompaction() async throws {
        let dir = TemporaryDirectory("versions-restart")
        defer { dir.remove() }
        var expected: [[UInt8]: VersionedValue] = [:]
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("v")
            for i in 0..<50 { try await ns.put(b("k\(i % 20)"), b("\(i)")) }
            _ = try await ns.increment(b("n"), by: 5)
            for i in 0..<20 { expected[b("k\(i)")] = await ns.versioned(b("k\(i)")) }
            expected[b("n")] = await ns.versioned(b("n"))
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("v")
            for (key, value) in expected { #expect(await ns.versioned(key) == value, "after restart: \(String(decoding: key, as: UTF8.self))") }
            try await ns.compact()
            for (key, value) in expected { #expect(await ns.versioned(key) == value, "after compaction") }
        }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("v")
            #expect(await ns.currentStatistics().recordsReplayed == 0, "everything came from the snapshot")
            for (key, value) in expected { #expect(await ns.versioned(key) == value, "after restart from the snapshot") }
            let next = try #require(try await ns.put(b("k0"), b("new"), ifVersion: expected[b("k0")]!.version))
            #expect(next == 52, "50 puts and an increment came before")
        }
    }

    @Test("a format-1 snapshot written before versions opens: its keys take its last sequence, the log's keys their records'")
    func formatOneSnapshotFixtureOpens() async throws {
        let dir = TemporaryDirectory("versions-v1")
        defer { dir.remove() }
        try copyFixture("snapshot-v1", namespace: "config", into: dir.data)
        let snapshot = try readFile(dir.data + "/config/snapshot.json")
        #expect(String(decoding: snapshot, as: UTF8.self).hasPrefix("{\"format\":\"actorkv-snapshot\",\"version\":1,"))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("config")
            #expect(await ns.versioned(b("blob")) == VersionedValue(value: [0, 0xFF, 0x0A], version: 5))
            #expect(await ns.versioned(b("counter")) == VersionedValue(value: b("41"), version: 5))
            #expect(await ns.versioned(b("after")) == VersionedValue(value: b("written after the snapshot"), version: 6))
            #expect(await ns.versioned(b("theme")) == VersionedValue(value: b("light"), version: 7))
            #expect(await ns.count() == 4)
            #expect(try await ns.increment(b("counter")) == 42)
            #expect(await ns.versioned(b("counter"))?.version == 8)
            try await ns.compact()
        }
        let rewritten = String(decoding: try readFile(dir.data + "/config/snapshot.json"), as: UTF8.self)
        #expect(rewritten.hasPrefix("{\"format\":\"actorkv-snapshot\",\"version\":3,"))
        #expect(rewritten.contains("[\"blob\",\"\\u0000\\u00ff\\n\",5]") || rewritten.contains("[\"blob\",{\"base64\":\"AP8K\"},5]"))
        #expect(rewritten.contains("[\"counter\",\"42\",8]"))
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("config")
            #expect(await ns.versioned(b("theme")) == VersionedValue(value: b("light"), version: 7))
            #expect(await ns.versioned(b("blob"))?.version == 5)
        }
    }

    @Test("a conditional put that fails, a failed guard and a refused increment write no record and change nothing")
    func refusedConditionsWriteNothing() async throws {
        let dir = TemporaryDirectory("versions-refused")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("r")
            let first = try #require(try await ns.put(b("k"), b("1"), ifVersion: 0))
            #expect(try await ns.put(b("k"), b("again"), ifVersion: 0) == nil, "0 means absent")
            try await ns.put(b("text"), b("abc"))
            let log = dir.data + "/r/" + segmentFiles(dir.data + "/r").last!
            let length = logLength(log)
            #expect(try await ns.put(b("k"), b("2"), ifVersion: first + 1) == nil)
            #expect(try await ns.apply(steps: [.put(key: b("x"), value: b("1")), .ifVersion(key: b("k"), 99)]) == nil)
            #expect(try await ns.delete(b("k"), ifVersion: 99) == false)
            let notInteger = await storeError { _ = try await ns.increment(b("text")) }
            #expect(notInteger == StoreError(.notAnInteger, "value is not an integer"))
            let inBatch = await storeError { _ = try await ns.apply(steps: [.put(key: b("y"), value: b("1")), .increment(key: b("text"), by: 1)]) }
            #expect(inBatch?.code == .notAnInteger)
            #expect(logLength(log) == length, "nothing refused reached the log")
            #expect(await contents(ns) == [b("k"): b("1"), b("text"): b("abc")])
            #expect(await ns.versioned(b("k"))?.version == first)

            #expect(try await ns.delete(b("k"), ifVersion: first) == true)
            #expect(await ns.get(b("k")) == nil)
            #expect(try await ns.delete(b("k"), ifVersion: 0) == true, "absent, as the guard asks; nothing to remove")
        }
    }

    @Test("increments read only canonical signed 64-bit decimals and refuse overflow", arguments: [
        ("0", 1, "1"), ("-1", 1, "0"), ("41", 1, "42"), ("9223372036854775806", 1, "9223372036854775807"),
        ("-9223372036854775808", 0, "-9223372036854775808"), ("5", -10, "-5"),
    ] as [(String, Int64, String)])
    func incrementArithmetic(stored: String, delta: Int64, expected: String) async throws {
        let dir = TemporaryDirectory("incr")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("i")
            try await ns.put(b("n"), b(stored))
            #expect(try await ns.increment(b("n"), by: delta) == Int64(expected)!)
            #expect(await ns.get(b("n")) == b(expected), "stored as ASCII decimal")
        }
    }

    @Test("values that are not canonical integers, and sums out of range, are refused", arguments: [
        ("", 1, StoreError.Code.notAnInteger), ("007", 1, .notAnInteger), ("+1", 1, .notAnInteger), ("-0", 1, .notAnInteger),
        (" 1", 1, .notAnInteger), ("1 ", 1, .notAnInteger), ("1.5", 1, .notAnInteger), ("9223372036854775808", 1, .notAnInteger),
        ("abc", 1, .notAnInteger), ("9223372036854775807", 1, .overflow), ("-9223372036854775808", -1, .overflow),
    ] as [(String, Int64, StoreError.Code)])
    func incrementRefusals(stored: String, delta: Int64, code: StoreError.Code) async throws {
        let dir = TemporaryDirectory("incr-refused")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let ns = try await store.namespace("i")
            try await ns.put(b("n"), b(stored))
            let error = await storeError { _ = try await ns.increment(b("n"), by: delta) }
            #expect(error?.code == code)
            #expect(await ns.get(b("n")) == b(stored), "unchanged")
        }
    }

    @Test("in a namespace that does not exist: GETV finds nothing, a condition on a version other than 0 fails without creating it, 0 creates it")
    func conditionsInMissingNamespaces() async throws {
        let dir = TemporaryDirectory("versions-missing")
        defer { dir.remove() }
        try await withStore(dir.data) { store in
            let run = await store.execute([.getVersioned(b("k")[...]), .conditionalPut(key: b("k"), value: b("v")[...], ifVersion: 3),
                                           .batch([.ifVersion(key: b("k"), 1), .put(key: b("k"), value: b("v"))])], inNamespace: "ghost")
            #expect(run.outcomes == [.versioned(nil), .conditionFailed, .conditionFailed])
            let guardsOnly = await store.execute([.batch([.ifVersion(key: b("k"), 0), .delete(key: b("k"))])], inNamespace: "ghost")
            #expect(guardsOnly.outcomes == [.batch([.stored, .integer(0)])])
            #expect(await store.namespaceNames().isEmpty, "nothing created")
            let create = await store.execute([.conditionalPut(key: b("k"), value: b("v")[...], ifVersion: 0)], inNamespace: "ghost")
            try await create.durability.wait()
            #expect(create.outcomes == [.version(1)])
            #expect(await store.namespaceNames() == ["ghost"])
        }
    }

    @Test("a snapshot entry's version must be from 1 to lastSequence, and lastSequence must come before the entries")
    func snapshotVersionsAreChecked() throws {
        func document(_ entries: String, lastSequence: Int = 3, sequenceFirst: Bool = true) -> [UInt8] {
            let sequence = "\"lastSequence\":\(lastSequence),"
            let body = "{\"format\":\"actorkv-snapshot\",\"version\":2,\"namespace\":\"n\"," + (sequenceFirst ? sequence : "")
                + "\"createdAt\":0,\"entries\":[\n" + entries + "\n]" + (sequenceFirst ? "" : "," + sequence.dropLast())
            return SnapshotCodecTests.resealed(b(body + ",\"crc32c\":\"00000000\"}\n"))
        }
        #expect(try SnapshotCodec.decode(document("[\"a\",\"1\",1],\n[\"b\",\"2\",3]")).map.versioned(b("b"))?.version == 3)
        for (entries, reason) in [("[\"a\",\"1\",0]", "version 0 is not between 1 and lastSequence 3"),
                                  ("[\"a\",\"1\",4]", "version 4 is not between 1 and lastSequence 3"),
                                  ("[\"a\",\"1\"]", "expected ','")] {
            let failure = try #require(SnapshotCodecTests.failure(document(entries)), "\(entries)")
            #expect(failure.reason.contains(reason), "\(entries): \(failure.reason)")
        }
        let late = try #require(SnapshotCodecTests.failure(document("[\"a\",\"1\",1]", sequenceFirst: false)))
        #expect(late.reason.contains("entries before lastSequence"))
    }
}
