extension Array {
    /// Empties the array for reuse, keeping its buffer unless its capacity is above `limit`
    /// (then the buffer is let go, so that one large use does not hold its memory for good).
    /// An array that is already empty is left as it is: emptying it again could allocate.
    @inlinable
    package mutating func removeAll(keepingCapacityUpTo limit: Int) {
        if capacity > limit {
            self = []
        } else if !isEmpty {
            removeAll(keepingCapacity: true)
        }
    }
}
