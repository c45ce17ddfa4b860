@testable import ActorKVEtcd
import ActorKVStore
import Foundation
import Testing

/// The pure parts of cluster mode: the HTTP/1.1 response reader, the gateway's request bodies,
/// key ranges and endpoint parsing.
@Suite struct EtcdCodecTests {
    @Test func contentLengthResponseInAnyPieces() throws {
        let wire = Array("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"a\":\"bc\"}\n".utf8)
        for size in 1...wire.count {
            var parser = HTTPResponseParser()
            var got: HTTPResponse?
            var index = 0
            while index < wire.count {
                parser.feed(wire[index..<min(wire.count, index + size)])
                index += size
                if let r = try parser.response() { got = r; #expect(index >= wire.count) }
            }
            #expect(got == HTTPResponse(status: 200, keepAlive: true, body: Array("{\"a\":\"bc\"}\n".utf8)))
        }
    }

    @Test func chunkedResponseHandsOutChunks() throws {
        var parser = HTTPResponseParser()
        parser.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".utf8))
        #expect(try parser.nextChunk() == Array("hello".utf8))
        #expect(try parser.nextChunk() == nil)
        #expect(try parser.response() == nil)
        parser.feed(Array("3;ext=1\r\n abc\r\n0\r\n\r\n".utf8).dropFirst(0))
        // "3;ext" is a size with an extension; the data is " ab", then "c\r\n" breaks the frame.
        #expect(throws: HTTPResponseParser.Malformed.self) { try parser.response() }
        var clean = HTTPResponseParser()
        clean.feed(Array("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".utf8))
        #expect(try clean.response()?.body == Array("hello world".utf8))
    }

    @Test func connectionCloseAndBodyUntilClose() throws {
        var parser = HTTPResponseParser()
        parser.feed(Array("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\npartial".utf8))
        #expect(try parser.response() == nil)
        #expect(try parser.finish() == HTTPResponse(status: 503, keepAlive: false, body: Array("partial".utf8)))
        var cut = HTTPResponseParser()
        cut.feed(Array("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".utf8))
        #expect(throws: HTTPResponseParser.Malformed.self) { try cut.finish() }
    }

    @Test func headerNamesAndValuesInAnyCase() throws {
        var parser = HTTPResponseParser()
        parser.feed(Array("HTTP/1.1 404 Not Found\r\ncONTENT-lENGTH:\t3 \r\nCONNECTION: Close\r\nX-Other: a:b\r\n\r\nabc".utf8))
        #expect(try parser.response() == HTTPResponse(status: 404, keepAlive: false, body: Array("abc".utf8)))
        var chunked = HTTPResponseParser()
        chunked.feed(Array("HTTP/1.1 200\r\nTransfer-Encoding: gzip, Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n".utf8))
        #expect(try chunked.response() == HTTPResponse(status: 200, keepAlive: true, body: Array("0123456789".utf8)))
        var old = HTTPResponseParser()
        old.feed(Array("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n".utf8))
        #expect(try old.response() == HTTPResponse(status: 200, keepAlive: false, body: []))
        var kept = HTTPResponseParser()
        kept.feed(Array("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n".utf8))
        #expect(try kept.response()?.keepAlive == true)
    }

    @Test func malformedHeadsAreRefused() {
        for head in ["SMTP 220 hi\r\n\r\n", "HTTP/1.1 abc OK\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n",
                     "HTTP/1.1 2000 OK\r\n\r\n", "HTTP/2 200 OK\r\n\r\n", "HTTP/1.1\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\n",
                     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"] {
            var parser = HTTPResponseParser()
            parser.feed(Array(head.utf8))
            #expect(throws: HTTPResponseParser.Malformed.self) { try parser.response() }
        }
    }

    @Test func requestBodiesAreTheGatewaysJSON() throws {
        let put = EtcdRequest.put(key: Array("p/ns/k".utf8), value: [0, 255], lease: 7)
        #expect(String(decoding: put.body, as: UTF8.self) == #"{"key":"cC9ucy9r","value":"AP8=","lease":"7"}"#)
        let range = EtcdRequest.range(key: Array("a".utf8), rangeEnd: Array("b".utf8), limit: 3, countOnly: true)
        #expect(String(decoding: range.body, as: UTF8.self) == #"{"key":"YQ==","range_end":"Yg==","limit":"3","count_only":true}"#)
        let keys = EtcdRequest.range(key: Array("a".utf8), limit: 2, keysOnly: true)
        #expect(String(decoding: keys.body, as: UTF8.self) == #"{"key":"YQ==","limit":"2","keys_only":true}"#)
        let txn = EtcdTransaction(compare: [EtcdCompare(key: Array("a".utf8), modRevision: 0)],
                                  success: [.put(key: Array("a".utf8), value: Array("1".utf8)), .deleteRange(key: Array("b".utf8))])
        let json = try JSONSerialization.jsonObject(with: Data(txn.body)) as! [String: Any]
        let compare = (json["compare"] as! [[String: Any]])[0]
        #expect(compare["target"] as? String == "MOD" && compare["result"] as? String == "EQUAL" && compare["mod_revision"] as? String == "0")
        let success = json["success"] as! [[String: Any]]
        #expect(success.count == 2 && success[0]["request_put"] != nil && success[1]["request_delete_range"] != nil)
        #expect(json["failure"] == nil)
        let newest = EtcdRequest.range(key: Array("a".utf8), limit: 1, newestFirst: true)
        #expect(String(decoding: newest.body, as: UTF8.self) == #"{"key":"YQ==","limit":"1","sort_order":"DESCEND","sort_target":"MOD"}"#)
        let watched = EtcdTransaction(compare: [EtcdCompare(key: Array("a".utf8), rangeEnd: Array("b".utf8), modRevision: 8, less: true)])
        let guardJSON = try JSONSerialization.jsonObject(with: Data(watched.body)) as! [String: Any]
        let rangeCompare = (guardJSON["compare"] as! [[String: Any]])[0]
        #expect(rangeCompare["range_end"] as? String == "Yg==" && rangeCompare["result"] as? String == "LESS" && rangeCompare["mod_revision"] as? String == "8")
    }

    @Test func prefixRangeEnds() {
        #expect(EtcdKeys.rangeEnd(ofPrefix: Array("actorkv/ns/".utf8)) == Array("actorkv/ns0".utf8))
        #expect(EtcdKeys.rangeEnd(ofPrefix: [0x61, 0xFF, 0xFF]) == [0x62])
        #expect(EtcdKeys.rangeEnd(ofPrefix: [0xFF]) == [0])
        #expect(EtcdKeys.after([1, 2]) == [1, 2, 0])
    }

    @Test func endpointsParseAndRefuse() throws {
        let list = try EtcdEndpoint.list("http://127.0.0.1:2379, http://[::1]:23791/,http://etcd-b")
        #expect(list.map(\.description) == ["http://127.0.0.1:2379", "http://[::1]:23791", "http://etcd-b:2379"])
        for bad in ["https://a:1", "127.0.0.1:2379", "http://a:0", "http://a:x", "http://a:1/v3", ""] {
            #expect(throws: EtcdError.self, "\(bad)") { try EtcdEndpoint.list(bad) }
        }
    }

    @Test func gatewayErrorsMapToKinds() {
        #expect(EtcdError.answered(status: 503, code: 14, message: "etcdserver: no leader").kind == .unavailable)
        #expect(EtcdError.answered(status: 400, code: 3, message: "etcdserver: request is too large").kind == .tooLarge)
        #expect(EtcdError.answered(status: 404, code: 5, message: "etcdserver: requested lease not found").kind == .leaseNotFound)
        #expect(EtcdError.answered(status: 400, code: 3, message: "illegal base64 data").kind == .refused)
        #expect(EtcdError(.unavailable, "x").storeError.code == .unavailable)
        #expect(EtcdError(.outcomeUnknown, "x").storeError.code == .io)
        #expect(EtcdError(.tooLarge, "x").storeError.code == .valueTooLarge)
    }
}
