import ActorKVStore

/// The namespaces under the prefix (listing, UNLINK) and the cluster itself: its revision,
/// compaction, the facts INFO shows, and closing.
extension EtcdStore {
    /// The namespaces that hold at least one key, in name order, as a local server lists them
    /// (etcd's order of their keys puts `ns-b/…` before `ns/…`): keys-only ranges, a page of keys
    /// giving the names of as many namespaces as it reaches (``NamespaceNameWalk``).
    public func namespaceNames() async throws(EtcdError) -> [String] {
        var walk = NamespaceNameWalk(prefix: prefix)
        let end = EtcdKeys.rangeEnd(ofPrefix: prefix)
        while let start = walk.start {
            let request = EtcdRequest.range(key: start, rangeEnd: end, limit: walk.limit, keysOnly: true)
            let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
            walk.take(answer.kvs?.map(\.keyBytes) ?? [], more: answer.more ?? false)
        }
        return walk.names.sorted()
    }

    /// The cluster's current revision (WATCH's and CHANGES's sequence).
    public func revision() async throws(EtcdError) -> Int64 {
        let request = EtcdRequest.range(key: prefix, limit: 1, countOnly: true)
        let answer = try await client.call(EtcdResponses.Range.self, request.path, body: request.body, write: false)
        return answer.header?.revisionValue ?? 0
    }

    /// Compacts etcd's history, keeping the last ``changesHistory`` revisions (etcd's history
    /// is the whole cluster's: every namespace's is compacted together). Returns the revision
    /// compacted to (0: nothing to compact).
    @discardableResult
    public func compact() async throws(EtcdError) -> Int64 {
        let target = try await revision() - Int64(changesHistory)
        guard target > 0 else { return 0 }
        let body = Array("{\"revision\":\"\(target)\",\"physical\":false}".utf8)
        do { _ = try await client.call("/v3/kv/compaction", body: body, write: true) } catch where error.message.contains("compacted") {
            return target
        }
        return target
    }

    /// The facts INFO shows about the cluster: members, leader, revision, database size, and
    /// the agent's round-trip time to etcd.
    public func clusterFacts() async -> [(String, String)] {
        var facts: [(String, String)] = [("etcd_endpoints", client.endpoints.map(\.description).joined(separator: ",")),
                                         ("etcd_prefix", String(decoding: prefix, as: UTF8.self))]
        do {
            let status = try await client.call(EtcdResponses.Status.self, "/v3/maintenance/status", body: Array("{}".utf8), write: false)
            let members = try await client.call(EtcdResponses.MemberList.self, "/v3/cluster/member/list", body: Array("{}".utf8), write: false)
            let list = members.members ?? []
            let leader = list.first { $0.ID == status.leader }
            facts += [("etcd_status", "ok"), ("etcd_version", status.version ?? "?"), ("etcd_members", String(list.count)),
                      ("etcd_member_names", list.compactMap(\.name).sorted().joined(separator: ",")),
                      ("etcd_leader", leader?.name ?? status.leader ?? "none"),
                      ("etcd_revision", status.header?.revision ?? "0"), ("etcd_db_size", status.dbSize ?? "0"),
                      ("etcd_answering", client.currentEndpoint.description)]
        } catch {
            facts += [("etcd_status", "unavailable"), ("etcd_error", error.message.split(separator: "\n").joined(separator: " "))]
        }
        let trips = client.statistics
        facts += [("etcd_round_trips", String(trips.count)), ("etcd_latency_mean_us", String(Int(trips.meanMicroseconds))),
                  ("etcd_latency_last_us", String(Int(trips.lastMicroseconds))), ("ephemeral_leases", String(leases.sessionLeaseCount)),
                  ("changes_followers", String(followers.current))]
        return facts
    }

    /// Revokes the leases this agent holds (its ephemeral keys go at once) and stops renewing.
    public func close() async {
        await leases.close()
        client.closeAll()
    }
}
