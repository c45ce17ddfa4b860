import ActorKVStore
import Dispatch

/// CHANGES through etcd: following a namespace from a revision or a snapshot, the marker that
/// makes deletes visible, WATCH's last change and guard, and etcd's compacted history.
extension EtcdStore {
    /// Starts following `namespace`'s changes (CHANGES) `from` where asked, buffering at most
    /// about `limitBytes` of them, telling `listener` when there are more (``EtcdChangeStream``).
    /// Sequences are etcd revisions. `FROM` a revision etcd has compacted away fails with the
    /// oldest it still has; `SNAPSHOT` reads the namespace's keys at the current revision.
    public func follow(_ namespace: String, from start: FollowFrom, limitBytes: Int, listener: ChangeListener) async throws(EtcdError) -> FollowStart {
        var current = UInt64(try await revision())
        var after = current
        var snapshot: ChangeSnapshot?
        switch start {
        case .now:
            break
        case .snapshot:
            (current, snapshot) = try await self.snapshot(of: namespace, at: current)
            after = current
        case .sequence(let sequence):
            guard sequence <= current else {
                throw EtcdError(.refused, "FROM sequence \(sequence) is after the last sequence (the cluster's revision, \(current))")
            }
            try await checkHeld(after: sequence)
            after = sequence
        }
        let stream = EtcdChangeStream(namespace: namespace, client: client, keyPrefix: etcdKey(namespace, []), marker: marker(of: namespace),
                                      after: after, catchingUp: after < current, limitBytes: limitBytes, listener: listener,
                                      followers: followers)
        stream.start()
        return FollowStart(feed: stream, sequence: after, snapshot: snapshot, namespace: nil)
    }

    /// UNLINK: when namespace `ns` holds a key, deletes all its keys and puts its marker (for
    /// WATCH), in one `txn`; whether it held one. (A namespace is there only while it holds a
    /// key, and revisions are the cluster's: a name used again numbers on from there.)
    public func removeNamespace(_ ns: String) async throws(EtcdError) -> Bool {
        let base = etcdKey(ns, [])
        let end = EtcdKeys.rangeEnd(ofPrefix: base)
        // Every key's mod_revision is 0 only when there is none.
        let txn = EtcdTransaction(compare: [EtcdCompare(key: base, rangeEnd: end, modRevision: 0, less: false)],
                                  failure: [.deleteRange(key: base, rangeEnd: end), markerPut(ns)])
        let answer = try await client.call(EtcdResponses.Txn.self, "/v3/kv/txn", body: txn.body, write: true)
        return answer.succeeded != true
    }

    /// The marker of `namespace` (``WatchUpdate``): `<prefix>ns0`, where its key range ends. Put
    /// (empty) by a CHANGES follower catching up, and with every delete, so that the newest
    /// mod_revision of the namespace's keys and marker shows its last change, deletes included.
    func marker(of namespace: String) -> [UInt8] { EtcdKeys.rangeEnd(ofPrefix: etcdKey(namespace, [])) }

    /// The put of `namespace`'s marker.
    func markerPut(_ namespace: String) -> EtcdRequest { .put(key: marker(of: namespace), value: []) }

    /// The range of `namespace`'s keys and its marker, which WATCH's sequence and guard cover.
    func markedRange(of namespace: String) -> (key: [UInt8], end: [UInt8]) {
        (etcdKey(namespace, []), EtcdKeys.after(marker(of: namespace)))
    }

    /// The revision of `namespace`'s last change (WATCH's sequence): the newest mod_revision of
    /// its keys and its marker (0: none). A key deleted by its lease (an expiry, an ephemeral
    /// key's release) moves no marker: such a delete is not seen here.
    public func lastChange(of namespace: String) async throws(EtcdError) -> UInt64 {
        let range = markedRange(of: namespace)
        let request = EtcdRequest.range(key: range.key, rangeEnd: range.end, limit: 1, newestFirst: true)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return UInt64(answer.kvs?.first?.modRevision ?? 0)
    }

    /// WATCH's guard in a transaction: no key of `namespace`, nor its marker, was written after
    /// revision `sequence`.
    func unchangedSince(_ sequence: UInt64, in namespace: String) -> EtcdCompare {
        let range = markedRange(of: namespace)
        return EtcdCompare(key: range.key, rangeEnd: range.end, modRevision: Int64(sequence) + 1, less: true)
    }

