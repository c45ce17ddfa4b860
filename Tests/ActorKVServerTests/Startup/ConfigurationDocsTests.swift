import ActorKVServer
import ActorKVStore
import ActorKVTestSupport
import Foundation
import Testing

/// The defaults that `--help` and README.md's configuration table state are the ones the code uses.
@Suite("Documented defaults")
struct ConfigurationDocsTests {
    /// The configuration a command line parses to, as text (every field, by reflection).
    static func parsed(_ arguments: [String]) throws -> String {
        guard case .run(let configuration) = try ServerConfiguration.parse(arguments) else {
            throw TestFailure("\(arguments) did not parse to a configuration")
        }
        return String(describing: configuration)
    }

    /// `--flag` → the default `--help` states for it (the first word after "default").
    static func helpDefaults() -> [String: String] {
        var entries: [String: String] = [:]
        var flag: String?
        for line in ServerConfiguration.usage.split(separator: "\n") {
            let words = line.split(separator: " ")
            if let first = words.first, first.hasPrefix("--") { flag = String(first) }
            guard let flag, let range = line.range(of: "(default ") else { continue }
            let value = line[range.upperBound...].prefix { $0 != "," && $0 != ")" }
            entries[flag] = String(value)
        }
        return entries
    }

    /// The command line a flag's default is tried on: cluster mode's flags need `--etcd`.
    static func base(for flag: String) -> [String] {
        ["--etcd-prefix", "--ephemeral-ttl"].contains(flag) ? ["--etcd", "http://127.0.0.1:2379"] : []
    }

    @Test("an embedded store's default value limit is the server's --max-value-bytes default (32 MiB)")
    func embeddedValueLimitMatchesServer() throws {
        #expect(StoreLimits().maxValueBytes == 32 << 20)
        #expect(StoreOptions().limits.maxValueBytes == ServerConfiguration().maxValueBytes)
    }

    @Test("each default in --help, passed explicitly, changes nothing")
    func helpMatchesCode() throws {
        let defaults = Self.helpDefaults()
        #expect(defaults.count >= 16, "found \(defaults.keys.sorted())")
        for (flag, value) in defaults.sorted(by: { $0.key < $1.key }) {
            let base = Self.base(for: flag)
            #expect(try Self.parsed(base + [flag, value]) == Self.parsed(base), "\(flag) \(value) differs from the default")
        }
    }

    /// A Markdown file of the repository.
    static func document(_ name: String) throws -> String {
        try PackageFiles.text(name)
    }

    /// The rows of a Markdown table that name a flag: `--flag` (from the cell at `flagColumn`) →
    /// the default in the cell at `defaultColumn`, as a command-line value (`32 MiB` → 33554432,
    /// `65,536` → 65536, backticks dropped); flags whose default is not a value are skipped.
    static func tableDefaults(_ text: String, flagColumn: Int, defaultColumn: Int) -> [String: String] {
        var entries: [String: String] = [:]
        for line in text.split(separator: "\n") where line.hasPrefix("|") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count > max(flagColumn, defaultColumn), cells[flagColumn].hasPrefix("`--") else { continue }
            let flag = String(cells[flagColumn].dropFirst().prefix { $0 != " " && $0 != "`" })
            var value = cells[defaultColumn].replacingOccurrences(of: "`", with: "").replacingOccurrences(of: ",", with: "")
            if value.hasSuffix(" MiB"), let n = Int(value.dropLast(4)) { value = String(n << 20) }
            guard !["none", "off"].contains(value) else { continue }
            entries[flag] = value
        }
        return entries
    }

    @Test("each default in README.md's configuration table and protocol.md's limits, passed explicitly, changes nothing",
          arguments: [("README.md", 0, 1, 16), ("protocol.md", 1, 2, 7)])
    func documentsMatchCode(file: String, flagColumn: Int, defaultColumn: Int, expectedRows: Int) throws {
        let defaults = Self.tableDefaults(try Self.document(file), flagColumn: flagColumn, defaultColumn: defaultColumn)
        #expect(defaults.count >= expectedRows, "\(file): found \(defaults.keys.sorted())")
        for (flag, value) in defaults.sorted(by: { $0.key < $1.key }) {
            let base = Self.base(for: flag)
            #expect(try Self.parsed(base + [flag, value]) == Self.parsed(base), "\(file): \(flag) \(value) differs from the default")
        }
    }
}
