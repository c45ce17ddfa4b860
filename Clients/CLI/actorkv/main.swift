// actorkv: the command-line client of actorkvd. Makes ActorKV state first-class in shell scripts:
//
//     actorkv put config theme dark
//     theme=$(actorkv get config theme) || theme=light
//
// Arguments are taken as raw bytes (not re-encoded), and `get` writes the value's exact bytes,
// so binary keys and values survive. See `usage` below for every command and exit code.
import ActorKVClient
import ActorKVProtocol
import Foundation
import Glibc

let usage = """
actorkv: command-line client of the ActorKV server (actorkvd).

Usage: actorkv [--socket PATH] [--timeout SECS] COMMAND [ARGUMENTS...]

Commands:
  get NS KEY                  print the value's exact bytes, with NO newline added
                              (so $(actorkv get ns key) and binary values are exact); exit 1 if missing
  put NS KEY VALUE            store VALUE; VALUE '-' reads the value from standard input to EOF
  put --if-version V NS KEY VALUE
                              store VALUE only if KEY's version is V (0: only if KEY is absent);
                              print the new version; exit 5, writing nothing, if it is not
  put --ttl SECS NS KEY VALUE KEY expires SECS seconds from now (fractions allowed, rounded up to
                              whole milliseconds): then it is gone for every read. A put without
                              --ttl removes any expiry KEY had. (--ttl and --if-version combine.)
                              There is no --ephemeral: a key that belongs to actorkv's own
                              connection would be deleted as soon as actorkv exits. To hold a key
                              for as long as a command runs, use lock.
  pttl NS KEY                 print the milliseconds KEY has left before it expires; -1 if it does
                              not expire; print -2 and exit 1 if KEY is missing
  expire NS KEY SECS          KEY expires SECS seconds from now (fractions allowed, rounded up to
                              whole milliseconds), keeping its value; print 1, or print 0 and exit
                              1 if KEY is missing. incr keeps an expiry: a count within a window is
                              incr, then expire when incr printed 1
  persist NS KEY              remove KEY's expiry; print 1, or 0 if it had none (or is missing)
  getv NS KEY                 print KEY's version on one line, then the value's exact bytes
                              (no newline added); print 0 and exit 1 if KEY is missing
  incr NS KEY [DELTA]         add DELTA (default 1, may be negative) to the integer under KEY
                              (missing: 0); print the result
  del NS KEY...               remove keys; print how many existed
  exists NS KEY...            print how many of the keys exist; exit 1 unless all of them do
  count NS                    print the number of keys in NS
  scan [--json] [--] NS [PREFIX]
                              print every entry (whose key starts with PREFIX) in key order, as
                              KEY<TAB>VALUE lines; in keys and values, backslash, tab, newline and
                              carriage return are written as \\\\ \\t \\n \\r so that each entry is one line.
                              --json prints a JSON array of {"key": ..., "value": ...} objects
                              instead; a key or value that is not valid UTF-8 is given as
                              "key_base64" / "value_base64" (base64 of the exact bytes) instead.
  batch NS OP...              apply the ops all-or-nothing; OP is 'put KEY VALUE', 'del KEY',
                              'ifversion KEY V' (a guard: apply only if KEY's version is V) or
                              'incr KEY DELTA'; print one line per op: OK for put and ifversion,
                              1 or 0 (existed) for del, the new value for incr; exit 5, applying
                              nothing, if a guard does not hold
  changes [--from SEQ | --snapshot] [--] NS [PREFIX]
                              follow NS's changes (to keys that start with PREFIX) as they are
                              written, until interrupted: one line per key that a change wrote,
                              SEQ<TAB>KEY<TAB>VALUE, with SEQ the change's sequence number and KEY
                              and VALUE escaped as scan escapes them; a deleted key's VALUE is \\N
                              (unambiguous: in an escaped value a backslash is followed by \\, t, n
                              or r only). The lines of one change are written, and flushed, together.
                              --from SEQ  first every change after SEQ (to resume: pass the last
                                          SEQ you read; 0: every change the server holds)
                              --snapshot  first every key and its value as of one sequence S, as
                                          lines S<TAB>KEY<TAB>VALUE, then the changes after S
                              neither     the changes from now on
                              If the connection breaks (the server restarts, is killed, drops a
                              reader that lags), it reconnects and resumes after the last line
                              printed: no change is missed or printed twice. It gives up (exit 4)
                              when it cannot reconnect for --timeout seconds (0: it never gives up),
                              exits 6 when the server no longer holds the changes after SEQ
                              (COMPACTED; follow with --snapshot instead), and 8 when it may not
                              read NS (NOPERM: refused, or cut off by a reload of the server's rules)
  lock [--timeout SECS] [--ttl SECS] NS KEY [--] COMMAND [ARG...]
                              wait for the lock named KEY in NS, run COMMAND (looked up in PATH)
                              holding it, release it when COMMAND exits, and exit with COMMAND's
                              exit status (128+N if signal N killed it), as flock(1) does. COMMAND
                              gets the lock's fencing token in $ACTORKV_LOCK_TOKEN: a number larger
                              for each holder of the lock than for every holder before it (pass it
                              with writes that a resource can refuse when it has seen a larger
                              one). While held, KEY's value is HOST:PID of the actorkv holding it.
                              The lock is KEY, written on a connection of its own: the server
                              releases the lock when that connection closes, and COMMAND inherits
                              it, as do the processes COMMAND starts. The lock is held while any
                              of them has the connection open: if actorkv is killed (even with
                              kill -9), until COMMAND has exited too; and a process that COMMAND
                              started (a daemon) and that still has the connection when COMMAND
                              exits keeps the lock, as with flock: actorkv exits then without
                              releasing it, and the server releases it once the last process
                              that has the connection exits or closes it. (actorkv looks for such
                              a process in /proc, among the processes it may inspect: its user's.)
                              So the lock is never left behind, nor released while COMMAND runs.
                              Waiting follows NS's changes (no polling).
                              --timeout SECS  give up after SECS seconds (exit 7; COMMAND is not
                                              run); 0: one attempt; default: wait for ever. (The
                                              --timeout before 'lock' bounds each server reply.)
                              --ttl SECS      the lock expires SECS seconds after it is taken, even
                                              if COMMAND still runs (a bound on a holder that hangs)
                              Exit 4 when the server cannot be reached, or when the lock was lost
                              before COMMAND ended (its connection broke: the server stopped or
                              was restarted; or --ttl ran out): the message gives COMMAND's status.
                              Exit 127 if COMMAND is not found, 126 if it cannot be run. A
                              file that is neither a binary nor a #! script is run with /bin/sh,
                              as flock(1) (execvp) runs it.
  compact NS                  snapshot NS and truncate its log
  namespaces                  print the namespace names, one per line
  info                        print the server's INFO text, in lines that end with a newline
                              (the server's CRLF line ends made LF, as the other commands print)
  ping [MESSAGE]              print PONG (or MESSAGE)

Options:
  --socket PATH, -s PATH      the server's socket (default: $ACTORKV_SOCKET, else ./actorkv.sock)
  --timeout SECS, -t SECS     give up (exit 4) when the server does not accept the connection, or
                              sends nothing of a reply, for SECS seconds (default 10; fractions
                              allowed; 0 waits forever)
  --help, -h                  print this text

The options of put, scan and changes may come anywhere among their arguments (lock's: before
NS). The first '--' ends them: every argument after it is taken as it is, even one that looks
like an option, so that a key, value or prefix that starts with '--' can be given:
  actorkv put ns key -- --ttl     stores the value '--ttl'
  actorkv scan ns -- --json       prints the entries whose key starts with '--json'
(The options before 'COMMAND' are actorkv's own: --socket, --timeout, --help; '--' ends them too.)

Commands that change data (put, compact) print nothing on success; put --if-version prints the
new version.

Exit status:
  0  success
  1  not found (get of a missing key; exists when not every key exists; pttl or expire of a
     missing key)
  2  usage error
  3  the server refused the request (its error 'CODE message' is printed on standard error;
     NOPERM is 8), or replied with something unexpected; or standard output could not be
     written ("actorkv: cannot write standard output: ..." on standard error)
  4  cannot connect to the server (nothing listens on the socket, or the server refused the
     connection with MAXCLIENTS, or with NOPERM for this user: actorkvd --allow-uid or
     --allow-gid), the server did not answer within --timeout, or the connection broke;
     lock: also when the lock was lost before COMMAND ended
  5  a condition did not hold (put --if-version, a batch's ifversion): nothing was written
  6  changes --from SEQ: the server no longer holds every change after SEQ (COMPACTED)
  7  lock: the lock was not acquired within lock --timeout SECS (COMMAND did not run)
  8  the server denied a right this command needs on its namespace (NOPERM, under actorkvd
     --acl; its error is printed on standard error as for 3): nothing was applied; changes:
     also when a reload of the server's rules withdrew the right to read NS
lock exits with COMMAND's status otherwise (which can be any of these numbers too: its standard
error tells them apart), 126 or 127 when COMMAND cannot be run.

"""

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
}

