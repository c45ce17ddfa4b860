import ActorKVProtocol

/// A command's arguments after its name, read in place from the decoded request.
struct CommandArguments {
    private let request: Request
    /// The connection's memo of its last namespace name, if the parser was given one.
    private let names: NamespaceNames?

    init(_ request: Request, names: NamespaceNames? = nil) {
        self.request = request
        self.names = names
    }

    /// How many arguments follow the command name.
    var count: Int { request.count - 1 }
    /// Argument `index`, counted from 0 after the name, without copying.
    subscript(index: Int) -> ArraySlice<UInt8> { request[index + 1] }
    /// Argument `index` as an array of its own (what the engine stores).
    func array(_ index: Int) -> [UInt8] { request.array(index + 1) }
    /// Argument `index` as a namespace name, validated (``Command/namespace(_:)``): through the
    /// connection's memo when there is one, so that a pipeline's requests on one namespace
    /// check and decode its name once.
    func namespace(_ index: Int) throws(CommandError) -> String {
        guard let names else { return try Command.namespace(self[index]) }
        return try names.name(self[index])
    }
    /// The arguments from `index` on, each as an array of its own.
    func rest(from index: Int) -> [[UInt8]] { (index..<count).map(array) }
    /// The arguments from `index` on, each read in place (no copy: each shares the request's bytes).
    func slices(from index: Int) -> [ArraySlice<UInt8>] { (index..<count).map { self[$0] } }
}
