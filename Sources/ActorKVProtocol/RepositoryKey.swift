import Foundation

/// An identifier type that typed repositories can use as a key: it converts to the key bytes
/// stored in the namespace and back. Shared by the embedded `Repository` and the client's
/// `RemoteRepository`, so both store an item under the same key and other languages can read it.
/// ActorKVStore and ActorKVClient both re-export it (`RepositoryKey` is in scope with either
/// import).
///
/// - String: its UTF-8 bytes, compared byte for byte: no Unicode normalisation, so "é" as one
///   code point (U+00E9) and as "e" + U+0301 are two different keys, though Swift's `==` calls
///   the two strings equal.
/// - UUID: its canonical upper-case text (`uuidString`), e.g. `E621E1F8-C36C-495A-93FC-0C247A3E6E5F`.
///   Python's `str(uuid)` is lower-case: write `str(uuid).upper()`.
/// - Int: its decimal text, e.g. `42` (so keys sort as text: "10" before "9"), no `+` or leading zeros.
///
/// A repository reads an item only from the key its id gives, byte for byte: an item found under
/// any other key (a UUID's lower-case text, JSON whose `id` is another item's) is refused as
/// undecodable, naming the namespace, the key and the item's id. A writer in another language
/// must use the same key text.
///
/// A type of your own conforms by giving its key bytes and parsing them back:
///
///     struct TicketID: Hashable, Codable, RepositoryKey {
///         var number: Int
///         var repositoryKey: [UInt8] { Array("T-\(number)".utf8) }
///         init(number: Int) { self.number = number }
///         init?(repositoryKey: [UInt8]) {
///             let text = String(decoding: repositoryKey, as: UTF8.self)
///             guard text.hasPrefix("T-"), let n = Int(text.dropFirst(2)) else { return nil }
///             number = n
///         }
///     }
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

/// The check both repositories make of an item they read: that it is stored under its own id's
/// key, byte for byte.
package enum RepositoryKeyCheck {
    /// Nil when `key` is `id`'s key; otherwise why not, naming the id and the key it has.
    package static func mismatch<ID: RepositoryKey>(of id: ID, storedUnder key: [UInt8]) -> String? {
        let expected = id.repositoryKey
        guard expected != key else { return nil }
        return "the item's id \(id) has the key '\(String(decoding: expected, as: UTF8.self))', not this one: an item "
            + "must be stored under its id's key, byte for byte (a UUID's upper-case uuidString, a String's UTF-8 "
            + "bytes unnormalised, an Int's decimal text; see RepositoryKey)"
    }
}