// MARK: Output

/// Writes all of `bytes` to `fd`, retrying on EINTR and short writes. Returns 0, or the errno of
/// the write that failed.
func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Int32 {
    var offset = 0
    while offset < bytes.count {
        let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
        if n > 0 { offset += n; continue }
        if n < 0 && errno == EINTR { continue }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
            // A non-blocking descriptor inherited from the parent: wait until the reader drains it.
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            _ = poll(&entry, 1, -1)
            continue
        }
        return n < 0 ? errno : EIO
    }
    return 0
}

/// Buffered standard output: flushed when it grows past 64 KiB and at exit. A failed write
/// throws (exit 3, "cannot write standard output: ..."); what is written after it is dropped.
final class Output {
    private var buffer: [UInt8] = []
    private var failed = false

    func write(_ bytes: [UInt8]) throws(Failure) {
        buffer.append(contentsOf: bytes)
        if buffer.count >= 64 * 1024 { try flush() }
    }

    func write(_ text: String) throws(Failure) { try write(Array(text.utf8)) }

    func line(_ text: String) throws(Failure) { try write(Array(text.utf8) + [0x0A]) }

    func flush() throws(Failure) {
        defer { buffer.removeAll(keepingCapacity: true) }
        guard !failed else { return }
        let code = writeAll(1, buffer)
        guard code == 0 else {
            failed = true
            throw Failure(code: Exit.output, message: "actorkv: cannot write standard output: \(errnoText(code))")
        }
    }
}

