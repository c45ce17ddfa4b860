/// One connection open on the server, as a line of `CLIENT LIST` describes it
/// (``ActorKVClient/clients()``): who is connected, for how long, and how long it has been
/// silent. A lock holder that hangs with its connection open shows a growing ``idle``; closing
/// its connection (``ActorKVClient/killClient(_:)``) releases its locks.
public struct ConnectedClient: Sendable, Equatable {
    /// The connection's id (`CLIENT ID`), what ``ActorKVClient/killClient(_:)`` takes.
    public var id: UInt64
    /// The name it gave itself (`CLIENT SETNAME`); nil if none.
    public var name: String?
    /// Seconds since the server accepted it.
    public var age: Int
    /// Seconds since it last sent a request (since its accept if it sent none).
    public var idle: Int
    /// Its last command as Redis names it (`put`, `hset`, `client|list`); nil before its first
    /// (the server shows `NULL`).
    public var command: String?
    /// Whether it follows changes (`CHANGES`): flag `P`.
    public var followsChanges: Bool
    /// The peer's user, group and process ids as the kernel gave them on accept; nil where the
    /// server shows `?` (it could not read them).
    public var uid: UInt32?, gid: UInt32?, pid: Int32?
    /// Every `key=value` field of the line as the server sent it, those above included.
    public var fields: [String: String]

    /// Reads one line of `CLIENT LIST` (or `CLIENT INFO`); nil if it has no numeric `id`.
    public init?(line: Substring) {
        var fields: [String: String] = [:]
        for word in line.split(separator: " ") {
            guard let equals = word.firstIndex(of: "=") else { continue }
            fields[String(word[..<equals])] = String(word[word.index(after: equals)...])
        }
        guard let id = fields["id"].flatMap({ UInt64($0) }) else { return nil }
        self.id = id
        self.name = fields["name"].flatMap { $0.isEmpty ? nil : $0 }
        self.age = fields["age"].flatMap { Int($0) } ?? 0
        self.idle = fields["idle"].flatMap { Int($0) } ?? 0
        self.command = fields["cmd"].flatMap { $0 == "NULL" || $0.isEmpty ? nil : $0 }
        self.followsChanges = fields["flags"]?.contains("P") ?? false
        self.uid = fields["uid"].flatMap { UInt32($0) }
        self.gid = fields["gid"].flatMap { UInt32($0) }
        self.pid = fields["pid"].flatMap { Int32($0) }
        self.fields = fields
    }

    /// The connections a `CLIENT LIST` reply describes, in its order (lines without an id are
    /// left out).
    public static func list(_ text: String) -> [ConnectedClient] {
        text.split(separator: "\n").compactMap { ConnectedClient(line: $0) }
    }
}
