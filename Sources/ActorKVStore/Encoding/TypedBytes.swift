extension Array where Element == UInt8 {
    /// `withUnsafeBytes` that keeps the body's typed error.
    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeBytes { raw in Result { () throws(E) in try body(raw) } }
        return try result.get()
    }

    /// `withUnsafeMutableBytes` that keeps the body's typed error.
    mutating func withMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        let result: Result<R, E> = withUnsafeMutableBytes { raw in Result { () throws(E) in try body(raw) } }
        return try result.get()
    }
}
