import ActorKVStore

/// Rights on a namespace: reading it, writing it, administering it.
struct AccessRights: OptionSet, Sendable, Hashable {
    let rawValue: UInt8

    /// Reading keys and values.
    static let read = AccessRights(rawValue: 1 << 0)
    /// Changing keys and values.
    static let write = AccessRights(rawValue: 1 << 1)
    /// Administering the namespace.
    static let admin = AccessRights(rawValue: 1 << 2)
    /// Every right.
    static let all: AccessRights = [.read, .write, .admin]

    /// The rights held, as they are spelled in the ACL file, in the order `read write admin` and
    /// separated by spaces; `none` when no right is held.
    var names: String {
        let spelled = [(AccessRights.read, "read"), (.write, "write"), (.admin, "admin")]
            .filter { contains($0.0) }.map(\.1)
        return spelled.isEmpty ? "none" : spelled.joined(separator: " ")
    }
}

/// Who a connection is, as the kernel reported it on accept (SO_PEERCRED and SO_PEERGROUPS).
struct PeerIdentity: Sendable, Equatable {
    /// The peer's effective user id.
    let uid: UInt32
    /// The peer's primary (effective) group id.
    let gid: UInt32
    /// The peer's supplementary groups.
    let groups: [UInt32]
}

/// The subject of a rule: whom it applies to. Names (`user:NAME`, `group:NAME`) are resolved to
/// ids when the file is loaded, so a subject holds ids only.
enum AccessSubject: Sendable, Hashable, CustomStringConvertible {
    /// `*`: any peer.
    case anyone
    /// `uid:N` or `user:NAME`: the peer whose uid is this one.
    case user(UInt32)
    /// `gid:N` or `group:NAME`: a peer whose primary gid is this one, or that has it among its
    /// supplementary groups.
    case group(UInt32)

    /// Whether the rule applies to `peer`.
    func matches(_ peer: PeerIdentity) -> Bool {
        switch self {
        case .anyone: return true
        case .user(let uid): return peer.uid == uid
        case .group(let gid): return peer.gid == gid || peer.groups.contains(gid)
        }
    }

    /// The subject as the ACL file spells it by id: `*`, `uid:N` or `gid:N`.
    var description: String {
        switch self {
        case .anyone: return "*"
        case .user(let uid): return "uid:\(uid)"
        case .group(let gid): return "gid:\(gid)"
        }
    }
}

/// The namespaces a rule covers: all of them, those whose name starts with a prefix, or one.
enum NamespacePattern: Sendable, Hashable, CustomStringConvertible {
    /// `*`: every namespace.
    case any
    /// `PREFIX*`: every namespace whose name starts with these bytes (the prefix itself included).
    case prefix([UInt8])
    /// `NAME`: the namespace of exactly this name.
    case exact([UInt8])

    /// Whether the rule covers the namespace named `namespace`. Compares UTF-8 bytes; allocates
    /// nothing.
    func matches(_ namespace: String) -> Bool {
        switch self {
        case .any: return true
        case .prefix(let prefix): return namespace.utf8.starts(with: prefix)
        case .exact(let name): return namespace.utf8.count == name.count && namespace.utf8.elementsEqual(name)
        }
    }

    /// The pattern as the ACL file spells it.
    var description: String {
        switch self {
        case .any: return "*"
        case .prefix(let prefix): return String(decoding: prefix, as: UTF8.self) + "*"
        case .exact(let name): return String(decoding: name, as: UTF8.self)
        }
    }
}

/// One line of the ACL file: the rights a subject holds on the namespaces a pattern covers.
struct AccessRule: Sendable, Hashable {
    /// Whom the rule applies to.
    let subject: AccessSubject
    /// Which namespaces it covers.
    let pattern: NamespacePattern
    /// What it grants there (never empty).
    let rights: AccessRights
    /// Its line in the file, from 1.
    let line: Int

    /// What this rule grants `peer` on `namespace`: its rights if both match, else none.
    func grants(to peer: PeerIdentity, on namespace: String) -> AccessRights {
        subject.matches(peer) && pattern.matches(namespace) ? rights : []
    }
}

extension AccessRule {
    /// Parses one line of an ACL file into a rule (the grammar is in ``AccessRules``); each
    /// mistake throws an ``AccessRulesError`` naming the file, the line and the offending word.
    struct Parser {
        /// The file, for messages.
        let file: String
        /// The line's number, from 1.
        let line: Int
        /// Resolves `user:NAME` and `group:NAME`.
        let names: AccountNames

        /// The rule on `text` (one line without its `\n`); nil for a blank or comment-only line.
        func rule(_ text: ArraySlice<UInt8>) throws(AccessRulesError) -> AccessRule? {
            let text = Self.trimmingTrailingSpace(text)
            try checkBytes(text)
            let words = Self.words(text.prefix { $0 != UInt8(ascii: "#") })
            if words.isEmpty { return nil }
            guard words.count >= 3 else {
                throw failure("a rule is SUBJECT NAMESPACES RIGHT...; this line has \(words.count) word\(words.count == 1 ? "" : "s")")
            }
            return try AccessRule(subject: subject(words[0]), pattern: pattern(words[1]), rights: rights(words[2...]), line: line)
        }

        /// Refuses a control byte other than tab, and bytes that are not UTF-8, anywhere on the line.
        private func checkBytes(_ text: ArraySlice<UInt8>) throws(AccessRulesError) {
            for word in Self.words(text) {
                if let byte = word.first(where: { $0 < 0x20 || $0 == 0x7F }) {
                    let shown = Command.printable([byte][...])
                    throw failure("control byte \(shown) in \(Self.quoted(word)) (only text, spaces and tabs may be on a line)")
                }
                if String(validating: word, as: UTF8.self) == nil {
                    throw failure("invalid UTF-8 in \(Self.quoted(word)) (the file must be UTF-8 text)")
                }
            }
        }

