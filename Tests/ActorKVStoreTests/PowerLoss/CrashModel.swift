@testable import ActorKVStore
import ActorKVTestSupport

/// What a power loss may leave on disk after a prefix of a recorded trace of file operations.
/// Pure: no I/O.
///
/// Fed the trace operation by operation (``apply(_:)``), it keeps what is durable — file data up
/// to the last fsync of each file, directory entries up to the last fsync of their directory —
/// and what is not yet. A crash state is the durable state plus a choice for each unsynced part,
/// each made independently (``dimensions``, ``image(_:)``):
///
/// - each 512-byte sector written since its file's last fsync holds the bytes it had at any
///   moment since: before the first of those writes (its durable bytes), or just after any one
///   of them (sector-atomic writeback, in any order within and across files: the model of ALICE
///   and RocksDB's FaultInjectionTestFS); in the strict mode it may instead hold garbage, a sector
///   torn mid-write (SQLite's crash-test VFS);
/// - a file's size is its durable size or any size it had since (after an extend, the new tail
///   reads as zeros where its sectors were not written back);
/// - each create, rename (atomic), unlink and mkdir since its directory's last fsync is kept or
///   not, independently; the kept ones are applied in trace order, a rename of a file whose
///   creation was not kept is a no-op, and an entry in a directory whose own entry was not kept
///   is unreachable. A directory renamed moves with everything in it; the model refuses a trace
///   that renames one holding changes not yet durable (a backup syncs everything first).
///
/// Paths in the trace are absolute; they are taken relative to `root`.
struct CrashModel {
    /// The unit of writeback.
    static let sectorSize = 512

    /// A file's contents: durable, as the process sees them, and the writeback choices between.
    struct Inode {
        var durable: [UInt8]
        var current: [UInt8]
        /// For each sector written since the last fsync, its bytes after each such write.
        var sectorVersions: [Int: [[UInt8]]] = [:]
        /// The sizes the file had after each size-changing operation since the last fsync.
        var sizes: [Int] = []
        /// Its path as last seen, to describe choices.
        var path: String
    }

    /// A change to a directory entry that is not yet durable.
    enum EntryChange: Equatable {
        case link(path: String, inode: Int)
        case rename(from: String, to: String)
        case unlink(path: String)
        case mkdir(path: String)

        /// The directory whose fsync makes it durable.
        var directory: String {
            switch self {
            case .link(let path, _), .unlink(let path), .mkdir(let path): return DiskImage.parent(of: path)
            case .rename(_, let to): return DiskImage.parent(of: to)
            }
        }
    }

    /// Names of files and directories, resolved to inodes.
    struct Tree: Equatable {
        var directories: Set<String> = [""]
        var files: [String: Int] = [:]

        /// Applies `change`; a rename of a name that is not there does nothing, and a directory's
        /// takes everything under it along. An entry whose directory is missing is kept (it
        /// becomes reachable if the directory's own entry does).
        mutating func apply(_ change: EntryChange) {
            switch change {
            case .link(let path, let inode):
                files[path] = inode
            case .rename(let from, let to):
                if let inode = files[from] {
                    files[from] = nil
                    files[to] = inode
                } else if directories.contains(from) {
                    directories = Set(directories.map { CrashModel.moved($0, from: from, to: to) })
                    files = Dictionary(uniqueKeysWithValues: files.map { (CrashModel.moved($0.key, from: from, to: to), $0.value) })
                }
            case .unlink(let path):
                files[path] = nil
            case .mkdir(let path):
                directories.insert(path)
            }
        }

        /// Whether every directory above `path` is there.
        func reaches(_ path: String) -> Bool {
            var parent = DiskImage.parent(of: path)
            while !parent.isEmpty {
                guard directories.contains(parent) else { return false }
                parent = DiskImage.parent(of: parent)
            }
            return true
        }
    }

    /// One independent choice a crash makes. Choice 0 is always "nothing after the last fsync".
    enum Dimension: Equatable {
        /// A sector of an inode: 0 its durable bytes, `k` its bytes after the `k`th unsynced write
        /// (1 ... `versions`); in strict mode also `-1`, garbage.
        case sector(inode: Int, index: Int, versions: Int)
        /// A file's size: 0 the durable one, `k` the `k`th since (1 ... `versions`).
        case size(inode: Int, versions: Int)
        /// An unsynced directory entry change, the trace operation `operation`: 0 lost, 1 kept.
        case entry(operation: Int)

        /// How many choices it has, garbage not counted.
        var choices: Int {
            switch self {
            case .sector(_, _, let versions), .size(_, let versions): return versions + 1
            case .entry: return 2
            }
        }
    }

