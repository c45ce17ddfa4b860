/// One etcd member's client URL, `http://host:port` (the agent speaks plain HTTP/1.1 to etcd's
/// v3 JSON gateway; TLS is not supported).
public struct EtcdEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// The host name or address.
    public let host: String
    /// The port.
    public let port: UInt16

    /// Parses `http://host:port` (the port defaults to 2379; a trailing `/` is allowed).
    public init(url: String) throws(EtcdError) {
        var rest = Substring(url)
        guard rest.hasPrefix("http://") else {
            throw EtcdError(.invalidConfiguration, "etcd endpoint '\(url)' must start with http:// (TLS is not supported)")
        }
        rest = rest.dropFirst(7)
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.isEmpty, !rest.contains("/") else { throw EtcdError(.invalidConfiguration, "etcd endpoint '\(url)' must be http://host:port") }
        if let bracket = rest.firstIndex(of: "]"), rest.hasPrefix("[") {
            host = String(rest[rest.index(after: rest.startIndex)..<bracket])
            rest = rest[rest.index(after: bracket)...]
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            rest = rest[colon...]
        } else {
            host = String(rest)
            rest = ""
        }
        if rest.isEmpty { port = 2379; return }
        guard rest.hasPrefix(":"), let p = UInt16(rest.dropFirst()), p > 0, !host.isEmpty else {
            throw EtcdError(.invalidConfiguration, "etcd endpoint '\(url)' has no valid port")
        }
        port = p
    }

    /// Parses a comma-separated list of endpoints (at least one).
    public static func list(_ text: String) throws(EtcdError) -> [EtcdEndpoint] {
        let parts = text.split(separator: ",").map { String($0).trimmingSpaces }.filter { !$0.isEmpty }
        guard !parts.isEmpty else { throw EtcdError(.invalidConfiguration, "--etcd needs at least one endpoint, e.g. http://127.0.0.1:2379") }
        var out: [EtcdEndpoint] = []
        for part in parts { out.append(try EtcdEndpoint(url: part)) }
        return out
    }

    /// `http://host:port`.
    public var description: String { host.contains(":") ? "http://[\(host)]:\(port)" : "http://\(host):\(port)" }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    var trimmingSpaces: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
