import ActorKVTestSupport
import Foundation

/// The files and directories under one root, with every file's bytes: what a power loss leaves
/// behind (``CrashModel``), written out to be opened by the real recovery code, or read back.
///
/// Paths are relative to the root, `/`-separated; `""` is the root itself.
struct DiskImage: Equatable, Sendable {
    /// The directories, the root (`""`) among them.
    var directories: Set<String> = [""]
    /// Each file's bytes.
    var files: [String: [UInt8]] = [:]

    /// The directory holding `path` (`""` for a name in the root).
    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    /// Reads everything under `root` (regular files and directories; anything else is skipped).
    static func read(from root: String) throws -> DiskImage {
        var image = DiskImage()
        let manager = FileManager.default
        for relative in try manager.subpathsOfDirectory(atPath: root).sorted() {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory) else { continue }
            if isDirectory.boolValue {
                image.directories.insert(relative)
            } else {
                image.files[relative] = [UInt8](try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative)))
            }
        }
        return image
    }

    /// Creates the image under `root`, which must not exist yet: directories 0700, files 0600
    /// (as the engine makes them; it refuses a data directory others may write to).
    func write(to root: String) throws {
        let manager = FileManager.default
        for directory in directories.sorted() {
            try manager.createDirectory(atPath: directory.isEmpty ? root : root + "/" + directory,
                                        withIntermediateDirectories: directory.isEmpty,
                                        attributes: [.posixPermissions: 0o700])
        }
        for (path, bytes) in files {
            guard manager.createFile(atPath: root + "/" + path, contents: Data(bytes), attributes: [.posixPermissions: 0o600]) else {
                throw TestFailure("cannot create \(root)/\(path)")
            }
        }
    }
}