    let root: String
    private(set) var inodes: [Int: Inode] = [:]
    private(set) var durableTree = Tree()
    /// The tree as the process sees it.
    private(set) var tree = Tree()
    private(set) var pendingEntries: [(operation: Int, change: EntryChange)] = []
    /// How many trace operations have been applied: the crash point this model describes.
    private(set) var point = 0
    private var nextInode = 1

    /// The model of a disk holding `initial` (all of it durable) under `root`.
    init(root: String, initial: DiskImage = DiskImage()) {
        self.root = root
        durableTree.directories = initial.directories
        for (path, bytes) in initial.files.sorted(by: { $0.key < $1.key }) {
            durableTree.files[path] = nextInode
            inodes[nextInode] = Inode(durable: bytes, current: bytes, path: path)
            nextInode += 1
        }
        tree = durableTree
    }

    /// `path` relative to the root.
    func relative(_ path: String) throws -> String {
        if path == root { return "" }
        guard path.hasPrefix(root + "/") else { throw TestFailure("the trace touches \(path), outside \(root)") }
        return String(path.dropFirst(root.count + 1))
    }

    /// Carries out the next operation of the trace.
    mutating func apply(_ operation: FileOperationRecorder.Operation) throws {
        defer { point += 1 }
        switch operation {
        case .open(let path, let truncates):
            let name = try relative(path)
            if let inode = tree.files[name] {
                if truncates { resize(inode, to: 0) }
            } else {
                let inode = nextInode
                nextInode += 1
                inodes[inode] = Inode(durable: [], current: [], path: name)
                change(.link(path: name, inode: inode))
            }
        case .write(let path, let offset, let bytes):
            write(bytes, at: offset, to: try inode(at: path))
        case .truncate(let path, let length):
            resize(try inode(at: path), to: length)
        case .sync(let path):
            let name = try relative(path)
            if tree.directories.contains(name) {
                syncDirectory(name)
            } else {
                let inode = try self.inode(at: path)
                inodes[inode]!.durable = inodes[inode]!.current
                inodes[inode]!.sectorVersions = [:]
                inodes[inode]!.sizes = []
            }
        case .rename(let from, let to):
            let (old, new) = (try relative(from), try relative(to))
            if let inode = tree.files[old] {
                inodes[inode]!.path = new
            } else if tree.directories.contains(old) {
                // Changes inside that are not durable yet would be made so by an fsync of a
                // directory under its old name, which this model does not follow.
                if let inside = pendingEntries.first(where: { Self.moved($0.change.directory, from: old, to: new) != $0.change.directory }) {
                    throw TestFailure("the trace renames the directory \(old) while \(inside.change) in it is not durable: not modelled")
                }
                for (id, inode) in inodes { inodes[id]!.path = Self.moved(inode.path, from: old, to: new) }
            }
            change(.rename(from: old, to: new))
        case .unlink(let path):
            let name = try relative(path)
            if tree.files[name] != nil { change(.unlink(path: name)) }
        case .mkdir(let path):
            change(.mkdir(path: try relative(path)))
        }
    }

    /// `path` with the directory `from` (itself, or as a prefix) renamed to `to`.
    static func moved(_ path: String, from: String, to: String) -> String {
        path == from ? to : path.hasPrefix(from + "/") ? to + path.dropFirst(from.count) : path
    }

    private func inode(at path: String) throws -> Int {
        guard let inode = tree.files[try relative(path)] else { throw TestFailure("the trace writes to \(path), which does not exist") }
        return inode
    }

    private mutating func change(_ change: EntryChange) {
        tree.apply(change)
        pendingEntries.append((point, change))
    }

    private mutating func syncDirectory(_ directory: String) {
        for pending in pendingEntries where pending.change.directory == directory {
            durableTree.apply(pending.change)
        }
        pendingEntries.removeAll { $0.change.directory == directory }
    }

    private mutating func write(_ bytes: [UInt8], at offset: Int, to inode: Int) {
        guard !bytes.isEmpty else { return }
        var file = inodes[inode]!
        let oldSize = file.current.count
        if file.current.count < offset + bytes.count { file.current += [UInt8](repeating: 0, count: offset + bytes.count - file.current.count) }
        file.current.replaceSubrange(offset..<offset + bytes.count, with: bytes)
        for sector in offset / Self.sectorSize...(offset + bytes.count - 1) / Self.sectorSize {
            file.sectorVersions[sector, default: []].append(Self.sector(sector, of: file.current))
        }
        if file.current.count != oldSize { file.sizes.append(file.current.count) }
        inodes[inode] = file
    }

