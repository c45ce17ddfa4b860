import ActorKVProtocol
import ActorKVStore

/// The messages of a change stream (protocol.md, "CHANGES"): push messages, which a RESP2
/// connection receives as arrays and a RESP3 one as `>` pushes. Also a cache of the encoded
/// `change` messages that followers without a prefix share: with a thousand followers of one
/// namespace, each change is encoded once per protocol version, not a thousand times. Owned by
/// the event loop thread.
struct ChangeMessages {
    private static let changesWord = Reply.bulk(Array("changes".utf8))
    private static let snapshotWord = Reply.bulk(Array("snapshot".utf8))
    private static let changeWord = Reply.bulk(Array("change".utf8))
    private static let syncedWord = Reply.bulk(Array("synced".utf8))
    /// A change message at most this large is encoded once and shared; a larger one is queued
    /// as an array, which the reply stream writes a piece at a time.
    static let sharedLimit = 64 * 1024
    /// How many encoded changes the cache keeps per namespace before it forgets the older half.
    static let cacheLimit = 4096

    /// Per namespace, the encoded messages by sequence, RESP2's and RESP3's.
    private var encoded: [String: [UInt64: Encoded]] = [:]

    private struct Encoded {
        var resp2: Reply?
        var resp3: Reply?

        subscript(version: RESPVersion) -> Reply? {
            get { version == .resp2 ? resp2 : resp3 }
            set { if version == .resp2 { resp2 = newValue } else { resp3 = newValue } }
        }
    }

    /// `changes ns :seq`: the first message, the changes after `sequence` follow.
    static func header(namespace: String, sequence: UInt64) -> Reply {
        .push([changesWord, .bulk(Array(namespace.utf8)), .integer(Int64(sequence))])
    }

    /// `synced ns :seq`: caught up with the live log through `sequence`.
    static func synced(namespace: String, sequence: UInt64) -> Reply {
        .push([syncedWord, .bulk(Array(namespace.utf8)), .integer(Int64(sequence))])
    }

    /// `snapshot ns :S [key value ...]`: one page of the state as of change `sequence`.
    static func snapshot(namespace: String, sequence: UInt64, entries: [(key: [UInt8], value: [UInt8])]) -> Reply {
        var pairs: [Reply] = []
        pairs.reserveCapacity(entries.count * 2)
        for entry in entries {
            pairs.append(.bulk(entry.key))
            pairs.append(.bulk(entry.value))
        }
        return .push([snapshotWord, .bulk(Array(namespace.utf8)), .integer(Int64(sequence)), .array(pairs)])
    }

    /// The `change` message of `change` for a follower of keys under `prefix` on a connection
    /// speaking `version`, or nil when it touches none of them.
    mutating func message(for change: Change, namespace: String, prefix: [UInt8], version: RESPVersion) -> Reply? {
        guard prefix.isEmpty else { return Self.message(for: change, namespace: namespace, prefix: prefix) }
        if let cached = encoded[namespace]?[change.sequence]?[version] { return cached }
        guard let message = Self.message(for: change, namespace: namespace, prefix: []) else { return nil }
        guard change.byteSize <= Self.sharedLimit else { return message }
        let shared = Reply.raw(message.encoded(in: version))
        remember(shared, for: change.sequence, in: namespace, version: version)
        return shared
    }

    /// Forgets a namespace's encoded changes (nobody here follows it any more).
    mutating func forget(_ namespace: String) {
        encoded[namespace] = nil
    }

    private mutating func remember(_ message: Reply, for sequence: UInt64, in namespace: String, version: RESPVersion) {
        if let count = encoded[namespace]?.count, count >= Self.cacheLimit {
            let keep = sequence > UInt64(Self.cacheLimit / 2) ? sequence - UInt64(Self.cacheLimit / 2) : 0
            encoded[namespace] = encoded[namespace]!.filter { $0.key >= keep }
        }
        encoded[namespace, default: [:]][sequence, default: Encoded()][version] = message
    }

    private static func message(for change: Change, namespace: String, prefix: [UInt8]) -> Reply? {
        var pairs: [Reply] = []
        for mutation in change.mutations {
            switch mutation {
            case .put(let key, let value) where key.starts(with: prefix):
                pairs.append(.bulk(key))
                pairs.append(.bulk(value))
            case .delete(let key) where key.starts(with: prefix):
                pairs.append(.bulk(key))
                pairs.append(.null)
            case .put, .delete, .lifetime:  // outside the prefix; a lifetime changes no value
                continue
            }
        }
        guard !pairs.isEmpty else { return nil }
        return .push([changeWord, .bulk(Array(namespace.utf8)), .integer(Int64(change.sequence)), .array(pairs)])
    }
}
