import ActorKVProtocol

/// ActorKVProtocol's ``ActorKVProtocol/RepositoryKey``, in scope with `import ActorKVClient`: the
/// id types a ``RemoteRepository`` can use (String, UUID, Int, or a type of your own that
/// conforms). The same protocol as ActorKVStore's `RepositoryKey`, so a file that imports both
/// modules conforms a type once, for both repositories.
public typealias RepositoryKey = ActorKVProtocol.RepositoryKey
