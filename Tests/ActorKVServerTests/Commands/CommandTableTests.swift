@testable import ActorKVServer
import ActorKVProtocol
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// The command table against protocol.md, and each command's flags against what it does.
@Suite("Command table: protocol.md lists exactly its commands; flags agree with what commands do")
struct CommandTableTests {
    /// One well-formed request per command, to parse. A command added to the table without one
    /// here fails ``everyCommandHasASample()``: its flags must be checked too.
    static let samples: [String: [String]] = [
        "GET": ["GET", "ns", "k"], "GETV": ["GETV", "ns", "k"], "PUT": ["PUT", "ns", "k", "v", "IFVERSION", "0"],
        "INCR": ["INCR", "ns", "k", "-2"], "PEXPIRE": ["PEXPIRE", "ns", "k", "100"], "PERSIST": ["PERSIST", "ns", "k"], "PTTL": ["PTTL", "ns", "k"], "DEL": ["DEL", "ns", "k", "j"], "CHANGES": ["CHANGES", "ns", "PREFIX", "a", "FROM", "3"],
        "EXISTS": ["EXISTS", "ns", "k"], "COUNT": ["COUNT", "ns"], "SCAN": ["SCAN", "ns", "0", "COUNT", "5"],
        "BATCH": ["BATCH", "ns", "PUT", "k", "v", "DEL", "j"], "PING": ["PING"], "ECHO": ["ECHO", "x"],
        "QUIT": ["QUIT"], "CLIENT": ["CLIENT", "ID"], "INFO": ["INFO"], "NAMESPACES": ["NAMESPACES"],
        "COMPACT": ["COMPACT", "ns"], "BACKUP": ["BACKUP", "/tmp/backup"], "SHUTDOWN": ["SHUTDOWN", "NOSAVE"], "TOUCH": ["TOUCH", "ns", "other"], "ROLE": ["ROLE"], "COMMAND": ["COMMAND", "COUNT"], "TIME": ["TIME"], "WAITAOF": ["WAITAOF", "1", "0", "0"], "CONFIG": ["CONFIG", "GET", "save"],
        "HELLO": ["HELLO", "3"], "SELECT": ["SELECT", "0"], "RESET": ["RESET"],
        "HGET": ["HGET", "ns", "f"], "HSET": ["HSET", "ns", "f", "v", "g", "w"], "HSETNX": ["HSETNX", "ns", "f", "v"],
        "HDEL": ["HDEL", "ns", "f", "g"], "HEXISTS": ["HEXISTS", "ns", "f"], "HLEN": ["HLEN", "ns"],
        "HSTRLEN": ["HSTRLEN", "ns", "f"], "HINCRBY": ["HINCRBY", "ns", "f", "-3"], "HMGET": ["HMGET", "ns", "f", "g"],
        "HGETALL": ["HGETALL", "ns"], "HKEYS": ["HKEYS", "ns"], "HVALS": ["HVALS", "ns"],
        "HSCAN": ["HSCAN", "ns", "0", "MATCH", "a*", "COUNT", "5"],
        "MULTI": ["MULTI"], "EXEC": ["EXEC"], "DISCARD": ["DISCARD"], "WATCH": ["WATCH", "ns", "other"], "UNWATCH": ["UNWATCH"],
        "ACL": ["ACL", "WHOAMI"], "KEYS": ["KEYS", "*"], "DBSIZE": ["DBSIZE"], "TYPE": ["TYPE", "ns"], "UNLINK": ["UNLINK", "ns", "ns"], "RENAME": ["RENAME", "ns", "ns"], "RENAMENX": ["RENAMENX", "ns", "ns"],
        "COPY": ["COPY", "ns", "other", "DB", "0", "REPLACE"], "MEMORY": ["MEMORY", "USAGE", "ns", "SAMPLES", "5"],
        "FLUSHDB": ["FLUSHDB"], "FLUSHALL": ["FLUSHALL", "ASYNC"],
        "EXPIRE": ["EXPIRE", "ns", "60", "NX"], "EXPIREAT": ["EXPIREAT", "ns", "2000000000"], "PEXPIREAT": ["PEXPIREAT", "ns", "1", "GT"],
        "TTL": ["TTL", "ns"], "EXPIRETIME": ["EXPIRETIME", "ns"], "PEXPIRETIME": ["PEXPIRETIME", "ns"],
        "RANDOMKEY": ["RANDOMKEY"], "HMSET": ["HMSET", "ns", "f", "v", "g", "w"], "HINCRBYFLOAT": ["HINCRBYFLOAT", "ns", "f", "0.5"],
        "HRANDFIELD": ["HRANDFIELD", "ns", "-3", "WITHVALUES"],
        "HEXPIRE": ["HEXPIRE", "ns", "10", "NX", "FIELDS", "2", "f", "g"], "HPEXPIRE": ["HPEXPIRE", "ns", "10", "FIELDS", "1", "f"],
        "HEXPIREAT": ["HEXPIREAT", "ns", "2000000000", "GT", "FIELDS", "1", "f"], "HPEXPIREAT": ["HPEXPIREAT", "ns", "1", "FIELDS", "1", "f"],
        "HPERSIST": ["HPERSIST", "ns", "FIELDS", "1", "f"], "HTTL": ["HTTL", "ns", "FIELDS", "2", "f", "g"], "HPTTL": ["HPTTL", "ns", "FIELDS", "1", "f"],
        "HEXPIRETIME": ["HEXPIRETIME", "ns", "FIELDS", "1", "f"], "HPEXPIRETIME": ["HPEXPIRETIME", "ns", "FIELDS", "1", "f"],
        "HGETDEL": ["HGETDEL", "ns", "FIELDS", "2", "f", "g"], "HGETEX": ["HGETEX", "ns", "PX", "5000", "FIELDS", "2", "f", "g"], "HSETEX": ["HSETEX", "ns", "FNX", "EX", "60", "FIELDS", "2", "f", "1", "g", "2"],
    ]

