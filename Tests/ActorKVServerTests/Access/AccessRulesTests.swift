@testable import ActorKVServer
import ActorKVTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The namespace-permission file (`actorkvd --acl FILE`), parsed and resolved with no server: the
/// example protocol.md gives, every mistake's exact message, the loader's refusals, the system's
/// account lookups, random and mutated files that must parse or fail cleanly, and random rule
/// sets whose rights must equal a naive union computed here.
@Suite("ACL file: parsing, loading and resolving rights")
struct AccessRulesTests {
    /// The example of protocol.md.
    static let example = """
        # subject      namespaces   rights
        *              public       read
        user:backup    *            read
        group:staff    jobs-*       read write
        uid:1000       scratch      read write admin

        """

    /// Accounts of a pretend system: no test depends on the real one (but the one that tests it).
    static let names = AccountNames(
        uidForUser: { ["backup": 34, "alice": 1000, "u0": 0, "u1": 1, "u2": 2, "u3": 3][$0] },
        gidForGroup: { ["staff": 50, "ops": 60, "g0": 0, "g1": 1, "g2": 2, "g3": 3][$0] },
        userForUID: { [34: "backup", 1000: "alice"][$0] })

    static func parse(_ text: String, file: String = "acl.conf") throws(AccessRulesError) -> AccessRules {
        try AccessRules.parse(Array(text.utf8), file: file, names: names)
    }

    static func peer(_ uid: UInt32, _ gid: UInt32, _ groups: [UInt32] = []) -> PeerIdentity {
        PeerIdentity(uid: uid, gid: gid, groups: groups)
    }

    // MARK: The example

