import ActorKVStore

/// `actorkvd --check`: reads every namespace of a data directory as the server would open it,
/// changing nothing, and says which would open and which would be refused.
public enum DataCheck {
    /// What to print and how to exit.
    public struct Report: Sendable, Equatable {
        /// For stdout: one line per namespace, then the verdict.
        public var lines: [String]
        /// For stderr: why the directory could not be checked at all.
        public var error: String?
        /// 0 if every namespace would open; 1 if any would be refused or the directory could not
        /// be checked (missing, unreadable, or in use by a running server).
        public var status: Int32
    }

    /// Checks `directory`.
    public static func run(directory: String) -> Report {
        let results: [NamespaceCheck]
        do {
            results = try Store.check(directory: directory)
        } catch {
            return Report(lines: [], error: "actorkvd: cannot check: \(error.message)", status: 1)
        }
        let refused = results.filter { !$0.isReadable }.count
        let verdict = results.isEmpty ? "no namespaces in \(directory)"
            : refused == 0 ? "\(results.count) namespace(s) in \(directory): all would open"
            : "\(results.count) namespace(s) in \(directory): \(refused) would be refused"
        return Report(lines: results.map(\.summary) + [verdict], error: nil, status: refused == 0 ? 0 : 1)
    }
}
