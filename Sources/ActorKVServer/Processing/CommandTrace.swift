import ActorKVProtocol

/// Which command a connection sent last, as `CLIENT LIST` shows it in `cmd=`: the command's
/// name in lower case, and for a command with subcommands (CLIENT, CONFIG, ACL, COMMAND) the
/// subcommand after a `|` (`client|list`), as Redis names them.
///
/// One word, so that noting it costs each request a store and a connection's session can hold
/// it in an atomic: the spec's address (specs live as long as the process) and, in the top 16
/// bits, the subcommand's position in its ``CommandSpec/subcommands`` plus one. Zero is "none":
/// nothing sent yet, or a command (or subcommand) that does not exist, which Redis shows as
/// `NULL` too.
struct CommandTrace: Equatable, Sendable {
    /// The packed word (see the type's summary).
    let bits: UInt

    private static let subcommandShift: UInt = 48
    private static let addressMask: UInt = (1 << subcommandShift) - 1

    /// No command: `cmd=NULL`.
    static let none = CommandTrace(packed: 0)

    /// The word as an atomic held it.
    init(packed bits: UInt) { self.bits = bits }

    /// The request `request` of `spec`: with its subcommand if the spec has any (none if that
    /// word names none of them, or, as a bare container, the spec alone).
    @inline(__always)
    init(_ spec: CommandSpec, _ request: Request) {
        let address = UInt(bitPattern: Unmanaged.passUnretained(spec).toOpaque())
        // Never taken on Linux's 47- and 48-bit user address spaces; kept so that a larger one
        // shows `NULL` rather than another spec's name.
        guard address & ~Self.addressMask == 0 else {
            self.init(packed: 0)
            return
        }
        guard spec.hasSubcommands, request.count > 1 else {
            self.init(packed: address)
            return
        }
        self.init(container: spec, address: address, request[1])
    }

    /// A container command's trace: with the subcommand `word` names, or none.
    private init(container spec: CommandSpec, address: UInt, _ word: ArraySlice<UInt8>) {
        guard let position = spec.subcommands.firstIndex(where: { CommandTable.matches(word, $0) }) else {
            self.init(packed: 0)
            return
        }
        self.init(packed: address | UInt(position + 1) << Self.subcommandShift)
    }

    /// The name `CLIENT LIST` shows: lower case, `container|subcommand`; nil for ``none``.
    var name: String? {
        guard bits != 0, let pointer = UnsafeRawPointer(bitPattern: bits & Self.addressMask) else { return nil }
        let spec = Unmanaged<CommandSpec>.fromOpaque(pointer).takeUnretainedValue()
        let position = Int(bits >> Self.subcommandShift)
        let base = spec.name.lowercased()
        guard position > 0, position <= spec.subcommands.count else { return base }
        return base + "|" + String(decoding: spec.subcommands[position - 1], as: UTF8.self).lowercased()
    }
}
