import Testing

/// A test, or the setup of one, failed: the message says what happened and, where it helps, what
/// to do about it.
public struct TestFailure: Error, CustomStringConvertible, Sendable {
    /// What went wrong.
    public let description: String

    /// A failure described by `description`.
    public init(_ description: String) { self.description = description }
}

/// Awaits `body` and returns the error of type `E` it throws; records an issue (at the caller's
/// `sourceLocation`) and returns nil if it throws nothing, or an error of another type.
public func expectError<E: Error>(_ type: E.Type, _ body: () async throws -> Void,
                                  sourceLocation: SourceLocation = #_sourceLocation) async -> E? {
    do {
        try await body()
        return expected(E.self, from: nil, sourceLocation: sourceLocation)
    } catch {
        return expected(E.self, from: error, sourceLocation: sourceLocation)
    }
}

/// ``expectError(_:_:sourceLocation:)`` for a synchronous `body`.
public func expectErrorSync<E: Error>(_ type: E.Type, _ body: () throws -> Void,
                                      sourceLocation: SourceLocation = #_sourceLocation) -> E? {
    do {
        try body()
        return expected(E.self, from: nil, sourceLocation: sourceLocation)
    } catch {
        return expected(E.self, from: error, sourceLocation: sourceLocation)
    }
}

/// `thrown` as an `E`, or nil after recording why it is not one.
private func expected<E: Error>(_ type: E.Type, from thrown: (any Error)?, sourceLocation: SourceLocation) -> E? {
    guard let thrown else {
        Issue.record("expected \(article(E.self)), but the call succeeded", sourceLocation: sourceLocation)
        return nil
    }
    guard let error = thrown as? E else {
        Issue.record("expected \(article(E.self)), got \(thrown)", sourceLocation: sourceLocation)
        return nil
    }
    return error
}

/// "a StoreError", "an ActorKVError".
private func article<E>(_ type: E.Type) -> String {
    let name = String(describing: type)
    return ("AEIOU".contains(name.first ?? "x") ? "an " : "a ") + name
}
