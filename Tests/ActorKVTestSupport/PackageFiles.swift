import Foundation

/// The package's own files, for tests that read the documents (protocol.md, README.md) or the
/// fixtures under Tests/Fixtures, wherever the test's file lies in its target's folders.
public enum PackageFiles {
    /// The package's root directory. (This file is <package>/Tests/ActorKVTestSupport/PackageFiles.swift.)
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The path of `relativePath` under the package's root.
    public static func path(_ relativePath: String) -> String {
        root.appendingPathComponent(relativePath).path
    }

    /// The text of the UTF-8 file `relativePath` under the package's root (a document: "protocol.md").
    public static func text(_ relativePath: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(relativePath), encoding: .utf8)
    }
}
