/// The random numbers of draws (Redis's HRANDFIELD, ``RandomDraw``): xoshiro256**, seeded once
/// from the system's generator. Not for secrets: it is fast, where the system's generator makes
/// a `getrandom` system call for every 64 bits, and a draw of one key from a large namespace
/// takes a dozen numbers or more.
public struct DrawGenerator: RandomNumberGenerator, Sendable {
    private var state: (UInt64, UInt64, UInt64, UInt64)

    /// A generator seeded from the system's generator.
    public init() {
        var system = SystemRandomNumberGenerator()
        self.init(seed: (system.next(), system.next(), system.next(), system.next()))
    }

    /// A generator whose sequence `seed` determines (not all four zero: then a fixed non-zero
    /// state is taken instead, as xoshiro's state must not be all zero).
    public init(seed: (UInt64, UInt64, UInt64, UInt64)) {
        state = seed == (0, 0, 0, 0) ? (1, 2, 3, 4) : seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        let result = rotated(state.1 &* 5, by: 7) &* 9
        let shifted = state.1 << 17
        state.2 ^= state.0
        state.3 ^= state.1
        state.1 ^= state.2
        state.0 ^= state.3
        state.2 ^= shifted
        state.3 = rotated(state.3, by: 45)
        return result
    }

    private func rotated(_ x: UInt64, by k: UInt64) -> UInt64 {
        (x << k) | (x >> (64 - k))
    }
}
