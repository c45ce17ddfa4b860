/// Rules for namespace names, which become directory names inside the data directory.
///
/// A name is 1 to 64 characters from `A–Z a–z 0–9 . _ - :` and does not start with a dot, so no
/// name can be `.` or `..`, hold a slash, or reach outside the data directory. (`:` is there for
/// Redis's naming of keys, `user:1000`, which Redis clients give as the names of hashes.)
public enum NamespaceName {
    /// The longest name accepted.
    public static let maxLength = 64

    /// Returns nil when `name` is acceptable, else a sentence saying why not.
    public static func problem(with name: [UInt8]) -> String? {
        problem(with: name[...])
    }

    /// Returns nil when `name` is acceptable, else a sentence saying why not.
    public static func problem(with name: ArraySlice<UInt8>) -> String? {
        if name.isEmpty { return "namespace name is empty" }
        if name.count > maxLength { return "namespace name is longer than \(maxLength) characters" }
        if name.first == UInt8(ascii: ".") { return "namespace name must not start with '.'" }
        for byte in name where !isAllowed(byte) {
            return "namespace name may contain only A-Z a-z 0-9 . _ - : (found byte 0x\(String(byte, radix: 16)))"
        }
        return nil
    }

    /// Validates `name` and returns it as a String.
    public static func validate(_ name: [UInt8]) throws(StoreError) -> String {
        try validate(name[...])
    }

    /// Validates `name` (a slice of a request, not copied) and returns it as a String.
    public static func validate(_ name: ArraySlice<UInt8>) throws(StoreError) -> String {
        if let problem = problem(with: name) { throw StoreError(.invalidNamespace, problem) }
        return String(decoding: name, as: UTF8.self)
    }

    /// Validates `name`.
    public static func validate(_ name: String) throws(StoreError) -> String {
        try validate(Array(name.utf8))
    }

    private static func isAllowed(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: ":"):
            return true
        default:
            return false
        }
    }
}
