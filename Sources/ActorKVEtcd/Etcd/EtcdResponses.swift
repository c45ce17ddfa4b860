import ActorKVStore

/// etcd's JSON gateway answers, as far as the agent reads them (``JSONValue``). etcd writes
/// 64-bit integers as decimal strings and leaves out fields at their zero value.
enum EtcdResponses {
    struct Header: JSONReadable {
        var revision: String?
        var member_id: String?
        var raft_term: String?
        var revisionValue: Int64 { revision.flatMap(Int64.init) ?? 0 }

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("header")
            revision = try o.string("revision")
            member_id = try o.string("member_id")
            raft_term = try o.string("raft_term")
        }
    }

    struct KeyValue: JSONReadable {
        var key: String
        var value: String?
        var mod_revision: String?
        var create_revision: String?
        var lease: String?

        var keyBytes: [UInt8] { Base64.decode(Array(key.utf8)) ?? [] }
        var valueBytes: [UInt8] { value.flatMap { Base64.decode(Array($0.utf8)) } ?? [] }
        var modRevision: Int64 { mod_revision.flatMap(Int64.init) ?? 0 }
        var leaseID: Int64 { lease.flatMap(Int64.init) ?? 0 }

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("kv")
            guard let key = try o.string("key") else { throw JSONValue.Mismatch(description: "kv.key is missing") }
            self.key = key
            value = try o.string("value")
            mod_revision = try o.string("mod_revision")
            create_revision = try o.string("create_revision")
            lease = try o.string("lease")
        }
    }

    struct Range: JSONReadable {
        var header: Header?
        var kvs: [KeyValue]?
        var count: String?
        var more: Bool?
        var countValue: Int { count.flatMap(Int.init) ?? 0 }

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("range")
            header = try o.read("header")
            kvs = try o.array("kvs")
            count = try o.string("count")
            more = try o.bool("more")
        }
    }

    struct Put: JSONReadable {
        var header: Header?
        var prev_kv: KeyValue?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("put")
            header = try o.read("header")
            prev_kv = try o.read("prev_kv")
        }
    }

    struct DeleteRange: JSONReadable {
        var header: Header?
        var deleted: String?
        var deletedValue: Int { deleted.flatMap(Int.init) ?? 0 }

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("delete_range")
            header = try o.read("header")
            deleted = try o.string("deleted")
        }
    }

    struct ResponseOp: JSONReadable {
        var response_range: Range?
        var response_put: Put?
        var response_delete_range: DeleteRange?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("response")
            response_range = try o.read("response_range")
            response_put = try o.read("response_put")
            response_delete_range = try o.read("response_delete_range")
        }
    }

    struct Txn: JSONReadable {
        var header: Header?
        var succeeded: Bool?
        var responses: [ResponseOp]?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("txn")
            header = try o.read("header")
            succeeded = try o.bool("succeeded")
            responses = try o.array("responses")
        }
    }

    struct LeaseGrant: JSONReadable {
        var ID: String?
        var TTL: String?
        var error: String?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("lease grant")
            ID = try o.string("ID")
            TTL = try o.string("TTL")
            error = try o.string("error")
        }
    }

    struct LeaseKeepAlive: JSONReadable {
        struct Result: JSONReadable {
            var ID: String?
            var TTL: String?

            init(json: JSONValue) throws(JSONValue.Mismatch) {
                let o = try json.fields("keepalive result")
                ID = try o.string("ID")
                TTL = try o.string("TTL")
            }
        }
        var result: Result?
        var error: Error?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("keepalive")
            result = try o.read("result")
            error = try o.read("error")
        }
    }

    struct LeaseTimeToLive: JSONReadable {
        var ID: String?
        var TTL: String?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("lease timetolive")
            ID = try o.string("ID")
            TTL = try o.string("TTL")
        }
    }

    struct Status: JSONReadable {
        var header: Header?
        var version: String?
        var dbSize: String?
        var leader: String?
        var raftIndex: String?
        var raftTerm: String?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("status")
            header = try o.read("header")
            version = try o.string("version")
            dbSize = try o.string("dbSize")
            leader = try o.string("leader")
            raftIndex = try o.string("raftIndex")
            raftTerm = try o.string("raftTerm")
        }
    }

    struct Member: JSONReadable {
        var ID: String?
        var name: String?
        var clientURLs: [String]?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("member")
            ID = try o.string("ID")
            name = try o.string("name")
            clientURLs = try o.strings("clientURLs")
        }
    }

    struct MemberList: JSONReadable {
        var members: [Member]?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            members = try json.fields("member list").array("members")
        }
    }

    struct Error: JSONReadable {
        var error: String?
        var message: String?
        var code: Int?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("error")
            error = try o.string("error")
            message = try o.string("message")
            code = try o.int("code")
        }
    }

    /// A watch stream's message.
    struct WatchMessage: JSONReadable {
        struct Result: JSONReadable {
            var header: Header?
            var created: Bool?
            var canceled: Bool?
            var compact_revision: String?
            var cancel_reason: String?
            var events: [Event]?

            init(json: JSONValue) throws(JSONValue.Mismatch) {
                let o = try json.fields("watch result")
                header = try o.read("header")
                created = try o.bool("created")
                canceled = try o.bool("canceled")
                compact_revision = try o.string("compact_revision")
                cancel_reason = try o.string("cancel_reason")
                events = try o.array("events")
            }
        }
        struct Event: JSONReadable {
            var type: String?
            var kv: KeyValue?

            init(json: JSONValue) throws(JSONValue.Mismatch) {
                let o = try json.fields("event")
                type = try o.string("type")
                kv = try o.read("kv")
            }
        }
        var result: Result?
        var error: Error?

        init(json: JSONValue) throws(JSONValue.Mismatch) {
            let o = try json.fields("watch message")
            result = try o.read("result")
            error = try o.read("error")
        }
    }

    static func decode<T: JSONReadable>(_ type: T.Type, from body: [UInt8]) throws(EtcdError) -> T {
        do { return try T(json: try JSONValue.parse(body)) } catch {
            throw EtcdError(.refused, "etcd's answer could not be read (\(error.description)): \(String(decoding: body.prefix(200), as: UTF8.self))")
        }
    }
}
