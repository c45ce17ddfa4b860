import ActorKVProtocol
import ActorKVStore

/// The messages of a change stream (protocol.md, "CHANGES"): push messages, which a RESP2
/// connection receives as arrays and a RESP3 one as `>` pushes. Followers of the local engine
/// copy most `change` messages from a shared ``ChangeTape``, written there by
/// ``ChangeMessageEncoder``; these are the messages themselves.
enum ChangeMessages {
    private static let changesWord = Reply.bulk(Array("changes".utf8))
    private static let snapshotWord = Reply.bulk(Array("snapshot".utf8))
    private static let changeWord = Reply.bulk(Array("change".utf8))
    private static let syncedWord = Reply.bulk(Array("synced".utf8))

    /// `changes ns :seq`: the first message, the changes after `sequence` follow.
    static func header(namespace: String, sequence: UInt64) -> Reply {
        .push([changesWord, .bulk(Array(namespace.utf8)), .integer(Int64(sequence))])
    }

    /// `synced ns :seq`: caught up with the live log through `sequence`.
    static func synced(namespace: String, sequence: UInt64) -> Reply {
        .push([syncedWord, .bulk(Array(namespace.utf8)), .integer(Int64(sequence))])
    }

    /// `snapshot ns :S [key value ...]`: one page of the state as of change `sequence`.
    static func snapshot(namespace: String, sequence: UInt64, entries: [KeyValue]) -> Reply {
        .push([snapshotWord, .bulk(Array(namespace.utf8)), .integer(Int64(sequence)), KeyValueCommands.entries(entries)])
    }

    /// The `change` message of `change` for a follower of keys under `prefix`, or nil when it
    /// touches none of them.
    static func message(for change: Change, namespace: String, prefix: [UInt8]) -> Reply? {
        var pairs: [Reply] = []
        forEachPair(in: change, under: prefix) { key, value in
            pairs.append(.bulk(Array(key)))
            pairs.append(value.map { .bulk(Array($0)) } ?? .null)
        }
        guard !pairs.isEmpty else { return nil }
        return .push([changeWord, .bulk(Array(namespace.utf8)), .integer(Int64(change.sequence)), .array(pairs)])
    }

    /// Calls `body`, in order, with each key under `prefix` that `change` writes and its new
    /// value (nil: deleted), borrowed for the call: the pairs of its `change` message. Keys
    /// outside the prefix are passed over, and so is a lifetime (it changes no value).
    @inline(__always)
    static func forEachPair(in change: Change, under prefix: [UInt8], _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer?) -> Void) {
        guard !prefix.isEmpty else { return change.forEachWrite(body) }
        change.forEachWrite { key, value in
            if key.starts(with: prefix) { body(key, value) }
        }
    }
}
