import ActorKVStore
import CActorKVLongDouble

/// HINCRBYFLOAT's arithmetic (``HashCommands``): Redis's, in C's long double (the
/// `CActorKVLongDouble` shim), so that a sum's digits are the ones Redis gives on the same
/// machine: `0.1` added three times is `0.3`, and a sum is written without an exponent.
enum FloatIncrement {
    /// Refuses an increment Redis refuses: not a number read whole (leading space, trailing
    /// bytes, empty), NaN, an overflow; or infinite.
    static func check(_ increment: [UInt8]) throws(CommandError) {
        let verdict = increment.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { actorkv_long_double_check_increment($0.baseAddress, $0.count) }
        }
        switch verdict {
        case 0: return
        case Int32(ACTORKV_LONG_DOUBLE_INFINITE_INCREMENT): throw CommandError(.syntax, "value is NaN or Infinity")
        default: throw CommandError(.syntax, "value is not a valid float")
        }
    }

    /// The update that adds `increment` (``check(_:)`` passed) to a key's value (absent: 0),
    /// keeping the key's deadline and owner as HINCRBY does; a value that is not a number, or a
    /// sum that is NaN or infinite, is refused with Redis's error and nothing is written.
    static func update(adding increment: [UInt8]) -> Update {
        Update(keepsLifetime: true) { current in
            var sum = [UInt8](repeating: 0, count: Int(ACTORKV_LONG_DOUBLE_CHARS))
            let length = sum.withUnsafeMutableBufferPointer { out in
                out.withMemoryRebound(to: CChar.self) { out in
                    increment.withUnsafeBufferPointer { delta in
                        delta.withMemoryRebound(to: CChar.self) { delta in
                            add(current, delta, into: out.baseAddress!)
                        }
                    }
                }
            }
            switch length {
            case 1...: return .set(Array(sum[0..<Int(length)]))
            case Int32(ACTORKV_LONG_DOUBLE_BAD_VALUE): return .refuse(StoreError(.invalidArgument, "hash value is not a float"))
            default: return .refuse(StoreError(.invalidArgument, "increment would produce NaN or Infinity"))
            }
        }
    }

    /// `current` (nil: absent) plus `delta` into `out`, as the shim returns it.
    private static func add(_ current: [UInt8]?, _ delta: UnsafeBufferPointer<CChar>, into out: UnsafeMutablePointer<CChar>) -> Int32 {
        guard let current else { return actorkv_long_double_add(nil, 0, delta.baseAddress, delta.count, out) }
        return current.withUnsafeBufferPointer { value in
            value.withMemoryRebound(to: CChar.self) { actorkv_long_double_add($0.baseAddress, $0.count, delta.baseAddress, delta.count, out) }
        }
    }
}
