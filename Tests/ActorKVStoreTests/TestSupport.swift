import ActorKVStore
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Shared helpers for the storage engine tests: temporary directories, file surgery, whole-namespace
// reads, and a small deterministic random generator.

/// A fresh directory (mode 0700, from mkdtemp) removed by ``remove()``.
struct TempDir: Sendable {
    let path: String

    init(_ label: String = "t") {
        let template = FileManager.default.temporaryDirectory.path + "/actorkv-\(label)-XXXXXX"
        var bytes = Array(template.utf8CString)
        let made = bytes.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed: \(String(cString: strerror(errno)))")
        path = String(decoding: bytes.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The data directory the store uses inside it.
    var data: String { path + "/data" }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Options for tests: no periodic or size-triggered compaction, so a test compacts only when it
/// says so (other suites arm compaction failpoints).
func testOptions(_ durability: DurabilityPolicy = .always, limits: StoreLimits = StoreLimits(),
                 allowShared: Bool = false) -> StoreOptions {
    StoreOptions(durability: durability, compaction: CompactionPolicy(interval: 0), limits: limits,
                 allowSharedDirectory: allowShared)
}

/// Opens a store, runs `body`, closes it. The store is released when this returns, which frees
/// the directory lock for the next open.
///
/// A `locked` error is retried for a moment: while another test spawns a child process, the
/// child holds copies of all our descriptors (the lock's too) between fork and exec, so a lock
/// just released can still be held for a few milliseconds.
func withStore<T>(_ directory: String, _ options: StoreOptions = testOptions(),
                  _ body: (Store) async throws -> T) async throws -> T {
    let store = try await openStore(directory, options)
    do {
        let result = try await body(store)
        await store.close()
        return result
    } catch {
        await store.close()
        throw error
    }
}

/// Opens a store, retrying `locked` for up to about two seconds (see ``withStore(_:_:_:)``).
func openStore(_ directory: String, _ options: StoreOptions = testOptions()) async throws -> Store {
    var attempts = 0
    while true {
        let result: Result<Store, StoreError>
        do throws(StoreError) { result = .success(try Store(directory: directory, options: options)) } catch {
            result = .failure(error)
        }
        switch result {
        case .failure(let error) where error.code == .locked && attempts < 100:
            attempts += 1
            try await Task.sleep(nanoseconds: 20_000_000)
        default:
            return try result.get()
        }
    }
}

func b(_ s: String) -> [UInt8] { Array(s.utf8) }

/// Every key and value of a namespace, read page by page.
func contents(_ ns: Namespace, pageSize: Int = 1000) async -> [[UInt8]: [UInt8]] {
    var all: [[UInt8]: [UInt8]] = [:]
    var cursor = ScanCursor.start
    repeat {
        let page = await ns.scan(from: cursor, limit: pageSize)
        for e in page.entries { all[e.key] = e.value }
        cursor = page.next
    } while cursor != .start
    return all
}

func readFile(_ path: String) throws -> [UInt8] {
    guard let data = FileManager.default.contents(atPath: path) else {
        throw TestFailure("cannot read \(path)")
    }
    return Array(data)
}

func writeFile(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

func appendFile(_ path: String, _ bytes: [UInt8]) throws {
    guard let handle = FileHandle(forWritingAtPath: path) else { throw TestFailure("cannot open \(path)") }
    defer { try? handle.close() }
    try handle.seekToEnd()
    try handle.write(contentsOf: Data(bytes))
}

func fileExists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

/// Where a log segment's records end: its size, less any zeros reserved ahead of them
/// (-1 if the segment is unreadable).
func logLength(_ path: String) -> Int {
    guard let bytes = try? readFile(path) else { return -1 }
    switch records(in: bytes).end {
    case .clean: return bytes.count
    case .unused(let length), .torn(let length): return length
    case .corrupt: return -1
    }
}

/// Writes `bytes` where a log segment's records end, over zeros reserved there or past the end,
/// as the server's next append would.
func writeAtLogEnd(_ path: String, _ bytes: [UInt8]) throws {
    let end = logLength(path)
    guard end >= 0, let handle = FileHandle(forWritingAtPath: path) else { throw TestFailure("cannot open \(path)") }
    defer { try? handle.close() }
    try handle.seek(toOffset: UInt64(end))
    try handle.write(contentsOf: Data(bytes))
}

func fileSize(_ path: String) -> Int {
    ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? NSNumber)?.intValue ?? -1
}

/// The log segment files of a namespace directory, sorted.
func segmentFiles(_ nsDirectory: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: nsDirectory)) ?? [])
        .filter { $0.hasSuffix(".log") }.sorted().map { nsDirectory + "/" + $0 }
}

/// The records of a log segment's bytes (header first, if it has one) and the file position each
/// starts at; also how the bytes end.
func records(in bytes: [UInt8]) -> (records: [(offset: Int, record: LogRecord)], end: LogScanner.End) {
    var found: [(offset: Int, record: LogRecord)] = []
    let end = bytes.withUnsafeBytes { raw in
        LogScanner.scanSegment(raw) { (record, offset) throws(Never) in found.append((offset, record)) }
    }
    return (found, end)
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// SplitMix64, seeded, so random tests are reproducible.
struct SeededRNG: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
}

/// Awaits `body` and returns the StoreError it throws; records an issue if it throws nothing or
/// something else.
func storeError(_ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async -> StoreError? {
    do {
        try await body()
        Issue.record("expected a StoreError, but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as StoreError {
        return error
    } catch {
        Issue.record("expected a StoreError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// Same for a synchronous call.
func storeErrorSync(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> StoreError? {
    do {
        try body()
        Issue.record("expected a StoreError, but the call succeeded", sourceLocation: sourceLocation)
        return nil
    } catch let error as StoreError {
        return error
    } catch {
        Issue.record("expected a StoreError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

extension Dictionary where Key == [UInt8], Value == [UInt8] {
    /// A readable summary of how two maps differ (first few differences).
    func difference(from expected: [[UInt8]: [UInt8]]) -> String {
        var lines: [String] = []
        func show(_ x: [UInt8]) -> String {
            UTF8Validator.isValid(x) ? "\"\(String(decoding: x.prefix(40), as: UTF8.self))\"" : "\(x.prefix(16))"
        }
        for (k, v) in expected where self[k] != v {
            lines.append(self[k] == nil ? "missing \(show(k))" : "\(show(k)): expected \(show(v)), found \(show(self[k]!))")
        }
        for k in keys where expected[k] == nil { lines.append("unexpected \(show(k))") }
        return "\(lines.count) differences: " + lines.prefix(10).joined(separator: "; ")
    }
}

/// Expects two key-value maps to be equal, reporting a short difference rather than both maps.
func expectSameContents(_ found: [[UInt8]: [UInt8]], _ expected: [[UInt8]: [UInt8]], _ context: String = "",
                        sourceLocation: SourceLocation = #_sourceLocation) {
    if found != expected {
        Issue.record("\(context.isEmpty ? "" : context + ": ")\(found.difference(from: expected))", sourceLocation: sourceLocation)
    }
}
