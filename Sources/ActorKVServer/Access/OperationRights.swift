import ActorKVStore

extension Operation {
    /// The rights running this operation needs on its namespace: `write` for a write, `read`
    /// for a read, and both for a write that replies the values it finds (HGETDEL's reads, an
    /// HGETEX that changes deadlines). What EXEC judges its queue by again; for the sample of
    /// each data command it equals the right the command's spec declares (a test checks).
    var neededRight: AccessRights {
        guard isWrite else { return .read }
        return repliesValues ? [.write, .read] : .write
    }

    /// Whether this write's outcome holds stored values.
    private var repliesValues: Bool {
        switch self {
        case .expire(let expiry): return expiry.yields == .values
        case .batch(let steps):
            return steps.contains { step in
                switch step {
                case .read: return true
                case .update(_, let update): return !update.mayStore
                default: return false
                }
            }
        default: return false
        }
    }
}
