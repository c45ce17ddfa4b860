@testable import ActorKVEtcd
import ActorKVStore
import Foundation
import Testing

@Suite("Watch messages as changes")
struct WatchUpdateTests {
    static let keyPrefix = Array("p/ns/".utf8)
    static let marker = Array("p/ns0".utf8)

    static func b64(_ text: String) -> String { Data(text.utf8).base64EncodedString() }

    static func update(_ json: String) throws -> WatchUpdate {
        let message = try EtcdResponses.decode(EtcdResponses.WatchMessage.self, from: Array(json.utf8))
        return WatchUpdate(message, keyPrefix: keyPrefix, marker: marker)
    }

    @Test("events of one revision are one change; PUT is etcd's default type; keys lose the namespace's prefix")
    func grouping() throws {
        let json = """
            {"result":{"header":{"revision":"9"},"events":[
             {"kv":{"key":"\(Self.b64("p/ns/a"))","mod_revision":"7","value":"\(Self.b64("1"))"}},
             {"kv":{"key":"\(Self.b64("p/ns/b"))","mod_revision":"7","value":"\(Self.b64("2"))"}},
             {"type":"DELETE","kv":{"key":"\(Self.b64("p/ns/a"))","mod_revision":"9"}}]}}
            """
        let update = try Self.update(json)
        #expect(update.changes == [
            Change(sequence: 7, mutations: [.put(key: Array("a".utf8), value: Array("1".utf8)), .put(key: Array("b".utf8), value: Array("2".utf8))]),
            Change(sequence: 9, mutations: [.delete(key: Array("a".utf8))]),
        ])
        #expect(update.lastRevision == 9)
        #expect(update.headerRevision == 9)
        #expect(!update.created && update.compactRevision == nil && update.canceledReason == nil)
    }

    @Test("the sync marker is no change, but its revision counts")
    func marker() throws {
        let update = try Self.update("""
            {"result":{"events":[{"kv":{"key":"\(Self.b64("p/ns0"))","mod_revision":"12"}}]}}
            """)
        #expect(update.changes.isEmpty)
        #expect(update.lastRevision == 12)
    }

    @Test("created, compacted and canceled watches")
    func lifecycle() throws {
        let created = try Self.update(#"{"result":{"header":{"revision":"40"},"created":true}}"#)
        #expect(created.created && created.headerRevision == 40)
        let compacted = try Self.update(#"{"result":{"canceled":true,"compact_revision":"31"}}"#)
        #expect(compacted.compactRevision == 31 && compacted.canceledReason == nil)
        let canceled = try Self.update(#"{"result":{"canceled":true,"cancel_reason":"etcdserver: no leader"}}"#)
        #expect(canceled.canceledReason == "etcdserver: no leader")
        let failed = try Self.update(#"{"error":{"message":"rpc error","code":14}}"#)
        #expect(failed.canceledReason == "rpc error")
    }

    @Test("the splitter hands out whole messages whatever the chunks")
    func splitting() {
        let stream = Array("{\"a\":1}\n{\"b\":2}\n{\"c\"".utf8)
        for cut in 0...stream.count {
            var splitter = WatchMessageSplitter()
            let messages = splitter.messages(Array(stream[..<cut])) + splitter.messages(Array(stream[cut...]))
            #expect(messages.map { String(decoding: $0, as: UTF8.self) } == ["{\"a\":1}", "{\"b\":2}"])
            #expect(splitter.pendingBytes == 4)
        }
    }

    @Test("the watch request covers the namespace's keys and its marker, from the revision given")
    func request() throws {
        let body = EtcdChangeStream.createRequest(Self.keyPrefix, marker: Self.marker, from: 42)
        let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: [String: String]]
        let create = try #require(object?["create_request"])
        #expect(create["key"] == Self.b64("p/ns/"))
        #expect(Data(base64Encoded: create["range_end"] ?? "") == Data("p/ns0\0".utf8))
        #expect(create["start_revision"] == "42")
    }
}
