import Foundation

/// The path of an executable this package builds (`actorkvd`, `actorkv`, `actorkv-stress`):
/// `$<environment>` if that is set, else the first executable file called `name` among
///
/// - the test binary's directory (symbolic links resolved) and its ancestors, and the
///   `.build/debug` folder in each of them: SwiftPM builds the package's executables next to
///   its tests;
/// - the directory of `Bundle.main`'s executable;
/// - `.build/debug` in the current directory and its ancestors, and in this package's root.
///
/// Throws a ``TestFailure`` that lists where it looked and says what to do when there is none.
public func builtBinary(_ name: String, environment: String) throws -> String {
    let files = FileManager.default
    if let path = ProcessInfo.processInfo.environment[environment], !path.isEmpty {
        guard files.isExecutableFile(atPath: path) else {
            throw TestFailure("\(environment)=\(path) is not an executable file")
        }
        return path
    }
    var candidates: [String] = []
    var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<6 {
        candidates.append(directory.appendingPathComponent(name).path)
        candidates.append(directory.appendingPathComponent(".build/debug/\(name)").path)
        directory.deleteLastPathComponent()
    }
    if let executable = Bundle.main.executableURL?.resolvingSymlinksInPath() {
        candidates.append(executable.deletingLastPathComponent().appendingPathComponent(name).path)
    }
    directory = URL(fileURLWithPath: files.currentDirectoryPath)
    for _ in 0..<4 {
        candidates.append(directory.appendingPathComponent(".build/debug/\(name)").path)
        directory.deleteLastPathComponent()
    }
    candidates.append(PackageFiles.path(".build/debug/\(name)"))
    if let found = candidates.first(where: { files.isExecutableFile(atPath: $0) }) { return found }
    throw TestFailure("cannot find the '\(name)' binary next to the test binary (looked in: "
        + candidates.joined(separator: ", ") + "). Build it first (swift build), or set \(environment) to its path.")
}
