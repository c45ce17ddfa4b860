import ActorKVClient
import ActorKVTestSupport
import Glibc
import Testing

/// Runs `body` with a fresh `actorkvd` (``ServerProcess``, `--fsync fsync` and more `arguments`)
/// and a client of it; stops the server afterwards (SIGTERM), also on failure. With
/// `ACTORKV_ETCD` set, the server is an agent of that etcd cluster (``ClusterTarget``).
func withServer(fsync: String = "everysec", arguments: [String] = [],
                _ body: (ServerProcess, ActorKVClient) async throws -> Void) async throws {
    let server = try await ServerProcess.started(directory: TemporaryDirectory("akc"),
                                                 arguments: ["--fsync", fsync] + arguments + ClusterTarget.agentArguments())
    try await serving(server, with: ActorKVClient(socketPath: server.socketPath), body)
}

/// Runs `body` with a started `server` and a `client` of it; closes the client and stops the
/// server (SIGTERM) afterwards, also on failure.
func serving(_ server: ServerProcess, with client: ActorKVClient,
             _ body: (ServerProcess, ActorKVClient) async throws -> Void) async throws {
    do {
        try await body(server, client)
    } catch {
        await client.close()
        try? await server.signal(SIGTERM)
        throw error
    }
    await client.close()
    try await server.signal(SIGTERM)
}

/// Expects `request` to be refused as an agent of an etcd cluster refuses what it cannot do
/// there (protocol.md "Cluster mode"): the client throws the server's
/// `-ERR … not available in cluster mode`. `what` names the request in the failure.
func expectRefusedByAnAgent(_ what: String, sourceLocation: SourceLocation = #_sourceLocation,
                            _ request: () async throws(ActorKVError) -> Void) async throws {
    do throws(ActorKVError) {
        try await request()
        Issue.record("\(what) ran on an agent", sourceLocation: sourceLocation)
    } catch {
        guard case .server(let code, let message) = error else { throw error }
        #expect(code == "ERR" && message.contains("not available in cluster mode"), "\(what): \(message)",
                sourceLocation: sourceLocation)
    }
}

extension String {
    /// The UTF-8 bytes.
    var bytes: [UInt8] { Array(utf8) }
}

/// How many CHANGES followers the server `kv` talks to serves in `namespace`: its INFO line
/// `ns_<namespace>:…,followers=N,…` locally; an agent (``ClusterTarget``) counts every
/// follower it serves in `changes_followers`.
func followerCount(_ kv: ActorKVClient, _ namespace: String) async throws -> Int? {
    let info = try await kv.info()
    let lines = info.split(whereSeparator: \.isNewline)
    if ClusterTarget.active {
        return lines.first { $0.hasPrefix("changes_followers:") }.flatMap { Int($0.dropFirst("changes_followers:".count)) }
    }
    guard let line = lines.first(where: { $0.hasPrefix("ns_\(namespace):") }) else { return 0 }
    let field = line.split(separator: ",").first { $0.hasPrefix("followers=") }
    return field.flatMap { Int($0.split(separator: "=").last ?? "") }
}
