@testable import ActorKVStore
import ActorKVTestSupport
import Foundation

/// Opens crash states with the real recovery code and checks what it recovers against what the
/// log says must be there (``LogHistory``).
///
/// Each state is written out under `scratch`, opened as a data directory, read whole and closed;
/// then a write is made and acknowledged, recording what recovery and the write do to the files,
/// so that a second power loss during or after recovery can be cut from that trace and checked
/// too (``checkSecondCrash(_:)``).
struct CrashCheck {
    /// What one recovery gave.
    struct Recovery {
        /// The namespaces and their states; a namespace recovery refused is in `refused` instead.
        var states: [String: NamespaceState] = [:]
        var refused: [String: StoreError] = [:]
        /// What recovery and then one write (``afterCrashKey`` in ``afterCrashNamespace``) did to
        /// the files, for a second crash.
        var trace: [FileOperationRecorder.Operation] = []
        /// The trace length when that write was acknowledged, and the entry it wrote.
        var acknowledgedAt = 0
        var written: ExpectedEntry?
    }

    /// A crash state that recovery got wrong.
    struct Violation: Error, CustomStringConvertible {
        var description: String
    }

    static let afterCrashNamespace = "config"
    static let afterCrashKey = Array("written-after-recovery".utf8)

    let scratch: String
    let history: LogHistory
    let namespaces: [String]

    /// Writes `image` to a new directory under `scratch` (`root`, its data directory `root/data`),
    /// recovers it, and, if recovery succeeds, writes one key under `always`.
    static func recover(_ image: DiskImage, at root: String) async throws -> Recovery {
        try image.write(to: root)
        let recorder = FileOperationRecorder()
        var options = StoreOptions(durability: .always, compaction: CompactionPolicy(interval: 0),
                                   faults: FaultInjector(recording: recorder))
        options.changesHistory = 16
        options.log = { _ in }
        let store = try Store(directory: root + "/data", options: options)
        var recovery = Recovery()
        recovery.refused = await store.openAll()
        for name in await store.namespaceNames() where recovery.refused[name] == nil {
            guard let namespace = try await store.existingNamespace(name) else { continue }
            recovery.states[name] = PowerLossWorkload.state(of: await namespace.entriesWithLifetimes().entries)
        }
        if recovery.refused[afterCrashNamespace] == nil {
            let namespace = try await store.namespace(afterCrashNamespace)
            let value = Array("after \(root)".utf8)
            try await namespace.put(afterCrashKey, value)
            recovery.acknowledgedAt = recorder.count
            recovery.written = ExpectedEntry(value: value, version: await namespace.sequence)
            recovery.trace = recorder.operations
        }
        _ = await store.close()
        return recovery
    }

    /// Checks a recovery from a crash at trace point `point`: every namespace holds exactly the
    /// state after some prefix of its log sequence that includes every record that had to
    /// survive (ephemeral keys and keys past their deadline gone). In strict mode recovery may
    /// refuse a namespace, naming a file and byte offset in it.
    func check(_ recovery: Recovery, point: Int, strict: Bool, now: UInt64 = WallClock.milliseconds()) throws(Violation) {
        for (name, refusal) in recovery.refused {
            guard strict else { throw Violation(description: "recovery refused namespace \(name): \(refusal)") }
            guard refusal.code == .corrupt, refusal.message.contains("/data/\(name)/"), refusal.message.contains("byte offset") else {
                throw Violation(description: "recovery refused namespace \(name) without naming a file and offset: \(refusal)")
            }
        }
        for name in namespaces where recovery.refused[name] == nil {
            let found = recovery.states[name] ?? [:]
            let required = Int(history.required[point][name] ?? 0)
            let last = (history.states[name]?.count ?? 1) - 1
            guard required <= last else { throw Violation(description: "\(name): required \(required) beyond \(last)") }
            if (required...last).contains(where: { history.visible(name, after: $0, now: now) == found }) { continue }
            throw Violation(description: explain(name, found: found, required: required, last: last, now: now))
        }
    }