/// The text of an errno value, e.g. "No space left on device".
func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }

/// If descriptor 0, 1 or 2 was closed when the program started (`actorkv ping >&-`), fills it
/// with /dev/null opened the wrong way round, so that the socket cannot become standard output
/// and using it still fails (EBADF) as it would have.
func reserveStandardDescriptors() {
    for fd in Int32(0)...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
        let opened = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY)
        if opened >= 0 && opened != fd { _ = close(opened) }
    }
}

func printError(_ text: String) {
    _ = writeAll(2, Array((text.hasSuffix("\n") ? text : text + "\n").utf8))
}

// MARK: Formatting

/// Escapes backslash, tab, newline and carriage return, so a key or value fits in one TAB field.
func escapedField(_ bytes: [UInt8]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    for b in bytes {
        switch b {
        case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
        case UInt8(ascii: "\t"): out += [UInt8(ascii: "\\"), UInt8(ascii: "t")]
        case UInt8(ascii: "\n"): out += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
        case UInt8(ascii: "\r"): out += [UInt8(ascii: "\\"), UInt8(ascii: "r")]
        default: out.append(b)
        }
    }
    return out
}

/// `text` with each CRLF line end made LF, as every other command prints its lines (INFO's text
/// ends its lines with CRLF on the wire, which a script would otherwise find at each value's end).
func lfLineEnds(_ text: String) -> [UInt8] {
    let bytes = Array(text.utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.count)
    for (i, byte) in bytes.enumerated() where !(byte == 0x0D && i + 1 < bytes.count && bytes[i + 1] == 0x0A) {
        out.append(byte)
    }
    return out
}

/// A JSON member `"name":"text"` for valid UTF-8, else `"name_base64":"..."`.
func jsonMember(_ name: String, _ bytes: [UInt8]) -> String {
    guard let text = String(validating: bytes, as: UTF8.self) else {
        return "\"\(name)_base64\":\"\(Data(bytes).base64EncodedString())\""
    }
    var out = "\"\(name)\":\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        case _ where scalar.value < 0x20 || scalar.value == 0x7F:
            let hex = String(scalar.value, radix: 16)
            out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}

/// The lines `changes` prints for a change stream's events (see `usage`).
///
/// A snapshot that a broken connection cut short is followed by a new one, whose lines repeat
/// the keys that still exist; a key printed from the unfinished snapshot that the new one no
/// longer holds was deleted meanwhile, and gets a deleted line once the new snapshot is complete.
/// For that, the keys of a snapshot are remembered while it is printed.
struct ChangeLines {
    /// Keys printed from the snapshot being printed; nil when none is.
    private var snapshotKeys: Set<[UInt8]>?
    /// Keys printed from unfinished snapshots before it.
    private var abandoned: Set<[UInt8]> = []
    private var snapshotSequence: UInt64 = 0

