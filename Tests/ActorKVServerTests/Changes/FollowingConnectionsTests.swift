@testable import ActorKVServer
import Testing

/// The followers of a namespace are served in the order their connections came (ids
/// ascending), whatever order they started following in, each connection once.
@Suite("Following connections")
struct FollowingConnectionsTests {
    @Test("connections come out in ascending id order, each once, and leave when removed")
    func connectionOrder() {
        var list = FollowingConnections()
        #expect(list.isEmpty)
        let ids: [UInt64] = [40, 17, 99, 23, 17, 64, 16, 99, 1_000, 18]
        for id in ids { list.insert(id) }
        #expect(Array(list) == [16, 17, 18, 23, 40, 64, 99, 1_000])
        list.remove(17)
        list.remove(1_000)
        list.remove(41)  // never listed
        #expect(Array(list) == [16, 18, 23, 40, 64, 99])
        for id in [16, 18, 23, 40, 64, 99] as [UInt64] { list.remove(id) }
        #expect(list.isEmpty)
    }

    @Test("a thousand connections in a random order of following come out in connection order")
    func randomOrder() {
        var list = FollowingConnections()
        var ids = Array(UInt64(16)..<UInt64(1_016))
        ids.shuffle()
        for id in ids { list.insert(id) }
        #expect(Array(list) == Array(UInt64(16)..<UInt64(1_016)))
        for id in ids.prefix(500) { list.remove(id) }
        #expect(Array(list) == ids.dropFirst(500).sorted())
    }
}
