import ActorKVProtocol

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`, Redis's way to stop the server
/// (`redis-cli shutdown`, redis-py's `shutdown()`): the server stops as on SIGTERM (finishes the
/// requests in flight, fsyncs every namespace, removes its socket) and the asking connection is
/// closed, with no reply, once it has (protocol.md, "SHUTDOWN").
///
/// The options are Redis's and are accepted as it accepts them, but change nothing here: every
/// acknowledged write is in the log already (SAVE, NOSAVE), there are no replicas to wait for
/// (NOW), and a shutdown whose fsync fails ends the process all the same (FORCE). ABORT cancels
/// a shutdown waiting for replicas in Redis; there is never one to cancel here.
enum ShutdownCommand {
    /// Its spec.
    static let spec = CommandSpec(name: "SHUTDOWN", usage: "SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]", arity: .atLeast(0),
                                  flags: [.serverOwner, .notInMulti, .session], parse: parse)

    private static let options = ["NOSAVE", "SAVE", "NOW", "FORCE", "ABORT"].map { Array($0.utf8) }

    /// Parses the options as Redis does (in any order, repeats allowed; SAVE with NOSAVE, or
    /// ABORT with any other, is a syntax error).
    private static func parse(_ args: CommandArguments) throws(CommandError) -> Command {
        var given: Set<Int> = []
        for index in 0..<args.count {
            guard let option = options.firstIndex(where: { CommandTable.matches(args[index], $0) }) else {
                throw syntaxError
            }
            given.insert(option)
        }
        let (noSave, save, abort) = (0, 1, 4)
        if given.contains(noSave) && given.contains(save) || given.contains(abort) && given.count > 1 { throw syntaxError }
        if given.contains(abort) {
            return .local(LocalCommand(replying: .error(.err, "No shutdown in progress.")))
        }
        return .local(LocalCommand(now: { context in
            context.shutdown.request(by: context.session.id, who: describe(context.session))
            context.session.requestClose()
            return .nothing
        }))
    }

    private static var syntaxError: CommandError {
        CommandError(.syntax, "syntax error (usage: SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT])")
    }

    /// The asking connection as the log names it: `connection 7, uid 1000, pid 4242`.
    private static func describe(_ session: ClientSession) -> String {
        guard let peer = session.peer else { return "connection \(session.id)" }
        return "connection \(session.id), uid \(peer.uid), pid \(peer.pid)"
    }
}