    /// The lines for `event`, together.
    mutating func lines(for event: ChangeEvent) -> [UInt8] {
        var out: [UInt8] = []
        switch event {
        case .snapshot(let page):
            if page.isFirst {
                if let printed = snapshotKeys { abandoned.formUnion(printed) }
                snapshotKeys = []
                snapshotSequence = page.sequence
            }
            for entry in page.entries {
                snapshotKeys?.insert(entry.key)
                Self.append(page.sequence, entry.key, entry.value, to: &out)
            }
        case .change(let change):
            endSnapshot(into: &out)
            for changed in change.keys { Self.append(change.sequence, changed.key, changed.value, to: &out) }
        case .synced:
            endSnapshot(into: &out)
        }
        return out
    }

    /// After a snapshot's last page: deleted lines for the keys only an unfinished one printed.
    private mutating func endSnapshot(into out: inout [UInt8]) {
        guard let printed = snapshotKeys else { return }
        snapshotKeys = nil
        let gone = abandoned.subtracting(printed).sorted { $0.lexicographicallyPrecedes($1) }
        abandoned = []
        for key in gone { Self.append(snapshotSequence, key, nil, to: &out) }
    }

    /// Appends `SEQ<TAB>KEY<TAB>VALUE` (VALUE `\N` for nil) and a newline.
    static func append(_ sequence: UInt64, _ key: [UInt8], _ value: [UInt8]?, to out: inout [UInt8]) {
        out += Array(String(sequence).utf8)
        out.append(UInt8(ascii: "\t"))
        out += escapedField(key)
        out.append(UInt8(ascii: "\t"))
        out += value.map(escapedField) ?? [UInt8(ascii: "\\"), UInt8(ascii: "N")]
        out.append(0x0A)
    }
}

// MARK: Arguments

/// The program's arguments as raw bytes (not re-encoded: invalid UTF-8 passes through).
func rawArguments() -> [[UInt8]] {
    (1..<Int(CommandLine.argc)).map { i in
        guard let pointer = CommandLine.unsafeArgv[i] else { return [] }
        return Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map { UInt8(bitPattern: $0) }
    }
}

func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

func usageFailure(_ message: String) -> Failure {
    Failure(code: Exit.usage, message: "actorkv: \(message)\nRun 'actorkv --help' for usage.")
}

/// A command's operands: `arguments` without the options that `option` takes. `option` is given
/// each argument that starts with `--` (before the first `--` alone) and what follows it, to take
/// the option's value from; it returns false for a word that is not one of its options, which is
/// then an operand. Options may come anywhere among the operands. The first `--` ends them and
/// is dropped: every argument after it is an operand, even one that looks like an option (`put ns
/// k -- --ttl` stores the value `--ttl`; `scan ns -- --json` scans the prefix `--json`), as
/// POSIX utilities read `--`.
func operands(of arguments: ArraySlice<[UInt8]>,
              option: (String, inout ArraySlice<[UInt8]>) throws(Failure) -> Bool) throws(Failure) -> ArraySlice<[UInt8]> {
    let endOfOptions = Array("--".utf8)
    var rest: [[UInt8]] = []
    var remaining = arguments
    while let argument = remaining.popFirst() {
        if argument == endOfOptions {
            rest += remaining
            break
        }
        if argument.starts(with: endOfOptions), try option(text(argument), &remaining) { continue }
        rest.append(argument)
    }
    return rest[...]
}

/// The value of option `name` if `word` is it: `NAME VALUE` (VALUE taken from `remaining`) or
/// `NAME=VALUE`; nil if `word` is not `name`.
func optionValue(_ name: String, needing what: String, _ word: String,
                 _ remaining: inout ArraySlice<[UInt8]>) throws(Failure) -> String? {
    if word == name {
        guard let next = remaining.popFirst() else { throw usageFailure("\(name) needs \(what)") }
        return text(next)
    }
    return word.hasPrefix(name + "=") ? String(word.dropFirst(name.count + 1)) : nil
}

