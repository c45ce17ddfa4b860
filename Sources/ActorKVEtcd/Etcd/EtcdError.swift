/// A failure talking to etcd, or an error etcd answered.
public struct EtcdError: Error, Sendable, CustomStringConvertible {
    /// What kind of failure.
    public enum Kind: Sendable, Equatable {
        /// No member could be reached, or the cluster has no leader or quorum.
        case unavailable
        /// A write was sent and no answer came: it may or may not have been applied.
        case outcomeUnknown
        /// The request or the cluster's data is too large for etcd's limits.
        case tooLarge
        /// `CHANGES … FROM` asked for revisions etcd has compacted away (the oldest it still has).
        case compacted(oldest: Int64)
        /// A lease the request named is gone (revoked or expired).
        case leaseNotFound
        /// A bad `--etcd` setting.
        case invalidConfiguration
        /// Anything else etcd refused (its message says what).
        case refused
    }

    /// The kind.
    public let kind: Kind
    /// A sentence for the client.
    public let message: String

    /// An error of `kind` saying `message`.
    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    public var description: String { message }

    /// The error for an etcd gateway answer with HTTP `status` and its gRPC `code` and `message`.
    static func answered(status: Int, code: Int, message: String) -> EtcdError {
        let lower = message.lowercased()
        if lower.contains("too large") || lower.contains("database space exceeded") || code == 8 {
            return EtcdError(.tooLarge, "etcd refused the request: \(message) (etcd's limits: 1.5 MiB per request by default, and its --quota-backend-bytes in all)")
        }
        if lower.contains("too many operations in txn") {
            return EtcdError(.tooLarge, "etcd refused the request: \(message) (etcd's --max-txn-ops, 128 by default: in cluster mode a BATCH, MULTI/EXEC, HSET, HSETEX or DEL writes at most that many keys at once, one fewer with a delete)")
        }
        if lower.contains("lease not found") { return EtcdError(.leaseNotFound, message) }
        // 14 unavailable, 4 deadline exceeded, 1 canceled: a member stopping cancels what its
        // gateway has under way ("grpc: the client connection is closing", HTTP 408).
        if code == 14 || code == 4 || code == 1 || lower.contains("no leader") || lower.contains("timed out") || lower.contains("unavailable")
            || lower.contains("connection is closing") {
            return EtcdError(.unavailable, "etcd: \(message)")
        }
        return EtcdError(.refused, "etcd refused the request (HTTP \(status), code \(code)): \(message)")
    }
}
