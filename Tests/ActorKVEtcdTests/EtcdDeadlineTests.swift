@testable import ActorKVEtcd
import ActorKVStore
import Foundation
import Synchronization
import Testing

/// Deadlines given through an agent, against a fake member and a clock that moves a millisecond
/// each time it is read: an absolute deadline (HEXPIREAT's family) lands on its own second
/// however many times the agent reads the clock on the way, and a relative one (PEXPIRE) is
/// counted from one reading; an HSETEX that writes nothing asks for no lease; the fields of one
/// HEXPIRE are written in one transaction.
@Suite struct EtcdDeadlineTests {
    /// The deadline seconds of the leases a member granted, in order.
    private final class Grants: Sendable {
        let seconds = Mutex<[Int64?]>([])
        /// How many transactions that write the member applied.
        let writes = Mutex<Int>(0)
    }

    /// A member holding every key asked for, without lease, that grants every lease asked for
    /// and applies every transaction; `granted` collects the deadline seconds of the leases it
    /// granted.
    private static func member(granted: Grants) throws -> FakeMember {
        try FakeMember(requests: { _, request in
            switch request.path {
            case "/v3/kv/range":
                let key = request.json["key"] as? String ?? ""
                return .answer(200, Array(#"{"header":{"revision":"5"},"kvs":[{"key":"\#(key)","value":"dg==","mod_revision":"5","create_revision":"5"}],"count":"1"}"#.utf8))
            case "/v3/lease/grant":
                let id = request.json["ID"] as? String ?? "0"
                granted.seconds.withLock { $0.append(Int64(id).flatMap(EtcdLeaseID.init)?.deadlineSecond) }
                return .answer(200, Array(#"{"header":{"revision":"6"},"ID":"\#(id)","TTL":"\#(request.json["TTL"] as? String ?? "1")"}"#.utf8))
            case "/v3/kv/txn":
                // Reads of several keys at one revision find each, as a range does; writes succeed.
                let ops = request.json["success"] as? [[String: Any]] ?? []
                if ops.contains(where: { $0["request_put"] != nil }) { granted.writes.withLock { $0 += 1 } }
                let responses = ops.map { op -> String in
                    guard let range = op["request_range"] as? [String: Any], let key = range["key"] as? String else { return #"{"response_put":{}}"# }
                    return #"{"response_range":{"kvs":[{"key":"\#(key)","value":"dg==","mod_revision":"5","create_revision":"5"}],"count":"1"}}"#
                }
                return .answer(200, Array(#"{"header":{"revision":"7"},"succeeded":true,"responses":[\#(responses.joined(separator: ","))]}"#.utf8))
            default:
                return .answer(404, Array(#"{"error":"not found","code":5,"message":"not found"}"#.utf8))
            }
        })
    }

    /// A clock starting at `start` that moves on a millisecond each time it is read.
    private static func tickingClock(from start: UInt64) -> @Sendable () -> UInt64 {
        let readings = Atomic<UInt64>(0)
        return { start + readings.add(1, ordering: .relaxed).oldValue }
    }

    @Test("HPEXPIREAT of two fields at a whole second: the lease runs out at that second, not the next, however the clock moves meanwhile; both fields in one transaction")
    func absoluteDeadlineKeepsItsSecond() async throws {
        let granted = Grants()
        let member = try Self.member(granted: granted)
        let at = Int64(WallClock.milliseconds() / 1000) + 3600
        let store = EtcdStore(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), prefix: "p/",
                              clock: Self.tickingClock(from: WallClock.milliseconds()))
        let expiry = KeyExpiry(keys: [Array("a".utf8), Array("b".utf8)], deadline: .at(milliseconds: UInt64(at) * 1000), condition: .always)
        let outcomes = await store.execute([ActorKVStore.Operation.expire(expiry)], inNamespace: "ns")
        #expect(outcomes == [Outcome.batch([.integer(1), .integer(1)])], "\(outcomes)")
        #expect(granted.seconds.withLock { $0 } == [at], "leases granted for seconds \(granted.seconds.withLock { $0 }), expected [\(at)]")
        #expect(granted.writes.withLock { $0 } == 1, "the two fields written in \(granted.writes.withLock { $0 }) transactions")
    }

    @Test("HSETEX whose FNX does not hold (the field exists) answers 0 and asks for no lease; with FXX it gets one, for the second asked")
    func refusedSetAllGrantsNoLease() async throws {
        let granted = Grants()
        let member = try Self.member(granted: granted)
        let store = EtcdStore(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), prefix: "p/")
        let at = Int64(WallClock.milliseconds() / 1000) + 3600
        func setting(_ presence: KeySetting.Presence) -> ActorKVStore.Operation {
            .setAll(KeySetting(keys: [Array("a".utf8)], values: [Array("v".utf8)], presence: presence, deadline: .at(milliseconds: UInt64(at) * 1000)))
        }
        #expect(await store.execute([setting(.allAbsent)], inNamespace: "ns") == [Outcome.integer(0)])
        #expect(granted.seconds.withLock { $0 }.isEmpty, "a lease for a write that did not happen")
        #expect(await store.execute([setting(.allPresent)], inNamespace: "ns") == [Outcome.integer(1)])
        #expect(granted.seconds.withLock { $0 } == [at])
    }

    @Test("PEXPIRE ending exactly on a second: counted from one reading of the clock, so the lease runs out at that second")
    func relativeDeadlineCountsFromOneReading() async throws {
        let granted = Grants()
        let member = try Self.member(granted: granted)
        let now = WallClock.milliseconds() / 1000 * 1000
        let store = EtcdStore(client: EtcdClient(endpoints: [member.endpoint], timeout: 5), prefix: "p/", clock: Self.tickingClock(from: now))
        let outcomes = await store.execute([ActorKVStore.Operation.setTimeToLive(key: Array("a".utf8), milliseconds: 60_000)], inNamespace: "ns")
        #expect(outcomes == [Outcome.integer(1)], "\(outcomes)")
        #expect(granted.seconds.withLock { $0 } == [Int64(now / 1000) + 60])
    }
}