/// `put`'s options: `--if-version V` and `--ttl SECS` (also as `--option=VALUE`), each at most
/// once, anywhere before a `--` (see ``operands(of:option:)``); `--ephemeral` is refused with the
/// reason. Returns them and the operands.
func takePutOptions(from arguments: ArraySlice<[UInt8]>) throws(Failure)
    -> (ifVersion: UInt64?, ttl: Duration?, rest: ArraySlice<[UInt8]>) {
    var ifVersion: UInt64?
    var ttl: Duration?
    let rest = try operands(of: arguments) { (word, remaining) throws(Failure) -> Bool in
        if let value = try optionValue("--if-version", needing: "a version", word, &remaining) {
            guard ifVersion == nil else { throw usageFailure("--if-version given twice") }
            ifVersion = try parseVersion(value, "--if-version")
        } else if let value = try optionValue("--ttl", needing: "a number of seconds", word, &remaining) {
            guard ttl == nil else { throw usageFailure("--ttl given twice") }
            ttl = try parseSeconds(value, "--ttl", positive: true)
        } else if word == "--ephemeral" {
            throw usageFailure("put --ephemeral is not offered: the key would belong to actorkv's own connection and be "
                + "deleted as soon as actorkv exits (to hold a key while a command runs, use lock)")
        } else {
            return false
        }
        return true
    }
    return (ifVersion, ttl, rest)
}

/// A version: decimal digits as the server reads them, 0 to 2^63-1 (0: absent).
func parseVersion(_ value: String, _ what: String) throws(Failure) -> UInt64 {
    guard let n = ASCIIDecimal.parse(Array(value.utf8)[...]), n >= 0 else {
        throw usageFailure("\(what) needs a version (an integer from 0 up), not '\(value)'")
    }
    return UInt64(n)
}

/// Removes `changes`'s options (`--from SEQ`, `--from=SEQ`, `--snapshot`) from its arguments;
/// returns where to start and the rest. `--` ends the options (for a PREFIX that starts with `--`).
func takeChangeStart(from arguments: ArraySlice<[UInt8]>) throws(Failure) -> (ChangeStart, ArraySlice<[UInt8]>) {
    var start: ChangeStart?
    var rest: [[UInt8]] = []
    var remaining = arguments
    func set(_ value: ChangeStart) throws(Failure) {
        guard start == nil else { throw usageFailure("changes: give one of --from SEQ and --snapshot, once") }
        start = value
    }
    while let argument = remaining.popFirst() {
        let word = text(argument)
        if word == "--" {
            rest += remaining
            break
        } else if word == "--snapshot" {
            try set(.snapshot)
        } else if word == "--from" || word.hasPrefix("--from=") {
            let value: String
            if word == "--from" {
                guard let next = remaining.popFirst() else { throw usageFailure("changes: --from needs a sequence number") }
                value = text(next)
            } else {
                value = String(word.dropFirst("--from=".count))
            }
            guard let n = ASCIIDecimal.parse(Array(value.utf8)[...]), n >= 0 else {
                throw usageFailure("changes: --from needs a sequence number (an integer from 0 up), not '\(value)'")
            }
            try set(.after(UInt64(n)))
        } else if word.hasPrefix("--") {
            throw usageFailure("changes: unknown option '\(word)' (expected --from SEQ or --snapshot)")
        } else {
            rest.append(argument)
        }
    }
    return (start ?? .now, rest[...])
}

/// A signed 64-bit decimal integer.
func parseInteger(_ value: String, _ what: String) throws(Failure) -> Int64 {
    guard let n = ASCIIDecimal.parse(Array(value.utf8)[...]) else {
        throw usageFailure("\(what) needs an integer, not '\(value)'")
    }
    return n
}

/// Reads standard input to EOF.
func readStandardInput() throws(Failure) -> [UInt8] {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let n = chunk.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress, $0.count) }
        if n > 0 { bytes.append(contentsOf: chunk[0..<n]); continue }
        if n == 0 { return bytes }
        if errno == EINTR { continue }
        throw Failure(code: Exit.usage, message: "actorkv: cannot read standard input: \(errnoText(errno))")
    }
}

// MARK: Commands