    /// The keys and values of `namespace` at one revision, `revision` first, and that revision.
    /// A large namespace is read a page at a time, all at that revision: when etcd compacts it
    /// before the last page (a COMPACT by another client, or etcd's own), the whole read is
    /// made again at the revision of that moment.
    func snapshot(of namespace: String, at revision: UInt64) async throws(EtcdError) -> (UInt64, ChangeSnapshot) {
        var at = revision
        for _ in 0..<Self.snapshotAttempts {
            do { return (at, ChangeSnapshot(entries: try await entries(of: namespace, at: at))) } catch where error.message.contains("compacted") {
                at = UInt64(try await self.revision())
            }
        }
        throw EtcdError(.unavailable, "etcd compacted its history \(Self.snapshotAttempts) times while the snapshot of \(namespace) was read; try again")
    }

    /// How many times a snapshot is read again when etcd compacts the revision it reads at.
    static let snapshotAttempts = 5

    /// Every key and value of `namespace` as of `revision`, in key order, read a page at a time.
    func entries(of namespace: String, at revision: UInt64) async throws(EtcdError) -> [(key: [UInt8], value: [UInt8])] {
        let base = etcdKey(namespace, [])
        let end = EtcdKeys.rangeEnd(ofPrefix: base)
        var out: [(key: [UInt8], value: [UInt8])] = []
        var start = base
        var limit = Self.firstSnapshotPage
        while true {
            let request = EtcdRequest.range(key: start, rangeEnd: end, limit: limit, revision: Int64(revision))
            let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
            let kvs = answer.kvs ?? []
            var bytes = 0
            for kv in kvs {
                out.append((Array(kv.keyBytes.dropFirst(base.count)), kv.valueBytes))
                bytes += out[out.count - 1].key.count + out[out.count - 1].value.count
            }
            guard answer.more == true, let last = kvs.last else { return out }
            start = EtcdKeys.after(last.keyBytes)
            limit = Self.nextSnapshotPage(after: limit, keys: kvs.count, bytes: bytes)
        }
    }

    /// The keys the first page of a snapshot asks for.
    static let firstSnapshotPage = 1000
    /// The most keys a page of a snapshot asks for.
    static let maxSnapshotPage = 65_536
    /// About the most bytes of keys and values a page of a snapshot asks for.
    static let snapshotPageBytes = 16 << 20

    /// The keys the next page of a snapshot asks for, after a page of `keys` keys holding
    /// `bytes` bytes read with `limit`: twice as many, up to ``maxSnapshotPage`` and to what
    /// ``snapshotPageBytes`` holds at that page's size per key (at least one). etcd 3.4 counts
    /// every key from a page's start to the namespace's end whatever its limit, so pages that
    /// stayed at 1,000 keys made a snapshot's cost grow with the square of the namespace's size.
    static func nextSnapshotPage(after limit: Int, keys: Int, bytes: Int) -> Int {
        let perKey = max(1, bytes / max(1, keys))
        return max(1, min(limit * 2, maxSnapshotPage, snapshotPageBytes / perKey))
    }

    /// Throws ``EtcdError/Kind/compacted(oldest:)`` if etcd no longer holds every revision after
    /// `sequence` (a read as of it fails once it is compacted).
    func checkHeld(after sequence: UInt64) async throws(EtcdError) {
        let request = EtcdRequest.range(key: prefix, limit: 1, countOnly: true, revision: Int64(max(sequence, 1)))
        do { _ = try await client.call(request.path, body: request.body, write: false) } catch where error.message.contains("compacted") {
            let compacted = await compactedRevision()
            throw EtcdError(.compacted(oldest: compacted.map { $0 + 1 } ?? 0), error.message)
        }
    }

    /// The revision etcd's history was last compacted to, which a watch from revision 1 is
    /// canceled with (nil: no answer within the client's timeout).
    func compactedRevision() async -> Int64? {
        let (client, marker) = (self.client, self.marker(of: ""))
        return await withCheckedContinuation { done in
            DispatchQueue.global().async {
                var found: Int64?
                let began = MonotonicClock.seconds()
                var splitter = WatchMessageSplitter()
                let body = EtcdChangeStream.createRequest(marker, marker: marker, from: 1)
                try? client.streamingConnection().stream("/v3/watch", body: body, handle: { chunk in
                    for message in splitter.messages(chunk) {
                        if let decoded = try? EtcdResponses.decode(EtcdResponses.WatchMessage.self, from: message),
                           let compacted = WatchUpdate(decoded, keyPrefix: marker, marker: marker).compactRevision {
                            found = compacted
                            return false
                        }
                    }
                    return true
                }, idle: { MonotonicClock.seconds() - began < client.timeout })
                done.resume(returning: found)
            }
        }
    }
}
