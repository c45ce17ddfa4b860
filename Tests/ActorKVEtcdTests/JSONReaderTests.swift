@testable import ActorKVEtcd
import ActorKVStore
import Foundation
import Testing

/// The agent's JSON reader (``JSONValue/parse(_:)``) and the etcd answers read with it.
@Suite struct JSONReaderTests {
    @Test("values of every kind, with white space, escapes and surrogate pairs")
    func readsValues() throws {
        let text = #" { "a" : [ 1 , -0.5e+3 , true , false , null , "" ] , "b" : { } , "c" : [ ] , "d" : "\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00x" } "#
        let value = try JSONValue.parse(Array(text.utf8))
        #expect(value == .object([
            .init(name: "a", value: .array([.number("1"), .number("-0.5e+3"), .bool(true), .bool(false), .null, .string("")])),
            .init(name: "b", value: .object([])),
            .init(name: "c", value: .array([])),
            .init(name: "d", value: .string("\"\\/\u{8}\u{C}\n\r\té😀x")),
        ]))
        #expect(try JSONValue.parse(Array("\"caf\u{e9}\"".utf8)) == .string("café"))

    }

    @Test("malformed documents are refused with where it went wrong",
          arguments: ["", " ", "{", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "01", "-", "1.", "1e", "+1", ".5",
                      "tru", "nul", "\"abc", "\"a\u{1}b\"", #""\ud800x""#, #""\ud800\u0041""#, #""\udc00""#, "\"\\x\"", "\"\\u12\"", "\"\\u12g4\"", "[1 2]", "1 2", "{\"a\":1}}", "[", "]"])
    func refusesMalformed(_ text: String) {
        #expect(throws: JSONValue.Mismatch.self) { try JSONValue.parse(Array(text.utf8)) }
    }

    @Test("nesting deeper than the limit is refused, not recursed into")
    func boundsNesting() throws {
        let deep = String(repeating: "[", count: JSONReader.maxDepth) + String(repeating: "]", count: JSONReader.maxDepth)
        _ = try JSONValue.parse(Array(deep.utf8))
        let tooDeep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONValue.Mismatch.self) { try JSONValue.parse(Array(tooDeep.utf8)) }
    }

    @Test("random documents written by Foundation read back as written")
    func agreesWithFoundation() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<300 {
            let original = Self.randomValue(depth: 0, using: &generator)
            let data = try JSONSerialization.data(withJSONObject: ["v": Self.foundationObject(original)], options: [.fragmentsAllowed])
            let read = try JSONValue.parse(Array(data))
            guard case .object(let members) = read, members.count == 1, members[0].name == "v" else {
                Issue.record("not the wrapper object: \(read)")
                continue
            }
            #expect(Self.same(members[0].value, original), "\(String(decoding: data, as: UTF8.self))")
        }
    }

    @Test("an etcd range answer (as the gateway wrote one) and a type mismatch in one")
    func readsEtcdAnswers() throws {
        let body = #"{"header":{"cluster_id":"7327702806147728737","member_id":"15845291803689518359","revision":"2","raft_term":"2"},"kvs":[{"key":"cC9iZW5jaC9rMQ==","create_revision":"2","mod_revision":"2","version":"1","value":"aGVsbG8="},{"key":"cC9iZW5jaC9rMg==","mod_revision":"3","lease":"7"}],"count":"2","more":true}"#
        let range = try EtcdResponses.decode(EtcdResponses.Range.self, from: Array(body.utf8))
        #expect(range.header?.revisionValue == 2)
        #expect(range.kvs?.count == 2)
        #expect(range.kvs?[0].keyBytes == Array("p/bench/k1".utf8))
        #expect(range.kvs?[0].valueBytes == Array("hello".utf8))
        #expect(range.kvs?[1].valueBytes == [])
        #expect(range.kvs?[1].leaseID == 7)
        #expect(range.countValue == 2 && range.more == true)
        let txn = try EtcdResponses.decode(EtcdResponses.Txn.self, from: Array(#"{"header":{"revision":"9"},"succeeded":true,"responses":[{"response_put":{"header":{}}},{"response_delete_range":{"deleted":"1"}}]}"#.utf8))
        #expect(txn.succeeded == true && txn.responses?.count == 2 && txn.responses?[1].response_delete_range?.deletedValue == 1)
        let error = try EtcdResponses.decode(EtcdResponses.Error.self, from: Array(#"{"error":"etcdserver: no leader","code":14,"message":"etcdserver: no leader"}"#.utf8))
        #expect(error.code == 14 && error.message == "etcdserver: no leader")
        #expect(throws: EtcdError.self) { try EtcdResponses.decode(EtcdResponses.Range.self, from: Array(#"{"kvs":{"key":"YQ=="}}"#.utf8)) }
        #expect(throws: EtcdError.self) { try EtcdResponses.decode(EtcdResponses.Range.self, from: Array(#"{"kvs":[{"value":"YQ=="}]}"#.utf8)) }
        #expect(throws: EtcdError.self) { try EtcdResponses.decode(EtcdResponses.Txn.self, from: Array(#"{"succeeded":"yes"}"#.utf8)) }
    }

    // MARK: - Random documents

    private static func randomValue(depth: Int, using generator: inout SystemRandomNumberGenerator) -> JSONValue {
        switch Int.random(in: 0..<(depth < 4 ? 7 : 5), using: &generator) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &generator))
        case 2: return .number(String(Int.random(in: -1_000_000...1_000_000, using: &generator)))
        case 3, 4: return .string(randomString(using: &generator))
        case 5:
            return .array((0..<Int.random(in: 0..<5, using: &generator)).map { _ in randomValue(depth: depth + 1, using: &generator) })
        default:
            var names = Set<String>()
            var members: [JSONValue.Member] = []
            for _ in 0..<Int.random(in: 0..<5, using: &generator) {
                let name = randomString(using: &generator)
                if names.insert(name).inserted { members.append(.init(name: name, value: randomValue(depth: depth + 1, using: &generator))) }
            }
            return .object(members)
        }
    }

    private static func randomString(using generator: inout SystemRandomNumberGenerator) -> String {
        let pool: [Unicode.Scalar] = ["a", "z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{1}", "\u{1f}", "\u{7f}", "é", "\u{2028}", "€", "😀", "\u{10FFFF}"]
        var text = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0..<12, using: &generator) { text.append(pool.randomElement(using: &generator)!) }
        return String(text)
    }

    private static func foundationObject(_ value: JSONValue) -> Any {
        switch value {
        case .null: return NSNull()
        case .bool(let flag): return flag
        case .number(let text): return Int(text)!
        case .string(let text): return text
        case .array(let elements): return elements.map(foundationObject)
        case .object(let members): return Dictionary(uniqueKeysWithValues: members.map { ($0.name, foundationObject($0.value)) })
        }
    }

    /// Equal, objects compared as sets of members (Foundation writes them in any order).
    private static func same(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            guard x.count == y.count else { return false }
            return x.allSatisfy { member in y.contains { $0.name == member.name && same($0.value, member.value) } }
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { same($0, $1) }
        case (.number(let x), .number(let y)):
            return Double(x) == Double(y)
        default:
            return a == b
        }
    }
}
