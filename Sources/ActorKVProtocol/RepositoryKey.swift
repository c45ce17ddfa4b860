import Foundation

/// An identifier type that typed repositories can use as a key: it converts to the key bytes
/// stored in the namespace and back. Shared by the embedded `Repository` and the client's
/// `RemoteRepository`, so both store an item under the same key and other languages can read it.
///
/// - String: its UTF-8 bytes.
/// - UUID: its canonical upper-case text, e.g. `E621E1F8-C36C-495A-93FC-0C247A3E6E5F`.
/// - Int: its decimal text, e.g. `42` (so keys sort as text: "10" before "9").
public protocol RepositoryKey: Hashable, Sendable {
    /// The key bytes for this identifier.
    var repositoryKey: [UInt8] { get }
    /// The identifier for key bytes, or nil if they are not one.
    init?(repositoryKey: [UInt8])
}

extension String: RepositoryKey {
    /// The UTF-8 bytes.
    public var repositoryKey: [UInt8] { Array(utf8) }
    /// Decodes UTF-8; nil for invalid UTF-8.
    public init?(repositoryKey: [UInt8]) {
        guard let s = String(validating: repositoryKey, as: UTF8.self) else { return nil }
        self = s
    }
}

extension UUID: RepositoryKey {
    /// The canonical upper-case text.
    public var repositoryKey: [UInt8] { Array(uuidString.utf8) }
    /// Parses UUID text.
    public init?(repositoryKey: [UInt8]) {
        guard let uuid = UUID(uuidString: String(decoding: repositoryKey, as: UTF8.self)) else { return nil }
        self = uuid
    }
}

extension Int: RepositoryKey {
    /// The decimal text.
    public var repositoryKey: [UInt8] { Array(String(self).utf8) }
    /// Parses decimal text.
    public init?(repositoryKey: [UInt8]) {
        guard let n = Int(String(decoding: repositoryKey, as: UTF8.self)) else { return nil }
        self = n
    }
}
