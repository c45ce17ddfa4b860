@testable import ActorKVEtcd
@testable import ActorKVStore
import Foundation
import Synchronization
import Testing

/// `CHANGES … SNAPSHOT` in cluster mode, against a fake member: a snapshot is read a page at a
/// time at one revision, and etcd may compact that revision before the last page.
@Suite struct EtcdSnapshotTests {
    /// A range answer holding `keys` (etcd keys) with value "v", at header `revision`.
    private static func range(_ keys: [String], revision: Int, more: Bool) -> FakeMember.Action {
        let kvs = keys.map { #"{"key":"\#(Data($0.utf8).base64EncodedString())","value":"dg==","mod_revision":"5"}"# }
        return .answer(200, Array(#"{"header":{"revision":"\#(revision)"},"kvs":[\#(kvs.joined(separator: ","))],"more":\#(more)}"#.utf8))
    }

    @Test("a revision compacted between two pages of a snapshot: the snapshot is read again, whole, at the new revision")
    func compactedBetweenPages() async throws {
        let revisionsAsked = Atomic<Int>(0)
        let member = try FakeMember(requests: { _, request in
            let json = request.json
            switch (request.path, json["count_only"] as? Bool, json["revision"] as? String) {
            case ("/v3/kv/range", true?, _):  // the current revision: 10, then (compacted meanwhile) 20
                let revision = revisionsAsked.add(1, ordering: .relaxed).oldValue == 0 ? 10 : 20
                return .answer(200, Array(#"{"header":{"revision":"\#(revision)"},"count":"0"}"#.utf8))
            case ("/v3/kv/range", _, "10"):
                let key = String(decoding: Data(base64Encoded: json["key"] as? String ?? "") ?? Data(), as: UTF8.self)
                if key == "p/ns/" { return Self.range(["p/ns/a"], revision: 10, more: true) }
                return .answer(400, Array(#"{"error":"etcdserver: mvcc: required revision has been compacted","code":11,"message":"etcdserver: mvcc: required revision has been compacted"}"#.utf8))
            case ("/v3/kv/range", _, "20"):
                return Self.range(["p/ns/a", "p/ns/b"], revision: 20, more: false)
            default:  // the watch that follows: refused, the follower is removed below
                return .answer(503, Array(#"{"error":"x","code":14,"message":"x"}"#.utf8))
            }
        })
        let store = EtcdStore(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), prefix: "p/")
        let start = try await store.follow("ns", from: .snapshot, limitBytes: 1 << 20, listener: ChangeListener())
        start.feed.removeFollower()
        #expect(start.sequence == 20)
        #expect(start.snapshot?.map.entries(after: nil, prefix: [], limit: 10).map { String(decoding: $0.key, as: UTF8.self) } == ["a", "b"])
        #expect(revisionsAsked.load(ordering: .relaxed) == 2)
    }

    @Test("a snapshot's pages double, up to 65,536 keys and about 16 MiB of keys and values a page")
    func pageSizes() {
        #expect(EtcdStore.nextSnapshotPage(after: 1000, keys: 1000, bytes: 20_000) == 2000)
        var limit = EtcdStore.firstSnapshotPage
        for _ in 0..<10 { limit = EtcdStore.nextSnapshotPage(after: limit, keys: limit, bytes: limit * 30) }
        #expect(limit == EtcdStore.maxSnapshotPage)
        // 1 MiB values: 16 to a page.
        #expect(EtcdStore.nextSnapshotPage(after: 1000, keys: 1000, bytes: 1000 << 20) == 16)
        // A value larger than the page's bytes: one at a time.
        #expect(EtcdStore.nextSnapshotPage(after: 16, keys: 1, bytes: 32 << 20) == 1)
        #expect(EtcdStore.nextSnapshotPage(after: 4, keys: 0, bytes: 0) == 8)
    }
}