    /// A copy of `image` with one bit flipped in the middle of a record that had to survive a crash
    /// at `point` (fsync'd, or acknowledged under `always`) and is still whole in its file there,
    /// and that file's path in the image; nil if there is no such record.
    ///
    /// Left out: a record that, whole, already has the shape of an append the disk did not finish
    /// (``LogScanner/looksUnwritten(_:from:to:base:)``: its share of some sector all zeros, or
    /// zeros at its end) when no later record in the image says it was durable. Damaged, such a
    /// record is what a torn append leaves, and recovery cuts it as one (RELIABILITY.md, "What
    /// recovery cannot tell apart"): the log's format gives nothing to tell the two apart.
    /// `leftOut` counts the records considered and those left out.
    func flippingABit<G: RandomNumberGenerator>(in image: DiskImage, point: Int, root: String, using random: inout G,
                                                leftOut: inout (considered: Int, leftOut: Int)) -> (image: DiskImage, path: String)? {
        var candidates: [(path: String, offset: Int, length: Int)] = []
        for name in namespaces {
            let required = history.required[point][name] ?? 0
            let written = history.written[name] ?? [:]
            for (sequence, record) in written where sequence <= required && record.operation < point {
                let path = String(record.path.dropFirst(root.count + 1))
                guard let file = image.files[path], Self.holds(file, record.bytes, at: record.offset) else { continue }
                let end = record.offset + record.bytes.count
                let shapedLikeATornAppend = file.withUnsafeBytes { LogScanner.looksUnwritten($0, from: record.offset, to: end) }
                leftOut.considered += 1
                if shapedLikeATornAppend && !Self.laterRecordClaimsDurable(sequence, among: written, in: image, root: root) {
                    leftOut.leftOut += 1
                    continue
                }
                candidates.append((path, record.offset, record.bytes.count))
            }
        }
        guard let target = candidates.sorted(by: { ($0.path, $0.offset) < ($1.path, $1.offset) }).randomElement(using: &random) else { return nil }
        var flipped = image
        let at = target.offset + LogRecordCodec.headerLength + Int.random(in: 0..<(target.length - LogRecordCodec.headerLength), using: &random)
        flipped.files[target.path]![at] ^= UInt8(1) << UInt8.random(in: 0...7, using: &random)
        return (flipped, target.path)
    }

    /// Whether `file` holds `bytes` at `offset`.
    private static func holds(_ file: [UInt8], _ bytes: [UInt8], at offset: Int) -> Bool {
        file.count >= offset + bytes.count && file[offset..<offset + bytes.count].elementsEqual(bytes)
    }

    /// Whether a record after `sequence`, whole in `image`, says that `sequence` was durable
    /// when it was written (its ``LogRecord/durableThrough``): then recovery knows damage to
    /// `sequence` for what it is, whatever its shape.
    private static func laterRecordClaimsDurable(_ sequence: UInt64, among written: [UInt64: (operation: Int, path: String, offset: Int, bytes: [UInt8])],
                                                 in image: DiskImage, root: String) -> Bool {
        written.contains { later, record in
            guard later > sequence, let file = image.files[String(record.path.dropFirst(root.count + 1))],
                  holds(file, record.bytes, at: record.offset) else { return false }
            guard case .record(let decoded, _) = record.bytes.withUnsafeBytes({ LogRecordCodec.decode($0, at: 0) }) else { return false }
            return decoded.durableThrough >= sequence
        }
    }

    /// Checks a recovery from a second crash, at `point` of the first recovery's trace: the state
    /// the first recovery gave, and the key written after it — there if the crash came after it was
    /// acknowledged, there or absent if before.
    static func checkSecondCrash(_ second: Recovery, after first: Recovery, point: Int) throws(Violation) {
        // A namespace the first recovery refused (a garbage sector) is refused again, and not written.
        if let (name, refusal) = second.refused.first(where: { first.refused[$0.key] == nil }) {
            throw Violation(description: "a second crash at point \(point) of recovery: namespace \(name) refused: \(refusal)")
        }
        for name in Set(first.states.keys).union(second.states.keys).union([afterCrashNamespace]) where first.refused[name] == nil {
            let state = first.states[name] ?? [:]
            var found = second.states[name] ?? [:]
            if name == afterCrashNamespace, let written = first.written {
                let got = found.removeValue(forKey: afterCrashKey)
                if got != nil && got != written || got == nil && point >= first.acknowledgedAt {
                    throw Violation(description: "a second crash at point \(point) of recovery (acknowledged at \(first.acknowledgedAt)): "
                                    + "the write after recovery is \(got.map(\.description) ?? "missing"), expected \(written)")
                }
            }
            guard found == state else {
                throw Violation(description: "a second crash at point \(point) of recovery changed namespace \(name): "
                                + Self.difference(expected: state, found: found))
            }
        }
    }

    private func explain(_ name: String, found: NamespaceState, required: Int, last: Int, now: UInt64) -> String {
        let newest = Int(found.values.map(\.version).max() ?? 0)
        let closest = min(max(newest, required), last)
        return "namespace \(name) recovered to no prefix of its log from sequence \(required) (every record through it had to survive) to \(last); "
            + "against the state after \(closest): " + Self.difference(expected: history.visible(name, after: closest, now: now), found: found)
    }

    /// The keys missing, extra and different between two states, in words.
    static func difference(expected: NamespaceState, found: NamespaceState) -> String {
        var parts: [String] = []
        for key in Set(expected.keys).union(found.keys).sorted(by: { $0.lexicographicallyPrecedes($1) }) {
            let name = String(decoding: key, as: UTF8.self)
            switch (expected[key], found[key]) {
            case (let e?, nil): parts.append("\(name) missing (expected \(e))")
            case (nil, let f?): parts.append("\(name) should not be there (found \(f))")
            case (let e?, let f?) where e != f: parts.append("\(name) is \(f), expected \(e)")
            default: continue
            }
        }
        return parts.isEmpty ? "no difference" : parts.joined(separator: "; ")
    }
}
