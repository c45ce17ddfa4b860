/// Why a namespace's change feed ended (``ChangeFeed/end(deleting:at:because:)``): what a
/// follower's `-LAGGING` error says after its name.
public enum FeedEnd: Sendable, Equatable {
    /// The namespace was removed (UNLINK, FLUSHALL, or to make room for a new one).
    case removed
    /// RENAME moved its keys to the namespace named.
    case renamed(to: String)
    /// RENAME gave it the keys of the namespace named, dropping its own.
    case replacedByRename(of: String)
    /// COPY gave it a copy of the keys of the namespace named, dropping its own.
    case replacedByCopy(of: String)

    /// The words a follower is told, as in `(the namespace was renamed to 'b')`.
    public var text: String { text(namingOther: true) }

    /// The words a follower is told; the other namespace (a rename's target, a replacement's
    /// source) named only if `namingOther` (a follower who may not read it is not told its name).
    public func text(namingOther: Bool) -> String {
        switch self {
        case .removed: "the namespace was removed"
        case .renamed(let target): namingOther ? "the namespace was renamed to '\(target)'" : "the namespace was renamed"
        case .replacedByRename(let source):
            namingOther ? "the namespace was replaced by '\(source)', renamed to it" : "the namespace was replaced by another, renamed to it"
        case .replacedByCopy(let source):
            namingOther ? "the namespace was replaced by a copy of '\(source)'" : "the namespace was replaced by a copy of another"
        }
    }

    /// The other namespace it names: a rename's target, a replacement's source.
    public var otherNamespace: String? {
        switch self {
        case .removed: nil
        case .renamed(let target): target
        case .replacedByRename(let source), .replacedByCopy(let source): source
        }
    }
}
