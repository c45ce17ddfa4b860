// actorkv: the command-line client of actorkvd. Makes ActorKV state first-class in shell scripts:
//
//     actorkv put config theme dark
//     theme=$(actorkv get config theme) || theme=light
//
// Arguments are taken as raw bytes (not re-encoded), and `get` writes the value's exact bytes,
// so binary keys and values survive. See `usage` (Usage.swift) for every command and exit code;
// Invocation.swift reads the arguments, CommandRunner.swift runs the command.
import ActorKVProtocol
import Glibc

/// Runs the program given its `arguments`: prints the usage or the version, or runs the command;
/// returns the exit status, or throws the failure to exit with.
func run(_ arguments: [[UInt8]], output: Output, signalMask: sigset_t) async throws(Failure) -> Int32 {
    switch try Invocation.parse(arguments) {
    case .usage:
        try output.write(usage)
        return Exit.ok
    case .version:
        try output.line("actorkv \(ActorKVVersion.string)")
        return Exit.ok
    case .run(let invocation):
        return try await CommandRunner(invocation, output: output, signalMask: signalMask).run()
    }
}

reserveStandardDescriptors()
let output = Output()
let status: Int32
do {
    status = try await run(rawArguments(), output: output, signalMask: currentSignalMask())
} catch {
    do { try output.flush() } catch let writeError { printError(writeError.message) }
    printError(error.message)
    exit(error.code)
}
do {
    try output.flush()
} catch {
    printError(error.message)
    exit(error.code)
}
exit(status)
