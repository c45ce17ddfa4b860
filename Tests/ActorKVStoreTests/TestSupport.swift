import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Helpers for the storage engine tests: stores opened for a test, file surgery, whole-namespace
// reads. Temporary directories, the seeded generator and TestFailure come from ActorKVTestSupport.

/// Options for tests: no periodic or size-triggered compaction, so a test compacts only when it
/// says so; `faults` is the store's own fault injector, if the test arms one.
func testOptions(_ durability: DurabilityPolicy = .always, limits: StoreLimits = StoreLimits(),
                 allowShared: Bool = false, faults: FaultInjector? = nil) -> StoreOptions {
    var options = StoreOptions(durability: durability, compaction: CompactionPolicy(interval: 0), limits: limits,
                               allowSharedDirectory: allowShared, faults: faults)
    // Compaction drops every segment it covers, as these tests of it expect, unless a test of
    // change history asks for some to be kept.
    options.changesHistory = 0
    return options
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

/// Copies `Tests/Fixtures/<fixture>/<namespace>`, a namespace an earlier build wrote, into the
/// data directory `data` (created 0700 if need be), as that namespace.
func copyFixture(_ fixture: String, namespace: String, into data: String) throws {
    let source = PackageFiles.path("Tests/Fixtures/\(fixture)/\(namespace)")
    try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    try FileManager.default.copyItem(atPath: source, toPath: data + "/" + namespace)
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

/// Awaits `body` and returns the StoreError it throws; records an issue if it throws nothing or
/// something else.
func storeError(_ body: () async throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) async -> StoreError? {
    await expectError(StoreError.self, body, sourceLocation: sourceLocation)
}

/// Same for a synchronous call.
func storeErrorSync(_ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) -> StoreError? {
    expectErrorSync(StoreError.self, body, sourceLocation: sourceLocation)
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

/// A task executor that keeps the jobs it is given and never runs them: a namespace's sweeper
/// started on it never sweeps. One for the process, never freed, since the tasks parked on it
/// refer to it for as long as they exist.
final class ParkedExecutor: TaskExecutor, @unchecked Sendable {
    static let shared = ParkedExecutor()

    private let parked = NSLock()
    private var jobs: [UnownedJob] = []

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        parked.withLock { jobs.append(unowned) }
    }
}
