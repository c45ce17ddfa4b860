#if canImport(Glibc)
import Glibc
#endif

/// A mistake in the ACL file, or the file could not be read: `acl.conf:3: unknown right 'wrte'
/// (expected read, write or admin)`, or `acl.conf: cannot read: No such file or directory`.
struct AccessRulesError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file, as given to the loader.
    let file: String
    /// The line of the mistake, from 1; nil when the file as a whole is at fault.
    let line: Int?
    /// What is wrong, naming the offending word.
    let message: String

    /// `file:line: message`, or `file: message` without a line.
    var description: String {
        if let line { return "\(file):\(line): \(message)" }
        return "\(file): \(message)"
    }
}

/// A parsed ACL file (`actorkvd --acl FILE`): who holds which rights on which namespaces.
///
/// One rule a line, `SUBJECT NAMESPACES RIGHT [RIGHT ...]`, words separated by spaces or tabs;
/// `#`, wherever it is, starts a comment that runs to the end of the line; blank lines are ignored
/// and a `\r` before the newline counts as a space (CRLF files load). The file is UTF-8 text: a
/// control byte other than tab, or bytes that are not UTF-8, are a mistake even in a comment.
///
/// - SUBJECT: `uid:N`, `user:NAME`, `gid:N`, `group:NAME` or `*` (anyone). N is a decimal
///   number from 0 to 4294967294. Names are resolved to ids when the file is loaded.
/// - NAMESPACES: `*` (every namespace), `PREFIX*` (every namespace whose name starts with
///   PREFIX) or an exact namespace name.
/// - RIGHT: `read`, `write` or `admin`; at least one.
///
/// A peer's rights on a namespace are the union of the rights of every rule whose subject
/// matches the peer (`gid:N` matches its primary group and its supplementary groups) and whose
/// pattern matches the namespace. Every mistake is an error naming the file, the line and the
/// word; nothing is skipped. An empty file, or one of comments only, is valid and grants nothing.
struct AccessRules: Sendable {
    /// The file, as given to the loader.
    let file: String
    /// The rules, in file order.
    let rules: [AccessRule]

    /// The largest file ``load(path:names:)`` accepts: 4 MiB.
    static let maxFileSize = 4 << 20

    /// Parses the contents of an ACL file named `file` (for messages), resolving user and group
    /// names through `names`. Throws at the first mistake.
    static func parse(_ bytes: [UInt8], file: String, names: AccountNames = .system) throws(AccessRulesError) -> AccessRules {
        var rules: [AccessRule] = []
        var number = 0
        for text in bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            number += 1
            if let rule = try AccessRule.Parser(file: file, line: number, names: names).rule(text) { rules.append(rule) }
        }
        return AccessRules(file: file, rules: rules)
    }

    /// Reads and parses the ACL file at `path`. Throws if it cannot be read, is not a regular
    /// file, is larger than ``maxFileSize``, or has a mistake: a file that cannot be read never
    /// means "allow all".
    static func load(path: String, names: AccountNames = .system) throws(AccessRulesError) -> AccessRules {
        try parse(readFile(path), file: path, names: names)
    }

    /// The rights `peer` holds on `namespace`: the union of those of every rule that matches both.
    func rights(of peer: PeerIdentity, on namespace: String) -> AccessRights {
        var held: AccessRights = []
        for rule in rules where !held.isSuperset(of: rule.rights) {
            held.formUnion(rule.grants(to: peer, on: namespace))
        }
        return held
    }
}

extension AccessRules {
    /// The whole of the regular file at `path`, read with open/fstat/read.
    private static func readFile(_ path: String) throws(AccessRulesError) -> [UInt8] {
        let fd = try open(path)
        defer { _ = Glibc.close(fd) }
        let size = try regularFileSize(fd, path)
        guard size <= maxFileSize else { throw tooLarge(path) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(size)
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw cannotRead(path, errno) }
            if n == 0 { return bytes }
            bytes += chunk[..<n]
            guard bytes.count <= maxFileSize else { throw tooLarge(path) }
        }
    }

    /// Opens `path` for reading (not blocking on a FIFO, which ``regularFileSize(_:_:)`` refuses).
    private static func open(_ path: String) throws(AccessRulesError) -> Int32 {
        while true {
            let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            if fd >= 0 { return fd }
            if errno != EINTR { throw cannotRead(path, errno) }
        }
    }

    /// The size of the open file `fd`; throws unless it is a regular file that only the server's
    /// user (or root) may change: whoever may write the rules holds every right, so a file that
    /// others may write to or that another user owns is refused, as sshd's StrictModes does and
    /// as the data directory is, and so is one in a directory where another user could replace
    /// it (``PrivateDirectory``, as the socket's directory).
    private static func regularFileSize(_ fd: Int32, _ path: String) throws(AccessRulesError) -> Int {
        var status = stat()
        guard fstat(fd, &status) == 0 else { throw cannotRead(path, errno) }
        switch status.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw cannotRead(path, EISDIR)
        default: throw AccessRulesError(file: path, line: nil, message: "cannot read: not a regular file")
        }
        if let problem = ownershipProblem(uid: status.st_uid, mode: status.st_mode, serverUID: geteuid()) ?? directoryProblem(path) {
            throw AccessRulesError(file: path, line: nil, message: problem)
        }
        return Int(status.st_size)
    }

    /// Why another user could replace the file at `path` where it is named or, through a
    /// symbolic link, where it really is: either directory writable by others than the server's
    /// user (its group included) without the sticky bit, or owned by another user. Nil if neither.
    private static func directoryProblem(_ path: String) -> String? {
        let named = PrivateDirectory.containing(path)
        let holding = "the file, and so grant every right"
        if let problem = PrivateDirectory.problem(named, role: "its directory", holding: holding, groupToo: true) { return problem }
        guard let resolved = realpath(path, nil) else { return nil }  // fstat found it: a race, judged at the next load
        defer { free(resolved) }
        let real = PrivateDirectory.containing(String(cString: resolved))
        guard real != named else { return nil }
        return PrivateDirectory.problem(real, role: "the directory it links into,", holding: holding, groupToo: true)
    }

    /// Why a file with this owner and mode may not hold the rules, or nil if it may.
    static func ownershipProblem(uid: uid_t, mode: mode_t, serverUID: uid_t) -> String? {
        if mode & 0o022 != 0 {
            return "other users may write to it (mode \(String(mode & 0o777, radix: 8))), and whoever writes it grants every right; run chmod go-w on it"
        }
        if uid != serverUID && uid != 0 {
            return "it is owned by uid \(uid), neither the server's uid \(serverUID) nor root, and its owner could grant every right; chown it"
        }
        return nil
    }

    private static func cannotRead(_ path: String, _ code: Int32) -> AccessRulesError {
        AccessRulesError(file: path, line: nil, message: "cannot read: \(String(cString: strerror(code)))")
    }

    private static func tooLarge(_ path: String) -> AccessRulesError {
        AccessRulesError(file: path, line: nil, message: "the file is larger than 4 MiB (\(maxFileSize) bytes), the most an ACL file may be")
    }
}
