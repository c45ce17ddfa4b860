import ActorKVStore
import Foundation

/// etcd's JSON gateway answers, as far as the agent reads them. etcd writes 64-bit integers as
/// decimal strings and leaves out fields at their zero value.
enum EtcdResponses {
    struct Header: Decodable {
        var revision: String?
        var member_id: String?
        var raft_term: String?
        var revisionValue: Int64 { revision.flatMap(Int64.init) ?? 0 }
    }

    struct KeyValue: Decodable {
        var key: String
        var value: String?
        var mod_revision: String?
        var create_revision: String?
        var lease: String?

        var keyBytes: [UInt8] { Base64.decode(Array(key.utf8)) ?? [] }
        var valueBytes: [UInt8] { value.flatMap { Base64.decode(Array($0.utf8)) } ?? [] }
        var modRevision: Int64 { mod_revision.flatMap(Int64.init) ?? 0 }
        var leaseID: Int64 { lease.flatMap(Int64.init) ?? 0 }
    }

    struct Range: Decodable {
        var header: Header?
        var kvs: [KeyValue]?
        var count: String?
        var more: Bool?
        var countValue: Int { count.flatMap(Int.init) ?? 0 }
    }

    struct Put: Decodable {
        var header: Header?
        var prev_kv: KeyValue?
    }

    struct DeleteRange: Decodable {
        var header: Header?
        var deleted: String?
        var deletedValue: Int { deleted.flatMap(Int.init) ?? 0 }
    }

    struct ResponseOp: Decodable {
        var response_range: Range?
        var response_put: Put?
        var response_delete_range: DeleteRange?
    }

    struct Txn: Decodable {
        var header: Header?
        var succeeded: Bool?
        var responses: [ResponseOp]?
    }

    struct LeaseGrant: Decodable {
        var ID: String?
        var TTL: String?
        var error: String?
    }

    struct LeaseKeepAlive: Decodable {
        struct Result: Decodable {
            var ID: String?
            var TTL: String?
        }
        var result: Result?
        var error: Error?
    }

    struct LeaseTimeToLive: Decodable {
        var ID: String?
        var TTL: String?
    }

    struct Status: Decodable {
        var header: Header?
        var version: String?
        var dbSize: String?
        var leader: String?
        var raftIndex: String?
        var raftTerm: String?
    }

    struct Member: Decodable {
        var ID: String?
        var name: String?
        var clientURLs: [String]?
    }

    struct MemberList: Decodable {
        var members: [Member]?
    }

    struct Error: Decodable {
        var error: String?
        var message: String?
        var code: Int?
    }

    struct Compaction: Decodable {
        var header: Header?
    }

    /// A watch stream's message.
    struct WatchMessage: Decodable {
        struct Result: Decodable {
            var header: Header?
            var created: Bool?
            var canceled: Bool?
            var compact_revision: String?
            var cancel_reason: String?
            var events: [Event]?
        }
        struct Event: Decodable {
            var type: String?
            var kv: KeyValue?
        }
        var result: Result?
        var error: Error?
    }

    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws(EtcdError) -> T {
        do { return try JSONDecoder().decode(type, from: Data(body)) } catch {
            throw EtcdError(.refused, "etcd's answer could not be read: \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
    }
}
