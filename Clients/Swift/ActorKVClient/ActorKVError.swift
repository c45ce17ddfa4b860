import ActorKVProtocol

/// Every failure an ``ActorKVClient`` or ``RemoteRepository`` call can report.
///
/// The cases fall into three groups, each with a convenience test:
/// - the server refused the request (``server(code:message:)``; the connection stays usable),
/// - the connection could not be made, was refused, broke or timed out
///   (``cannotConnect(path:errno:reason:)``, ``refused(path:code:message:)``, ``timedOut(_:)``,
///   ``connectionLost(_:)``, ``closed``; ``isConnectionError``); the next call reconnects,
/// - the bytes were not what was expected (``protocolViolation(_:)``, ``decodingFailed(namespace:key:reason:)``,
///   ``encodingFailed(_:)``), or a read-modify-write kept losing the race (``conflict(_:)``).
///
/// A wait that the calling task's cancellation ended is ``cancelled`` (neither group: nothing
/// failed, and the client stays usable).
///
/// Two calls are not typed: ``RemoteRepository/update(_:maxAttempts:_:)`` also throws what its
/// body throws and `CancellationError`, and ``ChangeMirror/updates()`` is an
/// `AsyncThrowingStream` (whose error type is `any Error`) that throws only an `ActorKVError`.
///
/// A change stream (``ActorKVClient/changes(_:prefix:from:reconnect:)``) can also
/// end with ``compacted(namespace:requested:oldestAvailable:)``; a lock
/// (``ActorKVClient/withLock(_:_:timeout:ttl:_:)-([UInt8])``, ``ActorKVClient/acquireLock(_:_:timeout:ttl:)-([UInt8])``)
/// with ``lockTimedOut(namespace:key:timeout:)`` or ``lockLost(namespace:key:token:reason:)``.
public enum ActorKVError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered `-CODE message`. `code` is the raw value of a `WireErrorCode` (the
    /// list protocol.md documents): `ERR`, `BADNS`, `BADKEY`, `TOOBIG`, `BADCURSOR`, `CORRUPT`,
    /// `IOERR`, `SHUTDOWN` or `PROTO`, typed as ``wireCode``; it stays a string so that a code
    /// a newer server sends still arrives. `NOPERM` here is a command refused for want of a
    /// right on its namespace (``isPermissionDenied``). The server's refusal of a connection
    /// (`MAXCLIENTS`, or `NOPERM connection refused: …`: `WireErrorCode.refusesConnection(code:message:)`)
    /// is ``refused(path:code:message:)`` instead.
    case server(code: String, message: String)
    /// The socket at `path` could not be connected to; `errno` is the `connect(2)` (or `socket(2)`)
    /// error number and `reason` its text, e.g. "No such file or directory" when no server runs there.
    case cannotConnect(path: String, errno: Int32, reason: String)
    /// The server at `path` refused the connection: on accepting it, it sent `-MAXCLIENTS` (it has
    /// `--max-clients` connections open) or `-NOPERM` (this process's uid or gid is not in its
    /// `--allow-uid` / `--allow-gid`), with `message`, and closed it. No request on that connection
    /// was applied, whether or not it was sent before the refusal arrived. The next call connects
    /// again (which succeeds once the server admits it).
    case refused(path: String, code: String, message: String)
    /// The server did not answer within the client's timeout (``ActorKVClient/timeout``): a call
    /// waited that long without a byte of reply arriving (the server is stopped, hung or
    /// overloaded), or the server did not accept the connection that long. The connection is
    /// dropped, since a late reply would be taken for the answer to the next request; whether a
    /// pending write took effect is unknown. The next call connects again. `reason` says which.
    case timedOut(String)
    /// The connection broke while the call was pending (the server closed it, crashed, or a read or
    /// write failed). Whether a write that was pending took effect is unknown. The next call reconnects.
    case connectionLost(String)
    /// The connection was closed by ``ActorKVClient/close()`` while the call was pending.
    case closed
    /// The calling task was cancelled while it waited: for a lock held by another
    /// (``ActorKVClient/acquireLock(_:_:timeout:ttl:)-([UInt8])``,
    /// ``ActorKVClient/withLock(_:_:timeout:ttl:_:)-([UInt8])``: it stopped waiting, does not
    /// hold the lock, and the body did not run), for a mirror to catch up
    /// (``ChangeMirror/waitUntil(sequence:)``: the mirror goes on), or for a new mirror's first
    /// snapshot (``ActorKVClient/mirror(_:prefix:reconnect:)-([UInt8])``: it is closed). Swift's `CancellationError`
    /// for a call whose errors are typed; the client and its connections stay usable.
    case cancelled
    /// The server sent bytes that are not valid RESP2, or a reply of the wrong shape for the command.
    case protocolViolation(String)
    /// A ``RemoteRepository`` found bytes under `key` that do not decode as its item type, or
    /// decode as an item whose id's key is not `key` (``RepositoryKey``), or a key that is not
    /// an id's (in a change). In a change stream, `reason` ends with the sequence of the change
    /// or snapshot (see ``RepositoryChangeSequence/Iterator/next()``).
    case decodingFailed(namespace: String, key: [UInt8], reason: String)
    /// A ``RemoteRepository`` item could not be encoded as JSON.
    case encodingFailed(String)
    /// A read-modify-write (``RemoteRepository/update(_:maxAttempts:_:)``) found the key written
    /// by someone else between its read and its conditional write on every one of its attempts;
    /// nothing was written by it. `reason` says which key and how many attempts.
    case conflict(String)
    /// A change stream asked for the changes of `namespace` after sequence `requested`
    /// (`CHANGES … FROM requested`), and the server no longer holds them all: its oldest change
    /// is `oldestAvailable` (`-COMPACTED oldest available sequence is N`). Nothing was skipped:
    /// follow again from a snapshot (``ChangeStart/snapshot``), as a ``ChangeMirror`` does by itself.
    case compacted(namespace: String, requested: UInt64, oldestAvailable: UInt64)
    /// A lock on `key` in `namespace` was not acquired within `timeout`: another holder kept it
    /// all that time (with a `timeout` of zero: it was held at the one attempt). Nothing was
    /// written and nothing is held.
    case lockTimedOut(namespace: String, key: [UInt8], timeout: Duration)
    /// The lock on `key` in `namespace` that was acquired with fencing token `token` was no
    /// longer held when it was released: its connection broke (the server closed it, was
    /// restarted or killed; the server releases the lock of a connection that closes), or the
    /// key expired (the lock's `ttl`), or someone deleted or overwrote it. What ran under the
    /// lock may have overlapped with the next holder's work; writes fenced with the token (a
    /// resource that refuses tokens older than the newest it has seen) are safe. `reason` says
    /// which.
    case lockLost(namespace: String, key: [UInt8], token: UInt64, reason: String)

    /// True for ``cannotConnect(path:errno:reason:)``, ``refused(path:code:message:)``,
    /// ``timedOut(_:)``, ``connectionLost(_:)`` and ``closed``: failures of the connection rather
    /// than of the request.
    public var isConnectionError: Bool {
        switch self {
        case .cannotConnect, .refused, .timedOut, .connectionLost, .closed: return true
        default: return false
        }
    }

    /// True for a command the server refused because the client lacks a right on its namespace
    /// (`NOPERM no write permission on namespace 'config' for uid 33`, under `actorkvd --acl`):
    /// nothing was applied and the connection stays usable. Also the end of a change stream
    /// that may not read its namespace, from the start or once a reload of the server's rules
    /// withdrew the right (the stream does not reconnect). A connection refused on accept
    /// (`--allow-uid`, `--allow-gid`) is ``refused(path:code:message:)`` instead.
    public var isPermissionDenied: Bool { serverCode == WireErrorCode.noPerm.rawValue }

    /// True for ``cannotConnect(path:errno:reason:)`` and ``connectionLost(_:)``: the server
    /// was not there or went away, as when it is restarted; an attempt may succeed later.
    var meansServerGone: Bool {
        switch self {
        case .cannotConnect, .connectionLost: return true
        default: return false
        }
    }

    /// The server's error code (`BADNS`, `TOOBIG`, …) for ``server(code:message:)``, else nil.
    public var serverCode: String? {
        if case .server(let code, _) = self { return code }
        return nil
    }

    /// The server's error code, typed, for ``server(code:message:)`` and
    /// ``refused(path:code:message:)`` (and `COMPACTED` for
    /// ``compacted(namespace:requested:oldestAvailable:)``); nil for any other case, and for a
    /// code this client does not know (a newer server's; ``serverCode`` still has its text).
    public var wireCode: WireErrorCode? {
        switch self {
        case .server(let code, _), .refused(_, let code, _): return WireErrorCode(rawValue: code)
        case .compacted: return .compacted
        default: return nil
        }
    }

    /// A one-line explanation, e.g. `BADNS namespace name is empty` or
    /// `cannot connect to ./actorkv.sock: No such file or directory`.
    public var description: String {
        switch self {
        case .server(let code, let message):
            return message.isEmpty ? code : "\(code) \(message)"
        case .cannotConnect(let path, _, let reason):
            return "cannot connect to \(path): \(reason)"
        case .refused(let path, let code, let message):
            return "cannot connect to \(path): the server refused the connection: "
                + (message.isEmpty ? code : "\(code) \(message)")
        case .timedOut(let reason):
            return "timed out: \(reason)"
        case .connectionLost(let reason):
            return "connection lost: \(reason)"
        case .closed:
            return "connection closed by the client"
        case .cancelled:
            return "cancelled: the task was cancelled while it waited"
        case .protocolViolation(let reason):
            return "protocol error: \(reason)"
        case .decodingFailed(let namespace, let key, let reason):
            return "cannot decode the item under key '\(String(decoding: key, as: UTF8.self))' in namespace "
                + "'\(namespace)': \(reason)"
        case .encodingFailed(let reason):
            return "cannot encode item: \(reason)"
        case .conflict(let reason):
            return "conflict: \(reason)"
        case .compacted(let namespace, let requested, let oldestAvailable):
            return "COMPACTED the changes of namespace '\(namespace)' after sequence \(requested) are no longer all "
                + "held (oldest available sequence is \(oldestAvailable)): follow from a snapshot instead"
        case .lockTimedOut(let namespace, let key, let timeout):
            return "lock not acquired: key '\(String(decoding: key, as: UTF8.self))' in namespace '\(namespace)' "
                + (timeout > .zero ? "was held by another holder for the whole \(secondsText(timeout))" : "is held by another holder")
        case .lockLost(let namespace, let key, let token, let reason):
            return "lock lost: key '\(String(decoding: key, as: UTF8.self))' in namespace '\(namespace)' was no longer "
                + "locked by this holder (token \(token)) when it was released: \(reason)"
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
