import Foundation
import Testing

/// Cluster mode for the clients' tests: with `ACTORKV_ETCD` set to an etcd cluster's endpoints
/// (`Tests/Cluster/run.sh` sets it), the servers those tests start are agents of that cluster,
/// each under an `--etcd-prefix` of its own, so that the same tests check both back ends.
public enum ClusterTarget {
    /// The etcd endpoints from `ACTORKV_ETCD`, nil when the tests run against the local engine.
    public static let endpoints: String? = {
        let value = ProcessInfo.processInfo.environment["ACTORKV_ETCD"] ?? ""
        return value.isEmpty ? nil : value
    }()

    /// Whether the servers started are agents of an etcd cluster.
    public static var active: Bool { endpoints != nil }

    /// How much later than asked a deadline may fall: an agent keeps deadlines to the second
    /// (a key expires at the end of the second its deadline falls in, and PTTL counts to then).
    public static var deadlineSlack: Duration { active ? .seconds(1) : .zero }

    /// The `actorkvd` options that make a server an agent under a prefix of its own (none when
    /// not ``active``).
    public static func agentArguments() -> [String] {
        guard let endpoints else { return [] }
        return ["--etcd", endpoints, "--etcd-prefix", "swift-\(getpid())-\(UInt32.random(in: 0...UInt32.max))/"]
    }
}

extension ServerProcess {
    /// The options that make it an agent (`--etcd`, `--etcd-prefix`; none for a local server):
    /// another server started with them serves the same data.
    public var agentArguments: [String] {
        var picked: [String] = []
        var index = arguments.startIndex
        while index < arguments.endIndex - 1 {
            if arguments[index] == "--etcd" || arguments[index] == "--etcd-prefix" {
                picked += arguments[index...(index + 1)]
                index += 1
            }
            index += 1
        }
        return picked
    }
}

extension Trait where Self == ConditionTrait {
    /// Skips the test when the clients' tests run against an etcd agent (``ClusterTarget``):
    /// `reason` says which difference of cluster mode (protocol.md, "Cluster mode") it checks,
    /// or why it needs the local engine.
    public static func localOnly(_ reason: Comment) -> Self {
        .enabled(if: !ClusterTarget.active, reason)
    }
}