    private mutating func resize(_ inode: Int, to length: Int) {
        var file = inodes[inode]!
        let oldSize = file.current.count
        guard length != oldSize else { return }
        if length < oldSize {
            file.current.removeSubrange(length...)
            // The sectors the cut reaches now read as zeros past `length`.
            for sector in length / Self.sectorSize...(oldSize - 1) / Self.sectorSize {
                file.sectorVersions[sector, default: []].append(Self.sector(sector, of: file.current))
            }
        } else {
            file.current += [UInt8](repeating: 0, count: length - oldSize)
        }
        file.sizes.append(length)
        inodes[inode] = file
    }

    /// The bytes of sector `index` of `bytes`, zero-padded to a whole sector.
    static func sector(_ index: Int, of bytes: [UInt8]) -> [UInt8] {
        let start = index * sectorSize
        var sector = start < bytes.count ? Array(bytes[start..<min(bytes.count, start + sectorSize)]) : []
        sector += [UInt8](repeating: 0, count: sectorSize - sector.count)
        return sector
    }

    // MARK: - Crash states

    /// The independent choices a power loss at this point makes, in a fixed order.
    var dimensions: [Dimension] {
        var result: [Dimension] = []
        for (id, inode) in inodes.sorted(by: { $0.key < $1.key }) {
            for (index, versions) in inode.sectorVersions.sorted(by: { $0.key < $1.key }) {
                result.append(.sector(inode: id, index: index, versions: versions.count))
            }
            if !inode.sizes.isEmpty { result.append(.size(inode: id, versions: inode.sizes.count)) }
        }
        for pending in pendingEntries { result.append(.entry(operation: pending.operation)) }
        return result
    }

    /// The disk a power loss leaves when it makes choice `picks[i]` for `dimensions[i]`.
    /// A garbage sector (`-1`) is filled from `garbage`.
    func image<G: RandomNumberGenerator>(_ picks: [Int], garbage: inout G) -> DiskImage {
        let dimensions = self.dimensions
        precondition(picks.count == dimensions.count, "one pick per dimension")
        var kept = durableTree
        var sizes: [Int: Int] = [:]
        var sectors: [Int: [(index: Int, pick: Int)]] = [:]
        var keptEntries = Set<Int>()
        for (dimension, pick) in zip(dimensions, picks) {
            switch dimension {
            case .sector(let inode, let index, _): sectors[inode, default: []].append((index, pick))
            case .size(let inode, _): sizes[inode] = pick
            case .entry(let operation): if pick == 1 { keptEntries.insert(operation) }
            }
        }
        for pending in pendingEntries where keptEntries.contains(pending.operation) { kept.apply(pending.change) }
        var image = DiskImage(directories: kept.directories.filter { kept.reaches($0) })
        for (path, id) in kept.files where kept.reaches(path) {
            image.files[path] = contents(of: id, size: sizes[id] ?? 0, sectors: sectors[id] ?? [], garbage: &garbage)
        }
        return image
    }

    private func contents<G: RandomNumberGenerator>(of id: Int, size pick: Int, sectors: [(index: Int, pick: Int)],
                                                    garbage: inout G) -> [UInt8] {
        let inode = inodes[id]!
        let size = pick == 0 ? inode.durable.count : inode.sizes[pick - 1]
        var bytes = Array(inode.durable.prefix(size))
        bytes += [UInt8](repeating: 0, count: size - bytes.count)
        for (index, pick) in sectors where pick != 0 {
            let start = index * Self.sectorSize
            guard start < size else { continue }
            let end = min(size, start + Self.sectorSize)
            if pick < 0 {
                for i in start..<end { bytes[i] = UInt8.random(in: 0...255, using: &garbage) }
            } else {
                bytes.replaceSubrange(start..<end, with: inode.sectorVersions[index]![pick - 1].prefix(end - start))
            }
        }
        return bytes
    }

    /// Says in words what `picks` chose, leaving out the choices of nothing unsynced (0).
    func describe(_ picks: [Int]) -> String {
        var parts: [String] = []
        for (dimension, pick) in zip(dimensions, picks) where pick != 0 {
            switch dimension {
            case .sector(let inode, let index, let versions):
                parts.append("\(inodes[inode]!.path) sector \(index) (bytes \(index * Self.sectorSize)…): "
                             + (pick < 0 ? "garbage" : "after unsynced write \(pick) of \(versions)"))
            case .size(let inode, let versions):
                parts.append("\(inodes[inode]!.path) size \(inodes[inode]!.sizes[pick - 1]) (change \(pick) of \(versions))")
            case .entry(let operation):
                let change = pendingEntries.first { $0.operation == operation }!.change
                parts.append("kept #\(operation) \(change)")
            }
        }
        return parts.isEmpty ? "only what was fsync'd" : parts.joined(separator: "; ")
    }
}
