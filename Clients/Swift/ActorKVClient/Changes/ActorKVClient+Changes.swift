extension ActorKVClient {
    /// The changes of `namespace` (only the keys that start with `prefix`) as they are written:
    /// `CHANGES namespace [PREFIX prefix] [FROM seq | SNAPSHOT]` on a connection of the stream's own.
    ///
    ///     for try await event in kv.changes("config", from: .snapshot) {
    ///         switch event {
    ///         case .snapshot(let page): load(page.entries)
    ///         case .change(let change): apply(change.keys)
    ///         case .synced: break
    ///         }
    ///     }
    ///
    /// Each iteration opens its own connection, to the client's socket, when the loop first asks
    /// for an event. A change is delivered once it is as durable as the server's `--fsync`
    /// promises, in order: none is missed and none delivered twice. If the connection breaks
    /// (or the server ends the stream with `-LAGGING`, `-SHUTDOWN`, or, in cluster mode, with
    /// `-UNAVAILABLE` when its agent loses etcd), the stream reconnects as `reconnect` says and resumes after the last change it delivered
    /// (`FROM seq`), so the loop does not notice, except for a second ``ChangeEvent/synced(_:)``.
    /// A broken connection during the snapshot is followed by a new snapshot (see
    /// ``SnapshotPage/isFirst``).
    ///
    /// The loop ends (returns nil) when its task is cancelled, which closes the connection; so
    /// does leaving the loop. It throws:
    /// - ``ActorKVError/compacted(namespace:requested:oldestAvailable:)`` when the changes after
    ///   the sequence to resume from are no longer all held (follow from ``ChangeStart/snapshot``);
    /// - a connection error when the first connection cannot be made, or reconnecting fails for
    ///   `reconnect.giveUpAfter`;
    /// - ``ActorKVError/server(code:message:)`` for a refusal (`BADNS`, `ERR` for a `FROM`
    ///   sequence after the namespace's last one, …), ``ActorKVError/protocolViolation(_:)`` for
    ///   a message that breaks the protocol;
    /// - ``ActorKVError/server(code:message:)`` with `NOPERM` (``ActorKVError/isPermissionDenied``)
    ///   when the client may not read `namespace` (under `actorkvd --acl`): at once, or after the
    ///   changes already sent when a reload of the server's rules withdraws the right (the
    ///   server then closes the stream). It does not reconnect: the right would still be missing.
    ///
    /// The client's ``timeout`` bounds connecting and the wait for the server's answer to
    /// `CHANGES`; an idle stream waits for changes without a time limit. Events wait in a
    /// small buffer (32 events, or about 1 MiB of keys and values): a consumer that stops reading
    /// makes the server drop the stream (`-LAGGING`), and the stream then resumes from the
    /// server's log as soon as it reads again.
    public func changes(_ namespace: String, prefix: [UInt8] = [], from start: ChangeStart = .now,
                        reconnect: ReconnectPolicy = .default) -> ChangeStream {
        ChangeStream(namespace: namespace, prefix: prefix, start: start, reconnect: reconnect,
                     socketPath: socketPath, timeout: timeout, resnapshots: false)
    }

    /// The changes of the keys that start with the UTF-8 bytes of `prefix`; see
    /// ``changes(_:prefix:from:reconnect:)``.
    public func changes(_ namespace: String, prefix: String, from start: ChangeStart = .now,
                        reconnect: ReconnectPolicy = .default) -> ChangeStream {
        changes(namespace, prefix: Array(prefix.utf8), from: start, reconnect: reconnect)
    }

    /// A local copy of `namespace` (its keys that start with `prefix`) that a connection of its
    /// own keeps current: see ``ChangeMirror``. Returns once the copy holds the namespace's
    /// state as of the moment it caught up (`synced`).
    ///
    /// Throws what ``changes(_:prefix:from:reconnect:)`` throws before that, except
    /// `COMPACTED`, after which the mirror takes a new snapshot; ``ActorKVError/cancelled`` if the
    /// calling task is cancelled first (the mirror it was making is closed).
    public func mirror(_ namespace: String, prefix: [UInt8] = [],
                       reconnect: ReconnectPolicy = .default) async throws(ActorKVError) -> ChangeMirror {
        let stream = ChangeStream(namespace: namespace, prefix: prefix, start: .snapshot, reconnect: reconnect,
                                  socketPath: socketPath, timeout: timeout, resnapshots: true)
        let mirror = ChangeMirror(namespace: namespace, prefix: prefix, stream: stream)
        try await mirror.waitUntilSynced()
        return mirror
    }

    /// A mirror of the keys that start with the UTF-8 bytes of `prefix`; see
    /// ``mirror(_:prefix:reconnect:)``.
    public func mirror(_ namespace: String, prefix: String,
                       reconnect: ReconnectPolicy = .default) async throws(ActorKVError) -> ChangeMirror {
        try await mirror(namespace, prefix: Array(prefix.utf8), reconnect: reconnect)
    }
}