        /// `*`, `uid:N`, `gid:N`, `user:NAME` or `group:NAME`.
        private func subject(_ word: ArraySlice<UInt8>) throws(AccessRulesError) -> AccessSubject {
            if word.elementsEqual("*".utf8) { return .anyone }
            guard let colon = word.firstIndex(of: UInt8(ascii: ":")) else { throw unknownSubject(word) }
            let value = word[(colon + 1)...]
            switch String(decoding: word[..<colon], as: UTF8.self) {
            case "uid": return try .user(number(value, kind: "uid", word))
            case "gid": return try .group(number(value, kind: "gid", word))
            case "user": return try .user(resolve(value, kind: "user", word, names.uidForUser))
            case "group": return try .group(resolve(value, kind: "group", word, names.gidForGroup))
            default: throw unknownSubject(word)
            }
        }

        private func unknownSubject(_ word: ArraySlice<UInt8>) -> AccessRulesError {
            failure("unknown subject \(Self.quoted(word)) (expected uid:N, user:NAME, gid:N, group:NAME or *)")
        }

        /// The decimal id after `uid:` or `gid:`: 0 to 4294967294, no sign.
        private func number(_ digits: ArraySlice<UInt8>, kind: String, _ word: ArraySlice<UInt8>) throws(AccessRulesError) -> UInt32 {
            guard !digits.isEmpty else { throw failure("\(Self.quoted(word)) has no number (expected \(kind):N with N from 0 to 4294967294)") }
            var value: UInt64 = 0
            for digit in digits {
                guard digit >= UInt8(ascii: "0") && digit <= UInt8(ascii: "9") else {
                    throw failure("bad \(kind) in \(Self.quoted(word)) (expected a decimal number from 0 to 4294967294)")
                }
                value = min(value * 10 + UInt64(digit - UInt8(ascii: "0")), UInt64(UInt32.max) + 1)
            }
            if value == UInt32.max {
                let what = kind == "uid" ? "user" : "group"
                throw failure("\(kind) 4294967295 in \(Self.quoted(word)) is (\(kind)_t)-1, which is no \(what) (the largest is 4294967294)")
            }
            guard value < UInt32.max else { throw failure("\(kind) out of range in \(Self.quoted(word)) (the largest is 4294967294)") }
            return UInt32(value)
        }

        /// The id of the account named after `user:` or `group:`, looked up now.
        private func resolve(_ name: ArraySlice<UInt8>, kind: String, _ word: ArraySlice<UInt8>,
                             _ lookUp: (String) -> UInt32?) throws(AccessRulesError) -> UInt32 {
            guard !name.isEmpty else { throw failure("\(Self.quoted(word)) has no name (expected \(kind):NAME)") }
            guard let id = lookUp(String(decoding: name, as: UTF8.self)) else {
                throw failure("unknown \(kind) \(Self.quoted(name)) (no such \(kind) on this system)")
            }
            return id
        }

        /// `*`, `PREFIX*` or an exact namespace name; refuses a pattern no namespace name can match.
        private func pattern(_ word: ArraySlice<UInt8>) throws(AccessRulesError) -> NamespacePattern {
            if word.elementsEqual("*".utf8) { return .any }
            guard let star = word.firstIndex(of: UInt8(ascii: "*")) else {
                if let problem = NamespaceName.problem(with: word) { throw neverMatches(word, problem) }
                return .exact(Array(word))
            }
            guard star == word.endIndex - 1 else { throw neverMatches(word, "'*' may only come last") }
            let prefix = word[..<star]
            if prefix.count == NamespaceName.maxLength {
                let most = NamespaceName.maxLength
                throw failure("namespace pattern \(Self.quoted(word)) is too long: at most \(most - 1) characters may come before '*'"
                    + " (write a \(most)-character name without '*')")
            }
            if let problem = NamespaceName.problem(with: prefix) { throw neverMatches(word, problem) }
            return .prefix(Array(prefix))
        }

        /// The union of `read`, `write` and `admin` words.
        private func rights(_ words: ArraySlice<ArraySlice<UInt8>>) throws(AccessRulesError) -> AccessRights {
            var rights: AccessRights = []
            for word in words {
                switch String(decoding: word, as: UTF8.self) {
                case "read": rights.insert(.read)
                case "write": rights.insert(.write)
                case "admin": rights.insert(.admin)
                default: throw failure("unknown right \(Self.quoted(word)) (expected read, write or admin)")
                }
            }
            return rights
        }

        private func neverMatches(_ word: ArraySlice<UInt8>, _ why: String) -> AccessRulesError {
            failure("namespace pattern \(Self.quoted(word)) can never match: \(why)")
        }

        private func failure(_ message: String) -> AccessRulesError {
            AccessRulesError(file: file, line: line, message: message)
        }

        /// `text` without the spaces, tabs and carriage returns at its end.
        private static func trimmingTrailingSpace(_ text: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
            var end = text.endIndex
            while end > text.startIndex, text[end - 1] == UInt8(ascii: " ") || text[end - 1] == UInt8(ascii: "\t")
                || text[end - 1] == UInt8(ascii: "\r") {
                end -= 1
            }
            return text[..<end]
        }

        /// The words of `text`, separated by spaces and tabs.
        private static func words(_ text: ArraySlice<UInt8>) -> [ArraySlice<UInt8>] {
            text.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") })
        }

        /// `word` quoted for a message: printable ASCII as is, other bytes as `\xHH`, cut at 64 bytes.
        private static func quoted(_ word: ArraySlice<UInt8>) -> String {
            "'" + Command.printable(word) + "'"
        }
    }
}
