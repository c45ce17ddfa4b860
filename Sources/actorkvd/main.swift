#if canImport(Glibc)
import Glibc
#endif
import ActorKVProtocol
import ActorKVServer

// actorkvd: parse flags, serve, exit 0 after a clean shutdown, 1 if it cannot start, 2 on bad usage;
// with --check, check the data directory and exit 0 (all readable) or 1.
switch Result(catching: { () throws(UsageError) in try ServerConfiguration.parse(Array(CommandLine.arguments.dropFirst())) }) {
case .failure(let error):
    FileHandleStderr.write("actorkvd: \(error)\nRun 'actorkvd --help' for usage.\n")
    exit(2)
case .success(.help):
    print(ServerConfiguration.usage)
case .success(.version):
    print("actorkvd \(ActorKVVersion.string)")
case .success(.check(let configuration)):
    let report = DataCheck.run(directory: configuration.dataDirectory)
    report.lines.forEach { print($0) }
    if let error = report.error { FileHandleStderr.write(error + "\n") }
    exit(report.status)
case .success(.run(let configuration)):
    MallocTuning.reexecIfNeeded(arguments: CommandLine.arguments)
    let server = Server(configuration: configuration)
    do {
        try await server.run()
    } catch let error as Server.ShutdownError {
        ServerLog.line("\(error)")
        exit(1)
    } catch {
        ServerLog.line("cannot start: \(error)")
        exit(1)
    }
    // Everything is fsync'd and closed; exit without freeing the data the server still holds.
    withExtendedLifetime(server) { exit(0) }
}

enum FileHandleStderr {
    static func write(_ text: String) {
        _ = text.utf8CString.withUnsafeBufferPointer { Glibc.write(2, $0.baseAddress, $0.count - 1) }
    }
}
