import ActorKVStore

/// What one message of a namespace's etcd watch says, as changes (pure: no I/O).
///
/// The watch covers the namespace's keys, `<prefix>ns/…`, and its marker, `<prefix>ns0` (the
/// end of that range: never a data key, since a namespace name holds no `/`): an empty write
/// the agent makes so that a follower catching up on history learns when it has had all of it
/// (``EtcdChangeStream``), and with every delete (WATCH's guard, ``EtcdStore``). Marker events
/// are no change; their revision still counts.
struct WatchUpdate: Equatable {
    /// The watch was created (the first message): ``headerRevision`` is the revision it started at.
    var created = false
    /// The cluster's revision when etcd sent it.
    var headerRevision: Int64 = 0
    /// The namespace's changes, one per revision, keys without the namespace's prefix.
    var changes: [Change] = []
    /// The revision of its last event, the marker's included (0: none).
    var lastRevision: Int64 = 0
    /// Canceled because the revisions asked for were compacted: the compaction's revision.
    var compactRevision: Int64?
    /// Canceled for another reason (etcd's message).
    var canceledReason: String?

    /// The update `message` carries for the namespace whose keys start with `keyPrefix`.
    init(_ message: EtcdResponses.WatchMessage, keyPrefix: [UInt8], marker: [UInt8]) {
        guard let result = message.result else {
            canceledReason = message.error?.message ?? message.error?.error ?? "the watch ended with an error"
            return
        }
        created = result.created ?? false
        headerRevision = result.header?.revisionValue ?? 0
        if result.canceled == true {
            let compacted = result.compact_revision.flatMap(Int64.init) ?? 0
            if compacted > 0 { compactRevision = compacted } else { canceledReason = result.cancel_reason ?? "etcd canceled the watch" }
        }
        var mutations: [Mutation] = []
        var revision: Int64 = 0
        for event in result.events ?? [] {
            guard let kv = event.kv else { continue }
            if kv.modRevision != revision {
                if !mutations.isEmpty { changes.append(Change(sequence: UInt64(revision), mutations: mutations)) }
                mutations = []
                revision = kv.modRevision
            }
            lastRevision = max(lastRevision, revision)
            let key = kv.keyBytes
            guard key != marker, key.starts(with: keyPrefix) else { continue }
            let stripped = Array(key.dropFirst(keyPrefix.count))
            mutations.append(event.type == "DELETE" ? .delete(key: stripped) : .put(key: stripped, value: kv.valueBytes))
        }
        if !mutations.isEmpty { changes.append(Change(sequence: UInt64(revision), mutations: mutations)) }
    }
}

/// Splits a watch stream's bytes into its messages: etcd's gateway ends each JSON message with a
/// newline, and the stream's chunks need not end where the messages do.
struct WatchMessageSplitter {
    private var pending: [UInt8] = []

    /// The complete messages in `bytes` and what came before them.
    mutating func messages(_ bytes: [UInt8]) -> [[UInt8]] {
        pending.append(contentsOf: bytes)
        var out: [[UInt8]] = []
        var start = 0
        while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
            if end > start { out.append(Array(pending[start..<end])) }
            start = end + 1
        }
        pending.removeFirst(start)
        return out
    }

    /// Bytes of a message not yet complete.
    var pendingBytes: Int { pending.count }
}