func run(_ arguments: [[UInt8]], output: Output, signalMask: sigset_t) async throws(Failure) -> Int32 {
    var socketPath = ProcessInfo.processInfo.environment["ACTORKV_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        ?? "./actorkv.sock"
    var timeout: Duration? = ActorKVClient.defaultTimeout
    var rest = arguments[...]
    var json = false
    func parseTimeout(_ value: String, _ option: String) throws(Failure) -> Duration? {
        guard let seconds = Double(value), seconds.isFinite, seconds >= 0, seconds <= 1e9 else {
            throw usageFailure("\(option) needs a number of seconds (0 waits forever), not '\(value)'")
        }
        return seconds == 0 ? nil : .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
    }
    while let first = rest.first, first.first == UInt8(ascii: "-"), first.count > 1 {
        rest.removeFirst()
        let option = text(first)
        switch option {
        case "--help", "-h":
            try output.write(usage)
            return Exit.ok
        case "--socket", "-s":
            guard let path = rest.popFirst() else { throw usageFailure("\(option) needs a path") }
            socketPath = text(path)
        case _ where option.hasPrefix("--socket="):
            socketPath = String(option.dropFirst("--socket=".count))
        case "--timeout", "-t":
            guard let value = rest.popFirst() else { throw usageFailure("\(option) needs a number of seconds") }
            timeout = try parseTimeout(text(value), option)
        case _ where option.hasPrefix("--timeout="):
            timeout = try parseTimeout(String(option.dropFirst("--timeout=".count)), "--timeout")
        case "--json":
            json = true
        case "--":
            break
        default:
            throw usageFailure("unknown option '\(option)'")
        }
        if option == "--" { break }
    }
    guard let commandBytes = rest.popFirst() else { throw usageFailure("no command given") }
    let command = text(commandBytes).lowercased()
    if command == "help" {
        try output.write(usage)
        return Exit.ok
    }
    if command == "scan" {
        rest = try operands(of: rest) { (word, _) throws(Failure) -> Bool in
            guard word == "--json" else { return false }
            json = true
            return true
        }
    } else if json {
        throw usageFailure("--json applies to scan only")
    }
    var ifVersion: UInt64?
    var ttl: Duration?
    if command == "put" || command == "set" {
        (ifVersion, ttl, rest) = try takePutOptions(from: rest)
    }
    var lockOptions = LockOptions()
    if command == "lock" {
        (lockOptions, rest) = try takeLockOptions(from: rest)
    }
    var changeStart = ChangeStart.now
    if command == "changes" {
        (changeStart, rest) = try takeChangeStart(from: rest)
    }
    var args = Array(rest)

    func need(_ range: ClosedRange<Int>, _ form: String) throws(Failure) {
        guard range.contains(args.count) else { throw usageFailure("usage: actorkv \(form)") }
    }
    let many = Int.max - 1

    let client = ActorKVClient(socketPath: socketPath, timeout: timeout)
    var status = Exit.ok
    do {
        switch command {
        case "get":
            try need(2...2, "get NS KEY")
            guard let value = try await client.get(text(args[0]), args[1]) else { return Exit.notFound }
            try output.write(value)
        case "put", "set":
            try need(3...3, "put [--if-version V] [--ttl SECS] [--] NS KEY VALUE   (VALUE '-' reads standard input)")
            if args[2] == [UInt8(ascii: "-")] { args[2] = try readStandardInput() }
            guard let ifVersion else {
                try await client.put(text(args[0]), args[1], args[2], ttl: ttl)
                break
            }
            guard let version = try await client.put(text(args[0]), args[1], args[2], ifVersion: ifVersion, ttl: ttl) else {
                throw Failure(code: Exit.conditionFailed, message: "actorkv: not written: the key's version is not \(ifVersion)")
            }
            try output.line(String(version))
        case "getv":
            try need(2...2, "getv NS KEY")
            guard let found = try await client.getVersioned(text(args[0]), args[1]) else {
                try output.line("0")
                return Exit.notFound
            }
            try output.line(String(found.version))
            try output.write(found.value)
        case "pttl":
            try need(2...2, "pttl NS KEY")
            switch try await client.pttl(text(args[0]), args[1]) {
            case .absent:
                try output.line("-2")
                return Exit.notFound
            case .persistent:
                try output.line("-1")
            case .remaining(let left):
                try output.line(String(Int64((left / .milliseconds(1)).rounded())))
            }
        case "expire":
            try need(3...3, "expire NS KEY SECS")
            let ttl = try parseSeconds(text(args[2]), "expire: SECS", positive: true)
            let set = try await client.pexpire(text(args[0]), args[1], ttl: ttl)
            try output.line(set ? "1" : "0")
            if !set { return Exit.notFound }
        case "persist":
            try need(2...2, "persist NS KEY")
            try output.line(try await client.persist(text(args[0]), args[1]) ? "1" : "0")
        case "lock":
            let form = "lock [--timeout SECS] [--ttl SECS] NS KEY [--] COMMAND [ARG...]"
            try need(3...many, form)
            var commandLine = Array(args[2...])
            if commandLine.first == Array("--".utf8) { commandLine.removeFirst() }
            guard !commandLine.isEmpty, !commandLine[0].isEmpty else { throw usageFailure("usage: actorkv \(form)") }
            let namespace = text(args[0])
            let held: HeldLock
            do throws(ActorKVError) {
                held = try await client.acquireLock(namespace, args[1], timeout: lockOptions.timeout, ttl: lockOptions.ttl)
            } catch {
                guard case .lockTimedOut = error else { throw error }
                var message = "actorkv: \(error)"
                if let owner = try? await client.get(namespace, args[1]) { message += " (held by \(text(owner)))" }
                throw Failure(code: Exit.lockTimedOut, message: message)
            }
            let outcome: Result<Int32, Failure>
            let descriptor = held.inheritableDescriptor()
            let connection = descriptor < 0 ? nil : socketInode(descriptor)
            if descriptor < 0 {
                outcome = .failure(Failure(code: Exit.commandNotRunnable,
                                           message: "actorkv: lock: cannot pass the lock's connection on: \(errnoText(errno))"))
            } else {
                do throws(Failure) {
                    outcome = .success(try await runCommand(commandLine, token: held.token, descriptor: descriptor,
                                                            signalMask: signalMask))
                } catch {
                    outcome = .failure(error)
                }
            }
            if case .success(let commandStatus) = outcome, socketOpenElsewhere(inode: connection) != false {
                // A process that COMMAND started (a daemon) still has the lock's connection open:
                // it keeps the lock, as it would keep flock(1)'s. Releasing would delete the key,
                // for every process that has the connection (as flock -u); so actorkv only
                // checks that the lock is still held and exits, closing its own copy: the server
                // releases the lock when the last copy is closed. (Lost or not, the connection is
                // the daemon's too: it is not shut down.)
                keepUntilExit(held)
                if let reason = try await lockLostReason(held, checkingWith: client) {
                    let lost = ActorKVError.lockLost(namespace: namespace, key: args[1], token: held.token, reason: reason)
                    throw Failure(code: Exit.connection, message: "actorkv: \(lost) (the command exited with status \(commandStatus))")
                }
                status = commandStatus
                break
            }
            do throws(ActorKVError) {
                try await held.release()
            } catch {
                if case .lockLost = error, case .success(let commandStatus) = outcome {
                    throw Failure(code: Exit.connection, message: "actorkv: \(error) (the command exited with status \(commandStatus))")
                }
                if case .success = outcome {
                    printError("actorkv: lock: releasing the lock: \(error) (closing its connection released it)")
                }
            }
            status = try outcome.get()
        case "incr":
            try need(2...3, "incr NS KEY [DELTA]")
            let delta = try args.count == 3 ? parseInteger(text(args[2]), "incr: DELTA") : 1
            try output.line(String(try await client.increment(text(args[0]), args[1], by: delta)))
        case "del", "delete":
            try need(2...many, "del NS KEY...")
            try output.line(String(try await client.delete(text(args[0]), Array(args[1...]))))
        case "exists":
            try need(2...many, "exists NS KEY...")
            let n = try await client.exists(text(args[0]), Array(args[1...]))
            try output.line(String(n))
            if n < args.count - 1 { return Exit.notFound }
        case "count":
            try need(1...1, "count NS")
            try output.line(String(try await client.count(text(args[0]))))
        case "scan":
            try need(1...2, "scan [--json] [--] NS [PREFIX]")
            let entries = client.scan(text(args[0]), prefix: args.count > 1 ? args[1] : [], pageSize: 1000)
            var first = true
            if json { try output.write("[") }
            for try await entry in entries {
                if json {
                    try output.write((first ? "\n  {" : ",\n  {") + jsonMember("key", entry.key) + ","
                                 + jsonMember("value", entry.value) + "}")
                } else {
                    try output.write(escapedField(entry.key) + [UInt8(ascii: "\t")] + escapedField(entry.value) + [0x0A])
                }
                first = false
            }
            if json { try output.write(first ? "]\n" : "\n]\n") }
        case "batch":
            try need(3...many, "batch NS put KEY VALUE | del KEY ...")
            var operations: [BatchOperation] = []
            var i = 1
            while i < args.count {
                switch text(args[i]).lowercased() {
                case "put":
                    guard i + 2 < args.count else { throw usageFailure("batch: put needs a key and a value") }
                    operations.append(.put(key: args[i + 1], value: args[i + 2]))
                    i += 3
                case "del", "delete":
                    guard i + 1 < args.count else { throw usageFailure("batch: del needs a key") }
                    operations.append(.delete(key: args[i + 1]))
                    i += 2
                case "ifversion":
                    guard i + 2 < args.count else { throw usageFailure("batch: ifversion needs a key and a version") }
                    operations.append(.ifVersion(key: args[i + 1], version: try parseVersion(text(args[i + 2]), "batch: ifversion")))
                    i += 3
                case "incr":
                    guard i + 2 < args.count else { throw usageFailure("batch: incr needs a key and a delta") }
                    operations.append(.increment(key: args[i + 1], by: try parseInteger(text(args[i + 2]), "batch: incr")))
                    i += 3
                default:
                    throw usageFailure("batch: unknown op '\(text(args[i]))' (expected put, del, ifversion or incr)")
                }
            }
            guard let results = try await client.batch(text(args[0]), operations) else {
                throw Failure(code: Exit.conditionFailed, message: "actorkv: nothing applied: an ifversion guard did not hold")
            }
            for result in results {
                switch result {
                case .stored, .held: try output.line("OK")
                case .deleted(let existed): try output.line(existed ? "1" : "0")
                case .counted(let value): try output.line(String(value))
                }
            }
        case "changes":
            try need(1...2, "changes [--from SEQ | --snapshot] [--] NS [PREFIX]")
            // Reconnecting gives up after --timeout (never with 0), like a wait for a reply.
            let stream = client.changes(text(args[0]), prefix: args.count > 1 ? args[1] : [], from: changeStart,
                                        reconnect: ReconnectPolicy(giveUpAfter: timeout))
            var lines = ChangeLines()
            for try await event in stream {
                try output.write(lines.lines(for: event))
                try output.flush()
            }
        case "compact":
            try need(1...1, "compact NS")
            try await client.compact(text(args[0]))
        case "namespaces":
            try need(0...0, "namespaces")
            for name in try await client.namespaces() { try output.line(name) }
        case "info":
            try need(0...0, "info")
            try output.write(lfLineEnds(try await client.info()))
        case "ping":
            try need(0...1, "ping [MESSAGE]")
            if args.isEmpty {
                try output.line(try await client.ping())
            } else {
                try output.write(try await client.ping(args[0]) + [0x0A])
            }
        default:
            throw usageFailure("unknown command '\(text(commandBytes))'")
        }
    } catch let error as Failure {
        throw error
    } catch let error as ActorKVError {
        switch error {
        case .server(let code, let message) where WireErrorCode.refusesConnection(code: code, message: message):
            // A refusal on accept is "cannot connect" (the client reports it as .refused; this
            // keeps exit 4 should one ever come back as a reply).
            throw Failure(code: Exit.connection, message: "actorkv: cannot connect to \(socketPath): "
                          + "the server refused the connection: \(message.isEmpty ? code : "\(code) \(message)")")
        case .server(let code, let message):
            throw Failure(code: error.isPermissionDenied ? Exit.permissionDenied : Exit.server,
                          message: message.isEmpty ? code : "\(code) \(message)")
        case .cannotConnect, .refused, .timedOut, .connectionLost, .closed:
            throw Failure(code: Exit.connection, message: "actorkv: \(error)")
        case .compacted:
            throw Failure(code: Exit.compacted, message: "actorkv: \(error)")
        case .lockTimedOut:
            throw Failure(code: Exit.lockTimedOut, message: "actorkv: \(error)")
        case .lockLost:
            throw Failure(code: Exit.connection, message: "actorkv: \(error)")
        case .protocolViolation, .decodingFailed, .encodingFailed, .conflict:
            throw Failure(code: Exit.server, message: "actorkv: \(error)")
        case .cancelled:
            // Not raised: no task of this program is cancelled while it waits (a signal ends
            // the process).
            throw Failure(code: Exit.server, message: "actorkv: \(error)")
        }
    } catch {
        throw Failure(code: Exit.server, message: "actorkv: \(error)")
    }
    await client.close()
    return status
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
