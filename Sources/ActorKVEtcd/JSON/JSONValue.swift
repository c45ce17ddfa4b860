/// A JSON value, as ``JSONValue/parse(_:)`` reads it: what the agent needs of etcd's answers,
/// without Foundation's `JSONDecoder` (whose generic decoding cost a GET through the agent
/// about 14 µs of CPU, more than everything else it does with the answer).
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number, as its text (etcd sends 64-bit integers as strings; the numbers it does send
    /// are small, and each reader converts the text to the type it wants).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// An object's members in the order sent (etcd's objects are small: a linear search beats hashing).
    case object([Member])

    /// One member of an object.
    struct Member: Sendable, Equatable {
        var name: String
        var value: JSONValue
    }

    /// An answer that is not the JSON expected.
    struct Mismatch: Error, Equatable, CustomStringConvertible {
        /// What was wrong.
        let description: String
    }

    /// Parses `bytes`, which must hold exactly one JSON value (white space around it allowed).
    static func parse(_ bytes: [UInt8]) throws(Mismatch) -> JSONValue {
        let result: Result<JSONValue, Mismatch> = bytes.withUnsafeBytes { buffer in
            var reader = JSONReader(buffer)
            return Result { () throws(Mismatch) in try reader.document() }
        }
        return try result.get()
    }

    /// The object's fields; throws if this is not an object (`what` names it in the error).
    func fields(_ what: String) throws(Mismatch) -> JSONFields {
        guard case .object(let members) = self else { throw Mismatch(description: "\(what) is not a JSON object") }
        return JSONFields(members: members, what: what)
    }

    /// The text of a string.
    func string(_ what: String) throws(Mismatch) -> String {
        guard case .string(let text) = self else { throw Mismatch(description: "\(what) is not a JSON string") }
        return text
    }
}

/// A type read from a JSON value (the etcd answers the agent reads).
protocol JSONReadable: Sendable {
    /// Reads it from `json`, or throws if the value does not have its shape.
    init(json: JSONValue) throws(JSONValue.Mismatch)
}

/// An object's members, read by name. An absent member and `null` both read as nil; a member
/// of another type than asked is an error.
struct JSONFields {
    let members: [JSONValue.Member]
    /// What the object is, for errors.
    let what: String

    /// The member named `name`, nil if absent or null.
    subscript(name: String) -> JSONValue? {
        for member in members where member.name == name {
            if case .null = member.value { return nil }
            return member.value
        }
        return nil
    }

    /// A string member.
    func string(_ name: String) throws(JSONValue.Mismatch) -> String? {
        try self[name].map { value throws(JSONValue.Mismatch) in try value.string("\(what).\(name)") }
    }

    /// A boolean member.
    func bool(_ name: String) throws(JSONValue.Mismatch) -> Bool? {
        guard let value = self[name] else { return nil }
        guard case .bool(let flag) = value else { throw JSONValue.Mismatch(description: "\(what).\(name) is not a JSON boolean") }
        return flag
    }

    /// An integer member: a number without fraction or exponent that fits an `Int`.
    func int(_ name: String) throws(JSONValue.Mismatch) -> Int? {
        guard let value = self[name] else { return nil }
        guard case .number(let text) = value, let number = Int(text) else {
            throw JSONValue.Mismatch(description: "\(what).\(name) is not an integer")
        }
        return number
    }

    /// A member read as `T`.
    func read<T: JSONReadable>(_ name: String, as type: T.Type = T.self) throws(JSONValue.Mismatch) -> T? {
        try self[name].map { value throws(JSONValue.Mismatch) in try T(json: value) }
    }

    /// An array member, each element read as `T`.
    func array<T: JSONReadable>(_ name: String, of type: T.Type = T.self) throws(JSONValue.Mismatch) -> [T]? {
        guard let value = self[name] else { return nil }
        guard case .array(let elements) = value else { throw JSONValue.Mismatch(description: "\(what).\(name) is not a JSON array") }
        var result: [T] = []
        result.reserveCapacity(elements.count)
        for element in elements { result.append(try T(json: element)) }
        return result
    }

    /// An array of strings.
    func strings(_ name: String) throws(JSONValue.Mismatch) -> [String]? {
        guard let value = self[name] else { return nil }
        guard case .array(let elements) = value else { throw JSONValue.Mismatch(description: "\(what).\(name) is not a JSON array") }
        var result: [String] = []
        for element in elements { result.append(try element.string("\(what).\(name)[]")) }
        return result
    }
}