    @Test("the example file parses to its four rules, in order, with names resolved to ids")
    func exampleRules() throws {
        let rules = try Self.parse(Self.example)
        #expect(rules.file == "acl.conf")
        #expect(rules.rules == [
            AccessRule(subject: .anyone, pattern: .exact(Array("public".utf8)), rights: .read, line: 2),
            AccessRule(subject: .user(34), pattern: .any, rights: .read, line: 3),
            AccessRule(subject: .group(50), pattern: .prefix(Array("jobs-".utf8)), rights: [.read, .write], line: 4),
            AccessRule(subject: .user(1000), pattern: .exact(Array("scratch".utf8)), rights: .all, line: 5),
        ])
        #expect(rules.rules.map(\.subject.description) == ["*", "uid:34", "gid:50", "uid:1000"])
        #expect(rules.rules.map(\.pattern.description) == ["public", "*", "jobs-*", "scratch"])
    }

    @Test("the example grants what its prose says: uid 1000, staff by either group, backup, anyone")
    func exampleRights() throws {
        let rules = try Self.parse(Self.example)
        let cases: [(PeerIdentity, String, String)] = [
            (Self.peer(1000, 1000), "scratch", "read write admin"),
            (Self.peer(1000, 1000), "public", "read"),
            (Self.peer(1000, 1000), "scratch2", "none"),
            (Self.peer(1000, 1000), "jobs-x", "none"),
            (Self.peer(2000, 100, [7, 50]), "jobs-x", "read write"),
            (Self.peer(2000, 100, [7, 50]), "jobs-", "read write"),
            (Self.peer(2000, 100, [7, 50]), "jobsx", "none"),
            (Self.peer(2000, 100, [7, 50]), "public", "read"),
            (Self.peer(2000, 50), "jobs-x", "read write"),
            (Self.peer(2000, 51, [49, 51]), "jobs-x", "none"),
            (Self.peer(34, 34), "scratch", "read"),
            (Self.peer(34, 34), "jobs-x", "read"),
            (Self.peer(34, 34), "anything.else", "read"),
            (Self.peer(1000, 50), "jobs-a", "read write"),
            (Self.peer(1000, 50), "scratch", "read write admin"),
            (Self.peer(5, 5), "public", "read"),
            (Self.peer(5, 5), "Public", "none"),
            (Self.peer(5, 5), "publi", "none"),
        ]
        for (peer, namespace, expected) in cases {
            #expect(rules.rights(of: peer, on: namespace).names == expected, "\(peer) on \(namespace)")
        }
    }

    @Test("a peer's rights are the union of every rule that matches both it and the namespace")
    func unionOfRules() throws {
        let rules = try Self.parse("""
            *        ns      read
            uid:5    ns      write
            gid:7    n*      admin
            uid:6    *       admin
            group:ops ns     write
            """)
        #expect(rules.rights(of: Self.peer(5, 7), on: "ns") == .all)
        #expect(rules.rights(of: Self.peer(5, 8), on: "ns") == [.read, .write])
        #expect(rules.rights(of: Self.peer(9, 8, [7]), on: "ns") == [.read, .admin])
        #expect(rules.rights(of: Self.peer(9, 8, [7]), on: "nx") == .admin)
        #expect(rules.rights(of: Self.peer(9, 60), on: "ns") == [.read, .write])
        #expect(rules.rights(of: Self.peer(6, 0), on: "other") == .admin)
        #expect(rules.rights(of: Self.peer(9, 8), on: "other") == [])
        // Redis's key names, `user:1000`, are namespace names, and `user:*` a prefix of them.
        let colons = try Self.parse("uid:5 user:* read\nuid:5 user:1 write\n")
        #expect(colons.rights(of: Self.peer(5, 7), on: "user:1") == [.read, .write])
        #expect(colons.rights(of: Self.peer(5, 7), on: "user:2") == .read)
        #expect(colons.rights(of: Self.peer(5, 7), on: "users") == [])
    }

    @Test("rights are spelled read write admin in that order, and none when there are none")
    func rightNames() {
        #expect(AccessRights().names == "none")
        #expect(AccessRights.all.names == "read write admin")
        #expect(AccessRights([.admin, .read]).names == "read admin")
        #expect(AccessRights.write.names == "write")
    }

    // MARK: Layout

    @Test("comments, tabs, trailing spaces, CRLF, repeats and a last line without newline all parse")
    func layout() throws {
        let text = "  # leading comment\r\n\t*\tpublic\tread   \r\n\r\n   \t \n"
            + "uid:7 scratch write read write#no space before the comment\r\n"
            + "gid:8  jobs-*  admin\t# trailing comment \t\r\n"
            + "uid:0009 last read"
        let rules = try Self.parse(text)
        #expect(rules.rules == [
            AccessRule(subject: .anyone, pattern: .exact(Array("public".utf8)), rights: .read, line: 2),
            AccessRule(subject: .user(7), pattern: .exact(Array("scratch".utf8)), rights: [.read, .write], line: 5),
            AccessRule(subject: .group(8), pattern: .prefix(Array("jobs-".utf8)), rights: .admin, line: 6),
            AccessRule(subject: .user(9), pattern: .exact(Array("last".utf8)), rights: .read, line: 7),
        ])
    }

    @Test("an empty file, or one of comments and blank lines only, is valid and grants nothing",
          arguments: ["", "\n", "# nothing\n\n   # more\r\n\t\n", "#"])
    func emptyFile(text: String) throws {
        let rules = try Self.parse(text)
        #expect(rules.rules.isEmpty)
        #expect(rules.rights(of: Self.peer(0, 0, [0]), on: "public") == [])
        #expect(rules.rights(of: Self.peer(1000, 50), on: "x") == [])
    }

    @Test("the extreme ids and lengths that are allowed parse")
    func allowedExtremes() throws {
        let name64 = String(repeating: "n", count: 64), prefix63 = String(repeating: "p", count: 63)
        let rules = try Self.parse("uid:4294967294 \(name64) read\ngid:0 \(prefix63)* write\n* A-Z_a.z-0* admin\n* _x read")
        #expect(rules.rules.map(\.subject) == [.user(4_294_967_294), .group(0), .anyone, .anyone])
        #expect(rules.rules.map(\.pattern) == [.exact(Array(name64.utf8)), .prefix(Array(prefix63.utf8)),
                                               .prefix(Array("A-Z_a.z-0".utf8)), .exact(Array("_x".utf8))])
        #expect(rules.rights(of: Self.peer(4_294_967_294, 1), on: name64) == .read)
        #expect(rules.rights(of: Self.peer(1, 0), on: prefix63 + "q") == .write)
    }

    // MARK: Mistakes

    /// Each mistake and the exact message it must give.
    static let mistakes: [(text: [UInt8], expected: String)] = {
        func t(_ s: String) -> [UInt8] { Array(s.utf8) }
        let a64 = String(repeating: "a", count: 64), a65 = a64 + "a"
        return [
            (t("* public read\nuid:1000 scratch\n"), "acl.conf:2: a rule is SUBJECT NAMESPACES RIGHT...; this line has 2 words"),
            (t("uid:1000   # a comment\n"), "acl.conf:1: a rule is SUBJECT NAMESPACES RIGHT...; this line has 1 word"),
            (t("# c\n\n* public wrte\n"), "acl.conf:3: unknown right 'wrte' (expected read, write or admin)"),
            (t("* public Read"), "acl.conf:1: unknown right 'Read' (expected read, write or admin)"),
            (t("* public read,write"), "acl.conf:1: unknown right 'read,write' (expected read, write or admin)"),
            (t("* public read " + String(repeating: "x", count: 100)),
             "acl.conf:1: unknown right '\(String(repeating: "x", count: 64))...' (expected read, write or admin)"),
            (t("usr:bob x read"), "acl.conf:1: unknown subject 'usr:bob' (expected uid:N, user:NAME, gid:N, group:NAME or *)"),
            (t("UID:1 x read"), "acl.conf:1: unknown subject 'UID:1' (expected uid:N, user:NAME, gid:N, group:NAME or *)"),
            (t("bob x read"), "acl.conf:1: unknown subject 'bob' (expected uid:N, user:NAME, gid:N, group:NAME or *)"),
            (t("** x read"), "acl.conf:1: unknown subject '**' (expected uid:N, user:NAME, gid:N, group:NAME or *)"),
            (t(":1 x read"), "acl.conf:1: unknown subject ':1' (expected uid:N, user:NAME, gid:N, group:NAME or *)"),
            (t("uid: x read"), "acl.conf:1: 'uid:' has no number (expected uid:N with N from 0 to 4294967294)"),
            (t("gid: x read"), "acl.conf:1: 'gid:' has no number (expected gid:N with N from 0 to 4294967294)"),
            (t("uid:+1 x read"), "acl.conf:1: bad uid in 'uid:+1' (expected a decimal number from 0 to 4294967294)"),
            (t("gid:-1 x read"), "acl.conf:1: bad gid in 'gid:-1' (expected a decimal number from 0 to 4294967294)"),
            (t("uid:12a x read"), "acl.conf:1: bad uid in 'uid:12a' (expected a decimal number from 0 to 4294967294)"),
            (t("uid:0x10 x read"), "acl.conf:1: bad uid in 'uid:0x10' (expected a decimal number from 0 to 4294967294)"),
            (t("uid:1:2 x read"), "acl.conf:1: bad uid in 'uid:1:2' (expected a decimal number from 0 to 4294967294)"),
            (t("uid:4294967295 x read"),
             "acl.conf:1: uid 4294967295 in 'uid:4294967295' is (uid_t)-1, which is no user (the largest is 4294967294)"),
            (t("gid:4294967295 x read"),
             "acl.conf:1: gid 4294967295 in 'gid:4294967295' is (gid_t)-1, which is no group (the largest is 4294967294)"),
            (t("uid:4294967296 x read"), "acl.conf:1: uid out of range in 'uid:4294967296' (the largest is 4294967294)"),
            (t("gid:99999999999999999999999999 x read"),
             "acl.conf:1: gid out of range in 'gid:99999999999999999999999999' (the largest is 4294967294)"),
            (t("user:nobody x read"), "acl.conf:1: unknown user 'nobody' (no such user on this system)"),
            (t("user:Backup x read"), "acl.conf:1: unknown user 'Backup' (no such user on this system)"),
            (t("group:wheel x read"), "acl.conf:1: unknown group 'wheel' (no such group on this system)"),
            (t("user: x read"), "acl.conf:1: 'user:' has no name (expected user:NAME)"),
            (t("group: x read"), "acl.conf:1: 'group:' has no name (expected group:NAME)"),
            (t("* jobs@* read"),
             "acl.conf:1: namespace pattern 'jobs@*' can never match: namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x40)"),
            (t("* jo*bs read"), "acl.conf:1: namespace pattern 'jo*bs' can never match: '*' may only come last"),
            (t("* ** read"), "acl.conf:1: namespace pattern '**' can never match: '*' may only come last"),
            (t("* *x read"), "acl.conf:1: namespace pattern '*x' can never match: '*' may only come last"),
            (t("* .hidden read"), "acl.conf:1: namespace pattern '.hidden' can never match: namespace name must not start with '.'"),
            (t("* .* read"), "acl.conf:1: namespace pattern '.*' can never match: namespace name must not start with '.'"),
            (t("* a/b read"),
             "acl.conf:1: namespace pattern 'a/b' can never match: namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x2f)"),
            (t("* it's read"),
             "acl.conf:1: namespace pattern 'it\\x27s' can never match: namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x27)"),
            (t("* café read"),
             "acl.conf:1: namespace pattern 'caf\\xc3\\xa9' can never match: namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0xc3)"),
            (t("* \(a65) read"),
             "acl.conf:1: namespace pattern '\(a64)...' can never match: namespace name is longer than 64 characters"),
            (t("* \(a65)* read"),
             "acl.conf:1: namespace pattern '\(a64)...' can never match: namespace name is longer than 64 characters"),
            (t("* \(a64)* read"),
             "acl.conf:1: namespace pattern '\(a64)...' is too long: at most 63 characters may come before '*' (write a 64-character name without '*')"),
            (t("* pub\u{0}lic read"), "acl.conf:1: control byte \\x00 in 'pub\\x00lic' (only text, spaces and tabs may be on a line)"),
            (t("\u{1b}[31m* x read"), "acl.conf:1: control byte \\x1b in '\\x1b[31m*' (only text, spaces and tabs may be on a line)"),
            (t("* x read\u{7f}"), "acl.conf:1: control byte \\x7f in 'read\\x7f' (only text, spaces and tabs may be on a line)"),
            (t("* a\rb read"), "acl.conf:1: control byte \\x0d in 'a\\x0db' (only text, spaces and tabs may be on a line)"),
            (t("* x read\r \r\n* y read\u{0b}\n"), "acl.conf:2: control byte \\x0b in 'read\\x0b' (only text, spaces and tabs may be on a line)"),
            (t("* x read # bell\u{7}"), "acl.conf:1: control byte \\x07 in 'bell\\x07' (only text, spaces and tabs may be on a line)"),
            (t("* x read") + [0xFF], "acl.conf:1: invalid UTF-8 in 'read\\xff' (the file must be UTF-8 text)"),
            (t("# caf") + [0xE9] + t("\n"), "acl.conf:1: invalid UTF-8 in 'caf\\xe9' (the file must be UTF-8 text)"),
            (t("* ") + [0xC0, 0xAF] + t(" read"), "acl.conf:1: invalid UTF-8 in '\\xc0\\xaf' (the file must be UTF-8 text)"),
            (t("* ") + [0xED, 0xA0, 0x80] + t(" read"), "acl.conf:1: invalid UTF-8 in '\\xed\\xa0\\x80' (the file must be UTF-8 text)"),
            (t("* x") + [0xE2, 0x82] + t(" read"), "acl.conf:1: invalid UTF-8 in 'x\\xe2\\x82' (the file must be UTF-8 text)"),
            (t("* a read\r\n* b read\r\n* c wrte\r\n"), "acl.conf:3: unknown right 'wrte' (expected read, write or admin)"),
            (t("* x wrte\nbad\n"), "acl.conf:1: unknown right 'wrte' (expected read, write or admin)"),
        ]
    }()

    @Test("every mistake is an error naming the file, the line and the offending word",
          arguments: mistakes)
    func mistake(text: [UInt8], expected: String) {
        do {
            let rules = try AccessRules.parse(text, file: "acl.conf", names: Self.names)
            Issue.record("parsed to \(rules.rules) instead of failing with \(expected)")
        } catch {
            #expect(error.description == expected)
            #expect(error.file == "acl.conf")
            #expect(error.line != nil)
        }
    }

    @Test("the file in a message is the path exactly as given")
    func fileAsGiven() {
        #expect(throws: AccessRulesError(file: "./etc/../acl", line: 1, message: "unknown right 'x' (expected read, write or admin)")) {
            try Self.parse("* a x", file: "./etc/../acl")
        }
    }

    // MARK: Loading

    @Test("load reads a file and names its path in messages")
    func loadFile() throws {
        let directory = TemporaryDirectory("acl")
        let path = directory.path + "/acl.conf"
        try Data(Self.example.utf8).write(to: URL(fileURLWithPath: path))
        let rules = try AccessRules.load(path: path, names: Self.names)
        #expect(rules.file == path)
        #expect(rules.rules == (try Self.parse(Self.example)).rules)
        try Data("* ok read\n* bad wrte\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: AccessRulesError(file: path, line: 2, message: "unknown right 'wrte' (expected read, write or admin)")) {
            try AccessRules.load(path: path, names: Self.names)
        }
    }

    @Test("a missing file, a directory or a FIFO is an error without a line, never allow-all")
    func loadRefusals() throws {
        let directory = TemporaryDirectory("acl")
        let missing = directory.path + "/missing.conf"
        #expect(throws: AccessRulesError(file: missing, line: nil, message: "cannot read: No such file or directory")) {
            try AccessRules.load(path: missing, names: Self.names)
        }
        do {
            _ = try AccessRules.load(path: missing, names: Self.names)
        } catch {
            #expect(error.description == "\(missing): cannot read: No such file or directory")
        }
        #expect(throws: AccessRulesError(file: directory.path, line: nil, message: "cannot read: Is a directory")) {
            try AccessRules.load(path: directory.path, names: Self.names)
        }
        let fifo = directory.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: AccessRulesError(file: fifo, line: nil, message: "cannot read: not a regular file")) {
            try AccessRules.load(path: fifo, names: Self.names)
        }
    }

    @Test("a file of exactly 4 MiB loads; one byte more is an error")
    func sizeLimit() throws {
        let directory = TemporaryDirectory("acl")
        let path = directory.path + "/big.conf"
        var line = [UInt8](repeating: UInt8(ascii: "#"), count: 1024)
        line[1023] = UInt8(ascii: "\n")
        var bytes = Array([[UInt8]](repeating: line, count: 4096).joined())
        bytes.replaceSubrange(0..<14, with: Array("* big read #..".utf8))
        #expect(bytes.count == AccessRules.maxFileSize)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        #expect(try AccessRules.load(path: path, names: Self.names).rules.count == 1)
        try Data(bytes + [UInt8(ascii: "\n")]).write(to: URL(fileURLWithPath: path))
        #expect(throws: AccessRulesError(file: path, line: nil,
                                         message: "the file is larger than 4 MiB (4194304 bytes), the most an ACL file may be")) {
            try AccessRules.load(path: path, names: Self.names)
        }
    }

    // MARK: The system's accounts

    @Test("the system resolver finds root and finds nothing for unknown names")
    func systemNames() throws {
        for names in [AccountNames.system, AccountNames.system(initialBufferSize: 1)] {
            #expect(names.uidForUser("root") == 0)
            #expect(names.gidForGroup("root") == 0)
            #expect(names.userForUID(0) == "root")
            #expect(names.uidForUser("no-such-user-akv-7f3a") == nil)
            #expect(names.gidForGroup("no-such-group-akv-7f3a") == nil)
            #expect(names.uidForUser("ro\u{0}ot") == nil)
            #expect(names.uidForUser("") == nil)
            #expect(names.userForUID(3_999_999_999) == nil)
        }
        let rules = try AccessRules.parse(Array("user:root a read\ngroup:root b write\n".utf8), file: "acl.conf")
        #expect(rules.rules.map(\.subject) == [.user(0), .group(0)])
    }

    // MARK: Fuzz

    /// Pieces of lines, biased to the grammar, with bytes it refuses.
    static let alphabet: [[UInt8]] = {
        var pieces = ["uid:", "gid:", "user:", "group:", "user:backup", "group:staff", "*", "*", " ", " ", "\t", "#",
                      "\n", "\n", "\r", "\r\n", "read", "write", "admin", ":", "-", ".", "_", "jobs-", "public"]
            .map { Array($0.utf8) }
        pieces += (UInt8(ascii: "0")...UInt8(ascii: "9")).map { [$0] }
        pieces += [UInt8(ascii: "a"), UInt8(ascii: "z"), UInt8(ascii: "A"), UInt8(ascii: "q")].map { [$0] }
        pieces += [[0], [1], [0x0B], [0x7F], [0xFF], [0xC3], [0xA9], [0xE2, 0x82, 0xAC], [0x80]]
        return pieces
    }()

    /// A line of the grammar: a subject, a pattern and rights, each now and then a wrong word or
    /// a piece of ``alphabet``, separated by spaces or tabs, ended by LF or CRLF, or a comment.
    static func randomLine(using random: inout SeededGenerator) -> [UInt8] {
        func pick(_ good: [String], _ bad: [String], _ random: inout SeededGenerator) -> [UInt8] {
            switch Int.random(in: 0..<40, using: &random) {
            case 0: return alphabet.randomElement(using: &random)!
            case 1: return Array(bad.randomElement(using: &random)!.utf8)
            default: return Array(good.randomElement(using: &random)!.utf8)
            }
        }
        if Int.random(in: 0..<6, using: &random) == 0 { return Array("# note\n".utf8) }
        var words = [pick(["*", "uid:1000", "gid:50", "user:backup", "group:staff"], ["uid:4294967295", "user:nobody", "usr:x"], &random),
                     pick(["*", "public", "jobs-*", "a.b"], ["jo*bs", ".x", "a:b*"], &random)]
        for _ in 0..<Int.random(in: 1...3, using: &random) { words.append(pick(["read", "write", "admin"], ["wrte", "READ"], &random)) }
        let space = [UInt8(ascii: " ")], tab = [UInt8(ascii: "\t")]
        var line = Array(words.joined(separator: Bool.random(using: &random) ? space : tab))
        line += Bool.random(using: &random) ? [10] : [13, 10]
        return line
    }

    /// Parses `bytes` and checks it parsed or failed cleanly, and that CRLF line ends give the
    /// same; returns whether it parsed to at least one rule.
    @discardableResult
    static func checkParses(_ bytes: [UInt8]) -> Bool {
        let lines = bytes.count(where: { $0 == UInt8(ascii: "\n") }) + 1
        let outcome = Result { () throws(AccessRulesError) in try AccessRules.parse(bytes, file: "fuzz.acl", names: names) }
        switch outcome {
        case .success(let rules):
            #expect(rules.rules.allSatisfy { !$0.rights.isEmpty && (1...lines).contains($0.line) })
            #expect(rules.rules.map(\.line) == rules.rules.map(\.line).sorted())
        case .failure(let error):
            #expect(error.description.hasPrefix("fuzz.acl:"))
            #expect(error.line.map { (1...lines).contains($0) } == true, "\(error)")
            #expect(!error.message.isEmpty)
        }
        let crlf = Array(bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).joined(separator: [13, 10]))
        let again = Result { () throws(AccessRulesError) in try AccessRules.parse(crlf, file: "fuzz.acl", names: names) }
        #expect(outcome.map(\.rules) == again.map(\.rules), "\(bytes)")
        return (try? outcome.get().rules.isEmpty) == false
    }

    @Test("20,000 random grammar-biased byte strings parse or fail with a message naming the file")
    func fuzzRandom() {
        var random = SeededGenerator(seed: testSeed("fuzzRandom", 0xAC1_0001))
        var parsed = 0
        for round in 0..<20_000 {
            let target = Int.random(in: 0...200, using: &random)
            var bytes: [UInt8] = []
            while bytes.count < target {
                bytes += round.isMultiple(of: 2) ? Self.alphabet.randomElement(using: &random)! : Self.randomLine(using: &random)
            }
            if Self.checkParses(Array(bytes.prefix(200))) { parsed += 1 }
        }
        #expect(parsed > 100, "some random strings parse to rules (\(parsed))")
        print("fuzzRandom: \(parsed) of 20000 parsed to rules")
    }

    @Test("10,000 mutations of the example file parse or fail with a message naming the file")
    func fuzzMutations() {
        var random = SeededGenerator(seed: testSeed("fuzzMutations", 0xAC1_0002))
        let original = Array(Self.example.utf8)
        var parsed = 0
        for _ in 0..<10_000 {
            var bytes = original
            for _ in 0..<Int.random(in: 1...4, using: &random) { Self.mutate(&bytes, using: &random) }
            if Self.checkParses(bytes) { parsed += 1 }
        }
        #expect(parsed > 0 && parsed < 10_000, "some mutations parse and some do not (\(parsed))")
    }

    /// Deletes, inserts or replaces a byte (an alphabet piece or any byte) at a random place.
    static func mutate(_ bytes: inout [UInt8], using random: inout SeededGenerator) {
        let at = Int.random(in: 0...bytes.count, using: &random)
        let piece = Bool.random(using: &random) ? alphabet.randomElement(using: &random)! : [UInt8.random(in: 0...255, using: &random)]
        switch Int.random(in: 0..<3, using: &random) {
        case 0 where at < bytes.count: bytes.remove(at: at)
        case 1: bytes.insert(contentsOf: piece, at: at)
        default: bytes.replaceSubrange(at..<min(at + 1, bytes.count), with: piece)
        }
    }

    // MARK: Rights against a reference

    /// A rule as the test generated it, resolved by the test's own reading of the contract.
    struct ModelRule {
        var subjectKind: String  // "*", "uid", "gid", "user", "group"
        var id: UInt32
        var pattern: String
        var rights: Set<String>
    }

    static let namespaces = ["a", "ab", "abc", "b", "b-", "b-1", "ba", "c", "A", "a.b"]
    static let patterns = ["*", "a*", "ab*", "b-*", "a", "ab", "abc", "b-1", "c", "A*", "a.*"]

    /// A random rule and its line, spelled with random spacing, repeats and comments.
    static func randomRule(using random: inout SeededGenerator) -> (ModelRule, String) {
        let kind = ["*", "uid", "gid", "user", "group"].randomElement(using: &random)!
        let id = UInt32.random(in: 0...3, using: &random)
        let subject = switch kind {
        case "*": "*"
        case "user": "user:u\(id)"
        case "group": "group:g\(id)"
        default: "\(kind):\(id)"
        }
        let pattern = patterns.randomElement(using: &random)!
        let words = (0..<Int.random(in: 1...4, using: &random)).map { _ in ["read", "write", "admin"].randomElement(using: &random)! }
        let space = { (random: inout SeededGenerator) in [" ", "\t", "  ", " \t "].randomElement(using: &random)! }
        var line = space(&random) + subject + space(&random) + pattern
        for word in words { line += space(&random) + word }
        if Bool.random(using: &random) { line += space(&random) + "# comment" }
        return (ModelRule(subjectKind: kind, id: id, pattern: pattern, rights: Set(words)), line)
    }

    /// The rights the contract gives `peer` on `namespace` under `model`, as `AccessRights.names` spells them.
    static func reference(_ model: [ModelRule], _ peer: PeerIdentity, _ namespace: String) -> String {
        var held = Set<String>()
        for rule in model {
            let subject = switch rule.subjectKind {
            case "*": true
            case "uid", "user": peer.uid == rule.id
            default: peer.gid == rule.id || peer.groups.contains(rule.id)
            }
            let pattern = rule.pattern == "*" || (rule.pattern.hasSuffix("*")
                ? namespace.hasPrefix(String(rule.pattern.dropLast())) : namespace == rule.pattern)
            if subject && pattern { held.formUnion(rule.rights) }
        }
        let spelled = ["read", "write", "admin"].filter(held.contains)
        return spelled.isEmpty ? "none" : spelled.joined(separator: " ")
    }

    @Test("for random rule sets, peers and namespaces, rights equal the union computed by the test")
    func rightsMatchReference() throws {
        var random = SeededGenerator(seed: testSeed("rightsMatchReference", 0xAC1_0003))
        var granted = 0, refused = 0
        for _ in 0..<500 {
            var model: [ModelRule] = [], lines: [String] = []
            for _ in 0..<Int.random(in: 0...12, using: &random) {
                let (rule, line) = Self.randomRule(using: &random)
                model.append(rule)
                lines.append(line)
                if Int.random(in: 0..<4, using: &random) == 0 { lines.append(Bool.random(using: &random) ? "" : "# note") }
            }
            let rules = try Self.parse(lines.joined(separator: Bool.random(using: &random) ? "\n" : "\r\n"))
            #expect(rules.rules.count == model.count)
            for _ in 0..<20 {
                let groups = (0...4).compactMap { _ in Bool.random(using: &random) ? UInt32.random(in: 0...4, using: &random) : nil }
                let peer = Self.peer(.random(in: 0...4, using: &random), .random(in: 0...4, using: &random), groups)
                let namespace = Self.namespaces.randomElement(using: &random)!
                let expected = Self.reference(model, peer, namespace)
                #expect(rules.rights(of: peer, on: namespace).names == expected, "\(peer) on \(namespace) under \(lines)")
                if expected == "none" { refused += 1 } else { granted += 1 }
            }
        }
        #expect(granted > 1000 && refused > 1000, "the cases cover both outcomes (\(granted) granted, \(refused) refused)")
    }
}

/// The seed of a random test: `ACCESSRULES_SEED` if set, else `fallback`; printed for replay.
private func testSeed(_ name: String, _ fallback: UInt64) -> UInt64 {
    var seed = fallback
    if let text = getenv("ACCESSRULES_SEED"), let value = UInt64(String(cString: text)) { seed = value }
    print("\(name): seed \(seed) (replay with ACCESSRULES_SEED=\(seed))")
    return seed
}
