@testable import ActorKVEtcd
import ActorKVStore
import Testing

/// ``NamespaceNameWalk`` against an etcd keyspace kept as a sorted array, read as the gateway
/// pages it: keys from the start, at most the limit, and whether more follow.
@Suite("Namespace names from keys-only pages")
struct NamespaceNameWalkTests {
    static let prefix = Array("actorkv/".utf8)

    /// The walk's names over `keys`, and how many pages it read.
    static func walk(_ keys: [[UInt8]], firstLimit: Int = 16) -> (names: [String], pages: Int) {
        let sorted = Set(keys).sorted { $0.lexicographicallyPrecedes($1) }
        let end = EtcdKeys.rangeEnd(ofPrefix: prefix)
        var walk = NamespaceNameWalk(prefix: prefix, firstLimit: firstLimit)
        var pages = 0
        while let start = walk.start {
            pages += 1
            let inRange = sorted.filter { !$0.lexicographicallyPrecedes(start) && $0.lexicographicallyPrecedes(end) }
            walk.take(Array(inRange.prefix(walk.limit)), more: inRange.count > walk.limit)
            if pages > 100_000 { break }
        }
        return (walk.names, pages)
    }

    /// The names a full read of `keys` gives: those before a `/` after the prefix, each once,
    /// sorted.
    static func expected(_ keys: [[UInt8]]) -> [String] {
        let names = keys.compactMap { key -> String? in
            guard key.starts(with: prefix), let slash = key[prefix.count...].firstIndex(of: UInt8(ascii: "/")),
                  slash > prefix.count else { return nil }
            return String(decoding: key[prefix.count..<slash], as: UTF8.self)
        }
        return Set(names).sorted()
    }

    static func key(_ text: String) -> [UInt8] { prefix + Array(text.utf8) }

    /// A namespace's key and, as every delete leaves it, its marker.
    static func namespace(_ name: String, keys: Int = 1, marker: Bool = true) -> [[UInt8]] {
        (0..<keys).map { key("\(name)/k\($0)") } + (marker ? [key(name + "0")] : [])
    }

    @Test("names that continue one another, with and without markers, at every first limit")
    func neighbours() {
        let names = ["ls", "ls-b", "ls.b", "ls0", "ls00", "ls0b", "ls:x", "lsz", "l", "m"]
        var keys = names.flatMap { Self.namespace($0, keys: 3) }
        keys += [Self.key("emptied0"), Self.prefix, Self.key("/nameless"), Array("actorkv".utf8), Array("actorkw/x/y".utf8)]
        for limit in [1, 2, 3, 5, 16, 512] {
            #expect(Self.walk(keys, firstLimit: limit).names.sorted() == Self.expected(keys), "first limit \(limit)")
        }
    }

    @Test("random keyspaces: the same names as a full read")
    func random() {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ab0.-:_/z".utf8)
        for round in 0..<300 {
            var keys: [[UInt8]] = []
            for _ in 0..<Int.random(in: 0...60, using: &generator) {
                let length = Int.random(in: 0...6, using: &generator)
                keys.append(Self.prefix + (0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            }
            for _ in 0..<Int.random(in: 0...4, using: &generator) {
                keys += Self.namespace("n\(Int.random(in: 0...9, using: &generator))", keys: Int.random(in: 1...80, using: &generator),
                                       marker: Bool.random(using: &generator))
            }
            let firstLimit = Int.random(in: 1...40, using: &generator)
            #expect(Self.walk(keys, firstLimit: firstLimit).names.sorted() == Self.expected(keys), "round \(round), first limit \(firstLimit)")
        }
    }

    @Test("namespaces of a key or two come many to a page; a large one costs a few pages, not one per key")
    func pagesRead() {
        let small = (0..<300).flatMap { Self.namespace("s\($0)") }
        let listing = Self.walk(small)
        #expect(listing.names.count == 300)
        #expect(listing.pages <= 10, "\(listing.pages) pages for 300 namespaces of one key")

        let emptied = (0..<300).map { Self.key("gone\($0)0") }  // markers left by deletes
        #expect(Self.walk(emptied + Self.namespace("z")).pages <= 10)

        let large = (0..<20).flatMap { Self.namespace("big\($0)", keys: 1_000) }
        let bigListing = Self.walk(large)
        #expect(bigListing.names.sorted() == Self.expected(large))
        #expect(bigListing.pages <= 30, "\(bigListing.pages) pages for 20 namespaces of 1,000 keys")
    }

    @Test("the page limit doubles up to the maximum and halves down to 1")
    func limits() {
        var walk = NamespaceNameWalk(prefix: Self.prefix, firstLimit: 4)
        walk.take([Self.key("a/1"), Self.key("a0"), Self.key("b/1"), Self.key("b0")], more: true)
        #expect(walk.limit == 8 && walk.start == Self.key("b0") + [0])
        walk.take([Self.key("c/1"), Self.key("c/2")], more: true)
        #expect(walk.limit == 4 && walk.start == Self.key("c0") + [0])
        #expect(walk.names == ["a", "b", "c"])
        walk.take([], more: false)
        #expect(walk.start == nil)
        #expect(NamespaceNameWalk(prefix: Self.prefix, firstLimit: 100_000).limit == NamespaceNameWalk.maximumLimit)
        var one = NamespaceNameWalk(prefix: Self.prefix, firstLimit: 1)
        one.take([Self.key("a/1")], more: true)
        #expect(one.limit == 1)
    }
}
