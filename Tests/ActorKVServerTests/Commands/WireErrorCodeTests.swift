import ActorKVProtocol
import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// `WireErrorCode` is the one list of wire error codes: protocol.md documents exactly those, the
/// Python client lists exactly those, and `ErrorMapping` sends each engine error as the code
/// protocol.md documents for it.
@Suite("Wire error codes")
struct WireErrorCodeTests {

    /// The codes in the first column of the table under `## Errors` in `markdown`, in table order.
    static func documentedCodes(_ markdown: String) throws -> [String] {
        let lines = markdown.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0 == "## Errors" }) else {
            throw TestFailure("protocol.md has no '## Errors' section")
        }
        var codes: [String] = []
        for line in lines[(start + 1)...] {
            if line.hasPrefix("## ") { break }
            guard line.hasPrefix("|") else { continue }
            let first = line.split(separator: "|", omittingEmptySubsequences: false)[1]
                .trimmingCharacters(in: .whitespaces)
            if first == "code" || first.allSatisfy({ $0 == "-" || $0 == " " }) { continue }  // header, separator
            guard first.count > 2, first.hasPrefix("`"), first.hasSuffix("`") else {
                throw TestFailure("a row of protocol.md's error table does not start with a `CODE` cell: \(line)")
            }
            codes.append(String(first.dropFirst().dropLast()))
        }
        return codes
    }

    @Test("protocol.md's error table lists exactly WireErrorCode.allCases, each once")
    func protocolDocumentListsEveryCode() throws {
        let text = try PackageFiles.text("protocol.md")
        let documented = try Self.documentedCodes(text)
        let known = WireErrorCode.allCases.map(\.rawValue)
        #expect(documented.count == Set(documented).count, "a code appears twice: \(documented)")
        #expect(Set(documented).subtracting(known).sorted() == [], "documented, but not a WireErrorCode")
        #expect(Set(known).subtracting(documented).sorted() == [], "a WireErrorCode that protocol.md does not document")
    }

    @Test("the Python client's ERROR_CODES is WireErrorCode.allCases, and _FATAL_CODES the codes that close the connection")
    func pythonClientListsEveryCode() async throws {
        let clientDirectory = PackageFiles.path("Clients/python")
        let script = """
        import sys
        sys.path.insert(0, sys.argv[1])
        import actorkv
        print(" ".join(actorkv.ERROR_CODES))
        print(" ".join(sorted(actorkv._FATAL_CODES)))
        """
        let (status, out, err) = try await onOwnThread {
            let p = try ChildProcess("/usr/bin/env", ["python3", "-c", script, clientDirectory], stdout: .pipe, stderr: .pipe)
            let (out, err) = p.readOutputs()
            return (p.status, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
        }
        try #require(status == 0, "python3 failed (\(status)): \(err)")
        let lines = out.split(separator: "\n").map(String.init)
        try #require(lines.count == 2, "unexpected output: \(out)")
        #expect(lines[0] == WireErrorCode.allCases.map(\.rawValue).joined(separator: " "), "ERROR_CODES")
        #expect(lines[1] == WireErrorCode.allCases.filter(\.closesConnection).map(\.rawValue).sorted()
            .joined(separator: " "), "_FATAL_CODES")
    }

    /// The wire code protocol.md's error table documents for each engine error code. `locked` is
    /// raised only while the server opens its data directory at start, so never reaches a client;
    /// `invalidArgument` (an empty batch) is a malformed request, which the table puts under ERR.
    static let documentedMapping: [StoreError.Code: WireErrorCode] = [
        .invalidNamespace: .badNS,  // namespace name outside the allowed set
        .invalidKey: .badKey,  // empty key, or longer than 65,536 bytes
        .valueTooLarge: .tooBig,  // value longer than --max-value-bytes
        .invalidCursor: .badCursor,  // a SCAN cursor the server did not produce
        .corrupt: .corrupt,  // the namespace's files cannot be read as written
        .io: .ioErr,  // a read, write or fsync failed
        .durabilityLost: .ioErr,  // after a failed fsync the namespace refuses writes
        .closed: .shutdown,  // a request that reaches a store already closed
        .unsafeDirectory: .err,  // a namespace whose directory the server refuses to use
        .invalidArgument: .err,
        .locked: .err,
        .notAnInteger: .err,  // INCR of a value that is not an integer
        .overflow: .err,  // INCR past the 64-bit range
        .compacted: .compacted,  // CHANGES … FROM older than the history kept
        .tooManyNamespaces: .err,  // a write that would create a namespace past --max-namespaces
        .unavailable: .unavailable,  // cluster mode: no etcd member answers, or no quorum
    ]

    @Test("ErrorMapping sends every StoreError.Code as the code protocol.md documents for it")
    func storeErrorsMapToDocumentedCodes() {
        #expect(Set(Self.documentedMapping.keys) == Set(StoreError.Code.allCases),
                "the table above names every engine code")
        for code in StoreError.Code.allCases {
            let expected = Self.documentedMapping[code]
            #expect(ErrorMapping.wireCode(for: code) == expected, "\(code)")
            #expect(ErrorMapping.code(for: code) == expected?.rawValue, "\(code)")
            #expect(ErrorMapping.reply(for: StoreError(code, "what happened")) == .error("\(expected?.rawValue ?? "?") what happened"),
                    "\(code)")
        }
    }

    @Test("ErrorMapping's fixed replies carry the codes protocol.md gives them")
    func fixedReplies() {
        #expect(ErrorMapping.maxClients == .error("MAXCLIENTS max number of clients reached"))
        #expect(ErrorMapping.outOfDescriptors == .error("MAXCLIENTS the server is out of file descriptors (open files limit); try again later"))
        #expect(ErrorMapping.shuttingDown == .error("SHUTDOWN the server is shutting down; this request was not run"))
        #expect(ErrorMapping.notPermitted(uid: 7, gid: 8) == .error("NOPERM connection refused: uid 7 gid 8 is not allowed to connect"))
        #expect(ErrorMapping.reply(for: ProtocolError("bad header")) == .error("PROTO bad header"))
        #expect(ErrorMapping.reply(for: TestFailure("else") as any Error) == .error("ERR else"))
    }

    @Test("Reply.error(code, message) is '-CODE message', or '-CODE' alone for an empty message")
    func errorReplyFromCode() {
        #expect(Reply.error(.badKey, "key is empty").encoded == Array("-BADKEY key is empty\r\n".utf8))
        #expect(Reply.error(.err, "").encoded == Array("-ERR\r\n".utf8))
    }

    @Test("the codes that refuse a connection are MAXCLIENTS and NOPERM; those that close it add PROTO and LAGGING")
    func connectionFacts() {
        #expect(WireErrorCode.allCases.filter(\.refusesConnection) == [.maxClients, .noPerm])
        #expect(Set(WireErrorCode.allCases.filter(\.closesConnection)) == [.proto, .maxClients, .noPerm, .lagging])
    }

    @Test("a framing error over a limit names the size, the limit and the actorkvd flag; a malformed one names none")
    func protocolLimitsNameTheirFlag() {
        let cases: [(ProtocolError, String)] = [
            (.bulkTooLong(600, limit: 512), "invalid bulk length: 600 bytes, over the limit of 512 (actorkvd --max-bulk-bytes)"),
            (.inlineArgumentTooBig(600, limit: 512), "too big inline argument: 600 bytes, over the limit of 512 (actorkvd --max-bulk-bytes)"),
            (.tooManyArguments(9, limit: 8), "invalid multibulk length: 9 arguments, over the limit of 8 (actorkvd --max-arguments)"),
            (.tooManyInlineArguments(limit: 8), "too many inline arguments: over the limit of 8 (actorkvd --max-arguments)"),
            (.requestTooBig(2048, limit: 1024), "too big multibulk request: at least 2048 bytes, over the limit of 1024 (actorkvd --max-request-bytes)"),
            (.inlineTooBig(limit: 64), "too big inline request: over the limit of 64 bytes (actorkvd --max-inline-bytes)"),
            (.invalidBulkLength, "invalid bulk length"),
            (.invalidMultibulkLength, "invalid multibulk length"),
        ]
        for (error, message) in cases {
            #expect(ErrorMapping.reply(for: error) == .error(.proto, message))
        }
    }
}
