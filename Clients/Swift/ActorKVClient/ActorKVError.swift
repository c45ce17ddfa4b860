/// Every failure an ``ActorKVClient`` or ``RemoteRepository`` call can report.
///
/// The cases fall into three groups, each with a convenience test:
/// - the server refused the request (``server(code:message:)``; the connection stays usable),
/// - the connection could not be made or broke (``cannotConnect(path:errno:reason:)``,
///   ``connectionLost(_:)``, ``closed``; ``isConnectionError``); the next call reconnects,
/// - the bytes were not what was expected (``protocolViolation(_:)``, ``decodingFailed(namespace:key:reason:)``,
///   ``encodingFailed(_:)``).
public enum ActorKVError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered `-CODE message`. `code` is one of `ERR`, `BADNS`, `BADKEY`, `TOOBIG`,
    /// `BADCURSOR`, `CORRUPT`, `IOERR`, `SHUTDOWN`, `PROTO`, `MAXCLIENTS`, `NOPERM` (see protocol.md).
    case server(code: String, message: String)
    /// The socket at `path` could not be connected to; `errno` is the `connect(2)` (or `socket(2)`)
    /// error number and `reason` its text, e.g. "No such file or directory" when no server runs there.
    case cannotConnect(path: String, errno: Int32, reason: String)
    /// The connection broke while the call was pending (the server closed it, crashed, or a read or
    /// write failed). Whether a write that was pending took effect is unknown. The next call reconnects.
    case connectionLost(String)
    /// The connection was closed by ``ActorKVClient/close()`` while the call was pending.
    case closed
    /// The server sent bytes that are not valid RESP2, or a reply of the wrong shape for the command.
    case protocolViolation(String)
    /// A ``RemoteRepository`` found bytes under `key` that do not decode as its item type.
    case decodingFailed(namespace: String, key: [UInt8], reason: String)
    /// A ``RemoteRepository`` item could not be encoded as JSON.
    case encodingFailed(String)

    /// True for ``cannotConnect(path:errno:reason:)``, ``connectionLost(_:)`` and ``closed``:
    /// failures of the connection rather than of the request.
    public var isConnectionError: Bool {
        switch self {
        case .cannotConnect, .connectionLost, .closed: return true
        default: return false
        }
    }

    /// The server's error code (`BADNS`, `TOOBIG`, …) for ``server(code:message:)``, else nil.
    public var serverCode: String? {
        if case .server(let code, _) = self { return code }
        return nil
    }

    /// A one-line explanation, e.g. `BADNS namespace name is empty` or
    /// `cannot connect to ./actorkv.sock: No such file or directory`.
    public var description: String {
        switch self {
        case .server(let code, let message):
            return message.isEmpty ? code : "\(code) \(message)"
        case .cannotConnect(let path, _, let reason):
            return "cannot connect to \(path): \(reason)"
        case .connectionLost(let reason):
            return "connection lost: \(reason)"
        case .closed:
            return "connection closed by the client"
        case .protocolViolation(let reason):
            return "protocol error: \(reason)"
        case .decodingFailed(let namespace, let key, let reason):
            return "cannot decode the item under key '\(String(decoding: key, as: UTF8.self))' in namespace "
                + "'\(namespace)': \(reason)"
        case .encodingFailed(let reason):
            return "cannot encode item: \(reason)"
        }
    }

    /// Parses the text of an error reply (`CODE message`, without the leading `-`).
    static func fromErrorReply(_ text: String) -> ActorKVError {
        if let space = text.firstIndex(of: " ") {
            return .server(code: String(text[..<space]), message: String(text[text.index(after: space)...]))
        }
        return .server(code: text, message: "")
    }
}
