@testable import ActorKVStore
import ActorKVTestSupport
import Testing

/// The crash-state model on small hand-made traces: each rule of what a power loss may leave.
@Suite("Power loss: the crash-state model")
struct CrashModelTests {
    static let root = "/r"

    /// Every image the model allows after `trace`.
    static func images(_ trace: [FileOperationRecorder.Operation], initial: DiskImage = DiskImage()) throws -> Set<DiskImageKey> {
        var model = CrashModel(root: root, initial: initial)
        for operation in trace { try model.apply(operation) }
        var garbage = SeededGenerator(seed: 1)
        return Set(CrashPicks.all(model.dimensions).map { DiskImageKey(model.image($0, garbage: &garbage)) })
    }

    @Test("a file written, fsync'd and its directory fsync'd leaves exactly one state")
    func durable() throws {
        let states = try Self.images([
            .open(path: "/r/f", truncates: false), .write(path: "/r/f", offset: 0, bytes: [1, 2, 3]),
            .sync(path: "/r/f"), .sync(path: "/r"),
        ])
        #expect(states == [DiskImageKey(DiskImage(files: ["f": [1, 2, 3]]))])
    }

    @Test("a file fsync'd whose directory was not may be missing; its data, when there, is whole")
    func entryNotDurable() throws {
        let states = try Self.images([
            .open(path: "/r/f", truncates: false), .write(path: "/r/f", offset: 0, bytes: [1, 2, 3]), .sync(path: "/r/f"),
        ])
        #expect(states == [DiskImageKey(DiskImage()), DiskImageKey(DiskImage(files: ["f": [1, 2, 3]]))])
    }

    @Test("an unsynced append over two sectors: each sector new or not, the size old or new, zeros where not written")
    func sectorsAndSize() throws {
        let old = [UInt8](repeating: 7, count: 100)
        let new = [UInt8](repeating: 9, count: 600)  // bytes 100..<700: the end of sector 0, and sector 1
        let states = try Self.images([.write(path: "/r/f", offset: 100, bytes: new)], initial: DiskImage(files: ["f": old]))
        let sector0 = old + new.prefix(412), zeros0 = old + [UInt8](repeating: 0, count: 412)
        let sector1 = Array(new.suffix(188)), zeros1 = [UInt8](repeating: 0, count: 188)
        #expect(states == Set([
            old,                      // the old size: nothing of the append
            zeros0 + zeros1, sector0 + zeros1, zeros0 + sector1, sector0 + sector1,
        ].map { DiskImageKey(DiskImage(files: ["f": $0])) }))
    }

    @Test("a sector written twice holds its bytes before, or after either write, never the second without the first")
    func sectorVersions() throws {
        let states = try Self.images([
            .write(path: "/r/f", offset: 0, bytes: [1]), .write(path: "/r/f", offset: 1, bytes: [2]),
        ], initial: DiskImage(files: ["f": [0, 0]]))
        #expect(states == Set([[0, 0], [1, 0], [1, 2]].map { DiskImageKey(DiskImage(files: ["f": $0])) }))
    }

    @Test("an unsynced rename is atomic: the old name or the new, never both or neither")
    func rename() throws {
        let states = try Self.images([.rename(from: "/r/tmp", to: "/r/snap")],
                                     initial: DiskImage(files: ["tmp": [1], "snap": [2]]))
        #expect(states == [DiskImageKey(DiskImage(files: ["tmp": [1], "snap": [2]])), DiskImageKey(DiskImage(files: ["snap": [1]]))])
    }

    @Test("a directory made, filled and synced, then renamed: nothing, the directory under its old name, or under its new one, whole")
    func directoryRename() throws {
        let trace: [FileOperationRecorder.Operation] = [
            .mkdir(path: "/r/tmp"), .mkdir(path: "/r/tmp/d"), .open(path: "/r/tmp/d/f", truncates: false),
            .write(path: "/r/tmp/d/f", offset: 0, bytes: [5]), .sync(path: "/r/tmp/d/f"), .sync(path: "/r/tmp/d"),
            .sync(path: "/r/tmp"), .rename(from: "/r/tmp", to: "/r/copy"),
        ]
        let whole = { (name: String) in DiskImageKey(DiskImage(directories: ["", name, name + "/d"], files: [name + "/d/f": [5]])) }
        #expect(try Self.images(trace) == [DiskImageKey(DiskImage()), whole("tmp"), whole("copy")])
        #expect(try Self.images(trace + [.sync(path: "/r")]) == [whole("copy")])
        // A change inside not yet durable when the directory is renamed is not modelled.
        #expect(throws: TestFailure.self) {
            try Self.images([.mkdir(path: "/r/tmp"), .mkdir(path: "/r/tmp/d"), .rename(from: "/r/tmp", to: "/r/copy")])
        }
    }

    @Test("a file in a directory whose mkdir was not made durable goes with it")
    func directory() throws {
        let states = try Self.images([
            .mkdir(path: "/r/d"), .open(path: "/r/d/f", truncates: false), .sync(path: "/r/d"),
        ])
        #expect(states == [DiskImageKey(DiskImage()), DiskImageKey(DiskImage(directories: ["", "d"], files: ["d/f": []]))])
    }

    @Test("a garbage pick fills only that sector, within the file")
    func garbage() throws {
        var model = CrashModel(root: Self.root, initial: DiskImage(files: ["f": [UInt8](repeating: 5, count: 1024)]))
        try model.apply(.write(path: "/r/f", offset: 512, bytes: [UInt8](repeating: 6, count: 512)))
        var random = SeededGenerator(seed: 3)
        let image = model.image(model.dimensions.map { if case .sector = $0 { -1 } else { 0 } }, garbage: &random)
        let file = image.files["f"]!
        #expect(file.count == 1024 && file.prefix(512).allSatisfy { $0 == 5 })
        #expect(!file.suffix(512).allSatisfy { $0 == 5 } && !file.suffix(512).allSatisfy { $0 == 6 })
    }
}

/// A ``DiskImage`` as a set element.
struct DiskImageKey: Hashable, CustomStringConvertible {
    let directories: [String]
    let files: [String: [UInt8]]
    init(_ image: DiskImage) {
        directories = image.directories.sorted()
        files = image.files
    }
    var description: String { "\(directories) \(files.mapValues { $0.count })" }
}
