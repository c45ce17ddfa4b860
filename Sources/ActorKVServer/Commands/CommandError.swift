import ActorKVProtocol
import ActorKVStore

/// Why a request was refused before it ran. The connection stays usable.
public struct CommandError: Error, Sendable, Equatable {
    /// The kinds of refusal.
    public enum Kind: Sendable, Equatable {
        /// No such command.
        case unknownCommand
        /// Too few or too many arguments.
        case arity
        /// An argument has the wrong form (a bad COUNT, an unknown BATCH op, …).
        case syntax
        /// An engine-level refusal found while parsing (bad namespace name, bad cursor).
        case store(StoreError.Code)
        /// A refusal with a code of its own (NOPROTO).
        case wire(WireErrorCode)
    }

    /// The kind.
    public let kind: Kind
    /// The message after the code.
    public let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    init(store error: StoreError) {
        self.init(.store(error.code), error.message)
    }
}
