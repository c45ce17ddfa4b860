// Reading the program's arguments: operands, each command's options, numbers, standard input.
import ActorKVClient
import ActorKVProtocol
import Glibc

/// The program's arguments as raw bytes (not re-encoded: invalid UTF-8 passes through).
func rawArguments() -> [[UInt8]] {
    (1..<Int(CommandLine.argc)).map { i in
        guard let pointer = CommandLine.unsafeArgv[i] else { return [] }
        return Array(UnsafeBufferPointer(start: pointer, count: strlen(pointer))).map { UInt8(bitPattern: $0) }
    }
}

/// `bytes` as text (invalid UTF-8 shown as U+FFFD), for messages and for names.
func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// A command's operands: `arguments` without the options that `option` takes. `option` is given
/// each argument that starts with `--` (before the first `--` alone) and what follows it, to take
/// the option's value from; it returns false for a word that is not one of its options, which is
/// a usage error (a mistyped `--jsno` is not taken for a prefix). Options may come anywhere among
/// the operands. The first `--` ends them and is dropped: every argument after it is an operand,
/// even one that looks like an option (`put ns k -- --ttl` stores the value `--ttl`; `scan ns --
/// --json` scans the prefix `--json`), as POSIX utilities read `--`.
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
        if argument.starts(with: endOfOptions) {
            guard try option(text(argument), &remaining) else {
                throw usageFailure("unknown option '\(text(argument))' (an operand that starts with '--' goes after '--')")
            }
            continue
        }
        if rest.isEmpty { try refuseShortOption(argument) }
        rest.append(argument)
    }
    return rest[...]
}

/// Throws a usage error if `first`, a command's first operand (its namespace) taken before any
/// `--`, looks like a one-letter option (`-n`, `-w 5`, as flock(1) and others take): actorkv's
/// commands have none, and it would be taken for a namespace (made by a write). A namespace that
/// starts with '-' goes after '--'. A negative number (`-5`) is no option.
func refuseShortOption(_ first: [UInt8]) throws(Failure) {
    guard first.count > 1, first[0] == UInt8(ascii: "-"), !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first[1]) else { return }
    throw usageFailure("unknown option '\(text(first))' (the command's options are spelled --name; a namespace that starts with '-' goes after '--')")
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
            if rest.isEmpty { try refuseShortOption(argument) }
            rest.append(argument)
        }
    }
    return (start ?? .now, rest[...])
}

/// True when `arguments` (a command's, after the command word) ask for the usage: `--help`
/// among the options, which for `lock` come before NS (its COMMAND's own `--help` is COMMAND's),
/// and for the other commands anywhere before a `--`.
func asksForHelp(_ command: String, _ arguments: ArraySlice<[UInt8]>) -> Bool {
    let help = Array("--help".utf8), endOfOptions = Array("--".utf8)
    guard command == "lock" else { return arguments.prefix { $0 != endOfOptions }.contains(help) }
    var rest = arguments
    while let word = rest.popFirst(), word.starts(with: endOfOptions), word != endOfOptions {
        if word == help { return true }
        if word == Array("--timeout".utf8) || word == Array("--ttl".utf8) { _ = rest.popFirst() }
    }
    return false
}

/// The most seconds an option takes (about 31 years).
let maximumSeconds = 1e9

/// `value` as a number of seconds: decimal digits with at most one `.` (`5`, `0.25`, `.5`), up
/// to ``maximumSeconds``; nil for anything else (a sign, an exponent, hexadecimal, `inf`).
func decimalSeconds(_ value: String) -> Double? {
    let digits = value.utf8.filter { $0 != UInt8(ascii: ".") }
    guard !digits.isEmpty, value.utf8.count - digits.count <= 1,
          digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
          let seconds = Double(value), seconds <= maximumSeconds else { return nil }
    return seconds
}

/// A number of seconds (fractions allowed: ``decimalSeconds(_:)``) given to `option`: at least 0,
/// or more than 0 when `positive`.
func parseSeconds(_ value: String, _ option: String, positive: Bool) throws(Failure) -> Duration {
    guard let seconds = decimalSeconds(value), !positive || seconds > 0 else {
        throw usageFailure("\(option) needs a number of seconds (\(positive ? "more than 0" : "0 or more"), at most 1000000000), "
                           + "not '\(value)'")
    }
    return .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
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
