// What one run of `actorkv` is asked to do, read from its arguments.
import ActorKVClient
import Foundation

/// The server to ask, the command, its operands and its options, as the program's arguments give
/// them (see `usage`). Reading them checks every option; the operands' count is checked by the
/// command (``CommandRunner``).
struct Invocation {
    /// The server's socket: `--socket`, else the clients' default (`$ACTORKV_SOCKET`, else
    /// `./actorkv.sock`: ``ActorKVClient/defaultSocketPath``).
    var socketPath = ActorKVClient.defaultSocketPath
    /// How long to wait for a reply (`--timeout`; nil: for ever).
    var timeout: Duration? = ActorKVClient.defaultTimeout
    /// Whether `--timeout` was given (`backup` waits for ever otherwise).
    var timeoutGiven = false
    /// `scan --json`.
    var json = false
    /// The command as given, for messages.
    var commandWord: [UInt8] = []
    /// The command, lowercased.
    var command = ""
    /// The command's operands, its options taken out.
    var operands: [[UInt8]] = []
    /// `put --if-version V`.
    var ifVersion: UInt64?
    /// `put --ttl SECS`.
    var ttl: Duration?
    /// `lock`'s options.
    var lockOptions = LockOptions()
    /// `copy --replace`.
    var replace = false
    /// `changes --from SEQ` or `--snapshot`.
    var changeStart = ChangeStart.now

    /// The command ``command`` names; nil for an unknown one.
    var kind: CLICommand? { CLICommand(word: command) }

    /// What the arguments ask for.
    enum Request {
        /// Print the usage (`--help`, `-h`, the command `help`, or `--help` among the command's
        /// options: ``asksForHelp(_:_:)``).
        case usage
        /// Print the version (`--version` before the command).
        case version
        /// Run this command.
        case run(Invocation)
    }

    /// Reads `arguments`: the options before the command, the command, and its own options.
    static func parse(_ arguments: [[UInt8]]) throws(Failure) -> Request {
        var invocation = Invocation()
        var rest = arguments[...]
        if let asked = try invocation.takeGlobalOptions(from: &rest) { return asked }
        guard let commandWord = rest.popFirst() else { throw usageFailure("no command given") }
        invocation.commandWord = commandWord
        invocation.command = text(commandWord).lowercased()
        if invocation.command == "help" || asksForHelp(invocation.command, rest) { return .usage }
        invocation.operands = Array(try invocation.takeCommandOptions(from: rest))
        return .run(invocation)
    }

    /// Takes the options that come before the command (`--socket`, `--timeout`, `--json`, up
    /// to a `--`); returns what `--help` or `--version` asks for instead of a command, nil
    /// when a command follows.
    private mutating func takeGlobalOptions(from rest: inout ArraySlice<[UInt8]>) throws(Failure) -> Request? {
        while let first = rest.first, first.first == UInt8(ascii: "-"), first.count > 1 {
            rest.removeFirst()
            let option = text(first)
            switch option {
            case "--help", "-h":
                return .usage
            case "--version":
                return .version
            case "--socket", "-s":
                guard let path = rest.popFirst() else { throw usageFailure("\(option) needs a path") }
                socketPath = text(path)
            case _ where option.hasPrefix("--socket="):
                socketPath = String(option.dropFirst("--socket=".count))
            case "--timeout", "-t":
                guard let value = rest.popFirst() else { throw usageFailure("\(option) needs a number of seconds") }
                timeout = try Self.parseTimeout(text(value), option)
                timeoutGiven = true
            case _ where option.hasPrefix("--timeout="):
                timeout = try Self.parseTimeout(String(option.dropFirst("--timeout=".count)), "--timeout")
                timeoutGiven = true
            case "--json":
                json = true
            case "--":
                return nil
            default:
                throw usageFailure("unknown option '\(option)'")
            }
        }
        return nil
    }

    /// `--timeout`'s seconds: nil (wait for ever) for 0.
    private static func parseTimeout(_ value: String, _ option: String) throws(Failure) -> Duration? {
        guard let seconds = decimalSeconds(value) else {
            throw usageFailure("\(option) needs a number of seconds (0 waits forever; at most 1000000000), not '\(value)'")
        }
        return seconds == 0 ? nil : .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
    }

    /// Takes the command's own options out of `arguments`; returns its operands.
    private mutating func takeCommandOptions(from arguments: ArraySlice<[UInt8]>) throws(Failure) -> ArraySlice<[UInt8]> {
        var rest = arguments
        if command == "scan" {
            rest = try actorkv.operands(of: rest) { (word, _) throws(Failure) -> Bool in
                guard word == "--json" else { return false }
                json = true
                return true
            }
        } else if json {
            throw usageFailure("--json applies to scan only")
        }
        switch command {
        case "put", "set": (ifVersion, ttl, rest) = try takePutOptions(from: rest)
        case "lock": (lockOptions, rest) = try takeLockOptions(from: rest)
        case "changes": (changeStart, rest) = try takeChangeStart(from: rest)
        case "copy":
            rest = try actorkv.operands(of: rest) { (word, _) throws(Failure) -> Bool in
                guard word == "--replace" else { return false }
                replace = true
                return true
            }
        case "scan": break
        default:
            // No options of its own: a word that starts with '--' before a '--' is a mistake
            // (`get ns --help` asked for the usage already), and '--' ends them as for the others.
            rest = try actorkv.operands(of: rest) { (_, _) throws(Failure) -> Bool in false }
        }
        return rest
    }
}
