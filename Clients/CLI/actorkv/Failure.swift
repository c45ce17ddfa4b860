// How `actorkv` ends: its exit codes, and the failures that end it with one.
import ActorKVClient
import ActorKVProtocol

enum Exit {
    static let ok: Int32 = 0
    static let notFound: Int32 = 1
    static let usage: Int32 = 2
    static let server: Int32 = 3
    /// Standard output could not be written: the same status as a server error.
    static let output: Int32 = 3
    static let connection: Int32 = 4
    /// A conditional write's condition did not hold: nothing was written.
    static let conditionFailed: Int32 = 5
    /// `changes --from SEQ`: the changes after SEQ are no longer all held.
    static let compacted: Int32 = 6
    /// `lock --timeout SECS`: the lock stayed held by another for SECS; the command did not run.
    static let lockTimedOut: Int32 = 7
    /// The server denied a right the command needs on its namespace (`NOPERM`, under
    /// `actorkvd --acl`): nothing was applied. (A connection refused on accept is `connection`.)
    static let permissionDenied: Int32 = 8
    /// `lock`: the command could not be run (as a shell, `env` or `timeout` reports it).
    static let commandNotRunnable: Int32 = 126
    /// `lock`: the command was not found.
    static let commandNotFound: Int32 = 127
}

/// A failure that ends the program with `code` after printing `message` on standard error.
struct Failure: Error {
    let code: Int32
    let message: String

    init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }

    /// The failure a client error ends a command with (see `usage` for the codes); `socketPath`
    /// is the server's, for a refused connection's message. `pendingWrite`: the command, if it
    /// writes; when its reply did not come (a timeout, a broken connection), the message says
    /// that the write may have been applied, so that a script reads before repeating it.
    init(_ error: ActorKVError, socketPath: String, pendingWrite: String? = nil) {
        if let command = pendingWrite, Self.mayHaveBeenApplied(error) {
            self.init(code: Exit.connection, message: "actorkv: \(error); the \(command) may or may not have been applied "
                      + "(read before repeating it)")
            return
        }
        switch error {
        case .server(let code, let message) where WireErrorCode.refusesConnection(code: code, message: message):
            // A refusal on accept is "cannot connect" (the client reports it as .refused; this
            // keeps exit 4 should one ever come back as a reply).
            self.init(code: Exit.connection, message: "actorkv: cannot connect to \(socketPath): "
                      + "the server refused the connection: \(message.isEmpty ? code : "\(code) \(message)")")
        case .server(let code, let message):
            self.init(code: error.isPermissionDenied ? Exit.permissionDenied : Exit.server,
                      message: message.isEmpty ? code : "\(code) \(message)")
        case .cannotConnect, .refused, .timedOut, .connectionLost, .closed:
            self.init(code: Exit.connection, message: "actorkv: \(error)")
        case .compacted:
            self.init(code: Exit.compacted, message: "actorkv: \(error)")
        case .lockTimedOut:
            self.init(code: Exit.lockTimedOut, message: "actorkv: \(error)")
        case .lockLost:
            self.init(code: Exit.connection, message: "actorkv: \(error)")
        case .protocolViolation, .decodingFailed, .encodingFailed, .conflict:
            self.init(code: Exit.server, message: "actorkv: \(error)")
        case .cancelled:
            // Not raised: no task of this program is cancelled while it waits (a signal ends
            // the process).
            self.init(code: Exit.server, message: "actorkv: \(error)")
        }
    }
}

extension Failure {
    /// True when `error` ended a call whose request may have reached the server: no reply within
    /// the timeout, or the connection broke while waiting. (A connection not accepted in time
    /// carried no request.)
    static func mayHaveBeenApplied(_ error: ActorKVError) -> Bool {
        switch error {
        case .connectionLost: return true
        case .timedOut(let reason): return !reason.hasPrefix("cannot connect")
        default: return false
        }
    }
}

/// A usage error (exit 2): `message`, and where to find the usage.
func usageFailure(_ message: String) -> Failure {
    Failure(code: Exit.usage, message: "actorkv: \(message)\nRun 'actorkv --help' for usage.")
}
