import ActorKVClient
import ActorKVTestSupport
import Glibc

/// Runs `body` with a fresh `actorkvd` (``ServerProcess``, `--fsync fsync` and more `arguments`)
/// and a client of it; stops the server afterwards (SIGTERM), also on failure.
func withServer(fsync: String = "everysec", arguments: [String] = [],
                _ body: (ServerProcess, ActorKVClient) async throws -> Void) async throws {
    let server = try await ServerProcess.started(directory: TemporaryDirectory("akc"), arguments: ["--fsync", fsync] + arguments)
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

extension String {
    /// The UTF-8 bytes.
    var bytes: [UInt8] { Array(utf8) }
}
