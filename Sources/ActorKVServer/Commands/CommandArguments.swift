import ActorKVProtocol

/// A command's arguments after its name, read in place from the decoded request.
struct CommandArguments {
    private let request: Request

    init(_ request: Request) { self.request = request }

    /// How many arguments follow the command name.
    var count: Int { request.count - 1 }
    /// Argument `index`, counted from 0 after the name, without copying.
    subscript(index: Int) -> ArraySlice<UInt8> { request[index + 1] }
    /// Argument `index` as an array of its own (what the engine stores).
    func array(_ index: Int) -> [UInt8] { request.array(index + 1) }
    /// The arguments from `index` on, each as an array of its own.
    func rest(from index: Int) -> [[UInt8]] { (index..<count).map(array) }
}