    /// The command names in protocol.md's "## Commands" table: the first word of each
    /// backticked request in the first column (`COMMAND …`, `CONFIG …` are two).
    static func documentedCommands() throws -> Set<String> {
        let text = try PackageFiles.text("protocol.md")
        let section = try #require(text.components(separatedBy: "\n## Commands\n").dropFirst().first)
            .components(separatedBy: "\n#").first!
        var names: Set<String> = []
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let firstColumn = line.dropFirst(2).prefix { $0 != "|" }
            for request in firstColumn.split(separator: "`", omittingEmptySubsequences: false).enumerated() where request.offset % 2 == 1 {
                names.insert(String(request.element.split(separator: " ").first!))
            }
        }
        return names
    }

    @Test("protocol.md's command table names exactly the commands in the table")
    func documentationMatchesTheTable() throws {
        let documented = try Self.documentedCommands()
        let table = Set(CommandTable.all.map(\.name))
        #expect(documented == table, "only documented: \(documented.subtracting(table)); only in the table: \(table.subtracting(documented))")
        #expect(table.count == CommandTable.all.count, "a name is declared twice")
    }

    @Test("every command has a sample request here, and it parses")
    func everyCommandHasASample() throws {
        for spec in CommandTable.all {
            let sample = try #require(Self.samples[spec.name], "no sample request for \(spec.name)")
            let command = Command(parsing: Request(sample.map { Array($0.utf8) }))
            if case .refused(let error) = command { Issue.record("\(spec.name): \(error.message)") }
            // Found in any letter case.
            #expect(CommandTable.lookup(Array(spec.name.lowercased().utf8)[...])?.name == spec.name)
        }
    }

    @Test("a connection's namespace memo changes nothing: each request parses as it does alone, whatever names came before it, refused names included")
    func namespaceMemo() {
        let names = NamespaceNames()
        let sequence = ["ns", "ns", "nsx", "n", "ns", ".hidden", "ns", "a/b", "a/b", "other", "ns", "NS", String(repeating: "x", count: 65), "ns"]
        for (position, name) in sequence.enumerated() {
            for request in [["GET", name, "k"], ["HSET", name, "f", "v"], ["MULTI"], ["WATCH", "w", name]] {
                let bytes = Request(request.map { Array($0.utf8) })
                let alone = Command(parsing: bytes, rights: nil)
                let memoized = Command(parsing: bytes, rights: nil, names: names)
                #expect(memoized.dataNamespace == alone.dataNamespace, "\(request) at \(position)")
                if case .refused(let error) = alone {
                    guard case .refused(let other) = memoized else { Issue.record("\(request) at \(position): not refused"); continue }
                    #expect(other == error, "\(request) at \(position)")
                }
            }
            let expected: String? = NamespaceName.problem(with: Array(name.utf8)) == nil ? name : nil
            #expect(Command(parsing: Request([Array("GET".utf8), Array(name.utf8), [0x6B]]), rights: nil, names: names).dataNamespace == expected)
        }
    }

    @Test("lookup finds each name in mixed case, and nothing for an empty name, a name longer than any, or one of a name's length and initial that is not it")
    func lookupByName() {
        for spec in CommandTable.all {
            let mixed = spec.name.enumerated().map { $0.offset % 2 == 0 ? $0.element.lowercased() : String($0.element) }.joined()
            #expect(CommandTable.lookup(Array(mixed.utf8)[...])?.name == spec.name, "\(mixed)")
            var wrong = Array(spec.name.utf8)
            wrong[wrong.count - 1] = wrong.last == UInt8(ascii: "Q") ? UInt8(ascii: "J") : UInt8(ascii: "Q")
            let found = CommandTable.lookup(wrong[...])?.name
            #expect(found == nil || found == String(decoding: wrong, as: UTF8.self), "\(spec.name) with its last letter changed")
        }
        #expect(CommandTable.lookup([][...]) == nil)
        #expect(CommandTable.lookup(Array(repeating: UInt8(ascii: "G"), count: 200)[...]) == nil)
        #expect(CommandTable.lookup(Array("G\u{00C9}T".utf8)[...]) == nil, "no Unicode folding")
    }

    @Test("flags agree with what each command does: data commands read or write as their flag says")
    func flagsAgreeWithBehaviour() throws {
        for spec in CommandTable.all {
            let sample = try #require(Self.samples[spec.name])
            let command = Command(parsing: Request(sample.map { Array($0.utf8) }))
            let access = spec.flags.intersection([.readOnly, .write, .admin])
            if spec.flags.contains(.namespaced) {
                #expect([.readOnly, .write, .admin].contains(access), "\(spec.name): a namespaced command reads, writes or administers: \(access)")
            }
            #expect(!(spec.flags.contains(.readOnly) && spec.flags.contains(.write)), "\(spec.name)")
            switch command {
            case .data(let namespace, let operation, _):
                #expect(spec.flags.contains(.namespaced) && namespace == "ns", "\(spec.name)")
                #expect(operation.isWrite == spec.flags.contains(.write), "\(spec.name): isWrite \(operation.isWrite)")
                #expect(operation.isWrite != spec.flags.contains(.readOnly), "\(spec.name)")
                // What EXEC judges a queued command by again: the right its spec declares.
                #expect(operation.neededRight == spec.flags.neededRight, "\(spec.name): needs \(operation.neededRight.names), declares \(spec.flags.neededRight.names)")
            case .owned(let namespace, _):
                #expect(spec.flags.contains(.namespaced) && spec.flags.contains(.write) && namespace == "ns", "\(spec.name)")
            case .local:
                // A write of whole namespaces, named as its arguments (UNLINK, COPY) or all of
                // them (the flushes, which judge every one themselves), is no namespace's run.
                #expect(!spec.flags.contains(.write) || !spec.flags.isDisjoint(with: [.namespacedArguments, .sourceThenTarget]) || ["FLUSHDB", "FLUSHALL"].contains(spec.name),
                        "\(spec.name): a write must run in its namespace's run")
            case .refused(let error):
                Issue.record("\(spec.name): \(error.message)")
            }
        }
        #expect(CommandTable.lookup(Array("QUIT".utf8)[...])?.flags.contains(.session) == true)
        #expect(CommandTable.lookup(Array("PING".utf8)[...])?.flags.contains(.allowedWhileFollowing) == true)
        let following = CommandTable.all.filter { $0.flags.contains(.allowedWhileFollowing) }.map(\.name)
        #expect(Set(following) == ["CHANGES", "PING", "QUIT", "RESET"], "protocol.md: only CHANGES, PING, QUIT and RESET while following")
    }

    @Test("every command declares exactly one right (read, write, admin, server owner or none), and a namespace for read/write/admin")
    func everyCommandDeclaresItsRight() throws {
        for spec in CommandTable.all {
            let declared = CommandFlags.rightDeclarations.filter { spec.flags.contains($0) }
            #expect(declared.count == 1, "\(spec.name) declares \(declared.count) rights: a command must declare exactly one of readOnly, write, admin, serverOwner, unrestricted")
            let names = spec.flags.intersection([.namespaced, .namespacedArguments, .sourceThenTarget])
            #expect(names.rawValue.nonzeroBitCount <= 1, "\(spec.name) names its namespaces in \(names.rawValue.nonzeroBitCount) ways")
            if spec.flags.contains(.unrestricted) || spec.flags.contains(.serverOwner) {
                #expect(names.isEmpty, "\(spec.name): a command that needs no namespace right names no namespace")
            } else if names.isEmpty {
                // Only the listings that filter what they show by the read right, and the flushes,
                // which judge the write right on every namespace themselves.
                #expect(["NAMESPACES", "INFO", "KEYS", "DBSIZE", "RANDOMKEY", "FLUSHDB", "FLUSHALL"].contains(spec.name), "\(spec.name) needs a right but names no namespace to need it on")
            }
        }
        // SCAN's keyspace form (a cursor first) is such a listing too, its first word no namespace.
        guard case .local(let keyspaceScan) = Command(parsing: Request([Array("SCAN".utf8), Array("0".utf8)])) else {
            Issue.record("SCAN 0 does not parse as a listing")
            return
        }
        #expect(keyspaceScan.flags == [.readOnly])
        // A subcommand may declare its own: ACL LOAD is the server's uid's only.
        guard case .local(let load) = Command(parsing: Request([Array("ACL".utf8), Array("load".utf8)])) else {
            Issue.record("ACL LOAD does not parse")
            return
        }
        #expect(load.flags == [.serverOwner])
    }

    @Test("CLIENT ID, SETNAME and GETNAME answer as protocol.md says; bad names and subcommands are refused")
    func clientCommands() async throws {
        let directory = TemporaryDirectory()
        let store = try Store(directory: directory.path + "/data")
        let processor = CommandProcessor(store: store) { _ in [] }
        let session = ClientSession(id: 17, peer: nil)
        let request = { (words: [String]) in Command(parsing: Request(words.map { Array($0.utf8) })) }
        let replies = await processor.process([
            request(["CLIENT", "GETNAME"]), request(["CLIENT", "SETNAME", "backup-job"]), request(["client", "getname"]),
            request(["CLIENT", "ID"]), request(["CLIENT", "SETNAME", "two words"]), request(["CLIENT", "SETNAME", "tab\there"]),
            request(["CLIENT", "KILL", "x"]), request(["CLIENT", "ID", "extra"]), request(["CLIENT", "SETNAME", ""]),
            request(["CLIENT", "GETNAME"]), request(["CLIENT"]),
        ], session: session)
        #expect(replies[0] == .null)
        #expect(replies[1] == .simple("OK"))
        #expect(replies[2] == .bulk(Array("backup-job".utf8)))
        #expect(replies[3] == .integer(17))
        #expect(replies[4] == .error("ERR Client names cannot contain spaces, newlines or special characters."))
        #expect(replies[5] == replies[4])
        #expect(replies[6].errorCode == "ERR" && replies[7].errorCode == "ERR" && replies[10].errorCode == "ERR")
        #expect(replies[8] == .simple("OK"))
        #expect(replies[9] == .null)
        #expect(session.name == nil)
        await store.close()
    }

    @Test("CommandTrace names what Redis's CLIENT LIST shows as cmd: the command in lower case, a container's subcommand after '|', none (NULL) for an unknown command or subcommand")
    func commandTraceNames() {
        func traced(_ words: [String]) -> String? {
            var trace = CommandTrace(packed: 12345)
            _ = Command(parsing: Request(words.map { Array($0.utf8) }), rights: nil, names: nil, trace: &trace)
            return trace.name
        }
        #expect(traced(["get", "ns", "k"]) == "get")
        #expect(traced(["HSET", "h", "f", "v"]) == "hset")
        #expect(traced(["GET", "ns"]) == "get", "an arity error still names the command, as in Redis")
        #expect(traced(["client", "List"]) == "client|list")
        #expect(traced(["CLIENT", "SETINFO", "LIB-NAME", "x"]) == "client|setinfo")
        #expect(traced(["CONFIG", "GET", "maxmemory"]) == "config|get")
        #expect(traced(["ACL", "whoami"]) == "acl|whoami")
        #expect(traced(["COMMAND"]) == "command")
        #expect(traced(["COMMAND", "DOCS"]) == "command|docs")
        #expect(traced(["CLIENT", "NOSUCH"]) == nil)
        #expect(traced(["NOSUCH", "x"]) == nil)
        for spec in CommandTable.all {
            #expect(traced([spec.name]) == spec.name.lowercased())
            for sub in spec.subcommands {
                let name = String(decoding: sub, as: UTF8.self)
                #expect(traced([spec.name, name]) == "\(spec.name)|\(name)".lowercased())
            }
        }
    }
}
