import ActorKVProtocol

/// ActorKVProtocol's ``ActorKVProtocol/RepositoryKey``, in scope with `import ActorKVStore`: the
/// id types a ``Repository`` can use (String, UUID, Int, or a type of your own that conforms).
/// The same protocol as ActorKVClient's `RepositoryKey`, so a file that imports both modules
/// conforms a type once, for both repositories.
public typealias RepositoryKey = ActorKVProtocol.RepositoryKey
