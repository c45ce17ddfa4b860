// The commands `actorkv` runs.

/// The commands `actorkv` runs, each once: the words that name it and whether it changes data.
/// ``CommandRunner`` switches over every case, so a command added here must be run there.
enum CLICommand: String, CaseIterable {
    case get, put, getv, pttl, expire, persist, lock, incr, del, exists, count, memory, scan, batch, changes, compact, backup, unlink, rename, renamenx, copy, sync
    case namespaces, info, ping, clients, shutdown
    case killClient = "kill-client"

    /// The command `word` (lowercased) names, aliases included (`set` is `put`, `delete` is
    /// `del`); nil when it names none.
    init?(word: String) {
        switch word {
        case "set": self = .put
        case "delete": self = .del
        default: self.init(rawValue: word)
        }
    }

    /// Whether it changes data: the outcome of one whose reply never came is unknown.
    var writes: Bool {
        switch self {
        case .put, .incr, .del, .batch, .expire, .persist, .compact, .killClient, .unlink, .rename, .renamenx, .copy, .shutdown: true
        case .get, .getv, .pttl, .lock, .exists, .count, .memory, .scan, .changes, .namespaces, .info, .ping, .backup, .clients, .sync: false
        }
    }
}
