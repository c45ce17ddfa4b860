/// One decoded request: its arguments, the command name first, as sent.
///
/// Multibulk requests are stored flat — every argument end to end in one byte array, with where
/// each ends — so that decoding a request costs one allocation instead of one per argument
/// (allocation was a tenth of a pipelined `GET`'s server CPU in profiles; see HOTPATHS round 6).
/// An argument received in place (a big payload, see ``RequestDecoder``) or split from an inline
/// line keeps its own array instead, so that it is never copied.
public struct Request: Sendable, Equatable {
    /// Flat storage: `slots` little-endian `UInt32`s — where each argument ends — then the
    /// arguments end to end; `flatCount` of the slots are filled. One array, one allocation.
    /// (Plain stored properties rather than an enum, so that appending mutates the array in
    /// place instead of a copy taken out of an enum payload.)
    private var flat: [UInt8] = []
    private var slots = 0
    private var flatCount = 0
    /// One array per argument, when not flat.
    private var separate: [[UInt8]]?

    /// A request of these arguments (each kept as its own array).
    public init(_ arguments: [[UInt8]]) {
        separate = arguments
    }

    /// Most arguments a request is stored flat for. Its table of ends is allocated when the
    /// multibulk header arrives, before the arguments do; beyond this size, one array per
    /// argument, so that a header alone never costs more than a few hundred bytes.
    static let maximumFlatArguments = 64

    /// Bytes a request of more than ``maximumFlatArguments`` arguments costs per argument beyond
    /// the argument's own bytes: its array's header and the allocator's rounding (48 bytes) and
    /// its pointer (8). Measured: 1,000,000 one-byte arguments held 56 MB, of 24 bytes 72 MB.
    static let separateArgumentOverhead = 56

    /// What storing a request of `arguments` arguments costs beyond their bytes, counted toward
    /// ``ProtocolLimits/maxRequestBytes`` when its multibulk header arrives: nothing when it is
    /// stored flat (its table of ends is at most 256 bytes), ``separateArgumentOverhead`` per
    /// argument otherwise, so that many small arguments cannot hold several times the limit.
    static func storageOverhead(arguments: Int) -> Int {
        arguments <= maximumFlatArguments ? 0 : arguments * separateArgumentOverhead
    }

    /// An empty request for `arguments` arguments (a multibulk header announces them): flat,
    /// with room for `bytes` argument bytes, if there are at most ``maximumFlatArguments``;
    /// otherwise one array per argument, with room for up to 1024 of them.
    init(reservingArguments arguments: Int, bytes byteCount: Int) {
        guard arguments <= Self.maximumFlatArguments else {
            var separate: [[UInt8]] = []
            separate.reserveCapacity(Swift.min(arguments, 1024))
            self.separate = separate
            return
        }
        flat.reserveCapacity(4 * arguments + byteCount)
        flat.append(contentsOf: repeatElement(0, count: 4 * arguments))
        slots = arguments
    }

    /// The number of arguments, the command name included.
    public var count: Int { separate?.count ?? flatCount }

    /// Whether there are no arguments.
    public var isEmpty: Bool { count == 0 }

    /// Argument `index`, without copying.
    public subscript(index: Int) -> ArraySlice<UInt8> {
        if let separate { return separate[index][...] }
        precondition(index >= 0 && index < flatCount, "Request: argument index out of range")
        let start = index == 0 ? 4 * slots : end(of: index - 1)
        return flat[start..<end(of: index)]
    }

    private func end(of index: Int) -> Int {
        Int(flat.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 4 * index, as: UInt32.self)) })
    }

    /// Argument `index` as an array of its own: a copy for a flat request, the stored array
    /// itself otherwise (so a big payload received in place is never copied).
    public func array(_ index: Int) -> [UInt8] {
        if let separate { return separate[index] }
        return Array(self[index])
    }

    /// Every argument as an array of its own.
    public var arguments: [[UInt8]] {
        separate ?? (0..<flatCount).map(array)
    }

    /// Appends an argument, first making room for `more` bytes beyond it when it does not fit
    /// (the caller's estimate of what is still to come).
    mutating func append(_ argument: UnsafeBufferPointer<UInt8>, reservingMore more: Int = 0) {
        guard separate == nil, flatCount < slots, flat.count + argument.count <= Int(UInt32.max) else {
            return append(array: Array(argument))
        }
        if flat.count + argument.count > flat.capacity {
            flat.reserveCapacity(flat.count + argument.count + more)
        }
        flat.append(contentsOf: argument)
        let end = UInt32(truncatingIfNeeded: flat.count)
        let slot = 4 * flatCount
        flat.withUnsafeMutableBytes { $0.storeBytes(of: end.littleEndian, toByteOffset: slot, as: UInt32.self) }
        flatCount += 1
    }

    /// Appends an argument kept as its own array (a payload received in place): the request
    /// switches to one array per argument.
    mutating func append(array argument: [UInt8]) {
        if separate == nil {
            separate = arguments
            flat = []
            slots = 0
            flatCount = 0
        }
        separate!.append(argument)
    }

    /// Two requests are equal when their arguments are, however they are stored.
    public static func == (lhs: Request, rhs: Request) -> Bool {
        lhs.count == rhs.count && (0..<lhs.count).allSatisfy { lhs[$0] == rhs[$0] }
    }
}
