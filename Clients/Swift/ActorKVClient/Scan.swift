/// One key and its value, as returned by a scan.
public struct ScanEntry: Sendable, Equatable, Hashable {
    /// The key bytes.
    public var key: [UInt8]
    /// The value bytes.
    public var value: [UInt8]

    /// An entry with the given bytes.
    public init(key: [UInt8], value: [UInt8]) {
        self.key = key
        self.value = value
    }

    /// The key decoded as UTF-8 (invalid sequences become U+FFFD).
    public var keyString: String { String(decoding: key, as: UTF8.self) }
    /// The value decoded as UTF-8 (invalid sequences become U+FFFD).
    public var valueString: String { String(decoding: value, as: UTF8.self) }
}

/// One page of a scan, as returned by ``ActorKVClient/scanPage(_:cursor:prefix:count:)``.
public struct ScanPage: Sendable, Equatable {
    /// The cursor that starts a scan, and that a last page returns: `"0"`.
    public static let start: [UInt8] = [UInt8(ascii: "0")]

    /// The entries of this page, in key order.
    public var entries: [ScanEntry]
    /// The cursor to pass for the next page; ``start`` when this was the last page.
    public var nextCursor: [UInt8]

    /// A page with the given entries and next cursor.
    public init(entries: [ScanEntry], nextCursor: [UInt8]) {
        self.entries = entries
        self.nextCursor = nextCursor
    }

    /// True when there are no more pages.
    public var isLast: Bool { nextCursor == Self.start }
}

/// The entries of a namespace in key order, fetched page by page as the loop advances.
/// Made by ``ActorKVClient/scan(_:prefix:pageSize:)-([UInt8])``; each iteration starts a new scan.
public struct ScanSequence: AsyncSequence, Sendable {
    /// A key and its value.
    public typealias Element = ScanEntry
    /// The error a page request can fail with.
    public typealias Failure = ActorKVError

    let client: ActorKVClient
    let namespace: String
    let prefix: [UInt8]
    let pageSize: Int

    /// An iterator that starts at the first key.
    public func makeAsyncIterator() -> Iterator {
        Iterator(sequence: self)
    }

    /// Walks the pages of one scan; a page is requested when the previous one is used up.
    public struct Iterator: AsyncIteratorProtocol, Sendable {
        /// A key and its value.
        public typealias Element = ScanEntry
        /// The error a page request can fail with.
        public typealias Failure = ActorKVError

        private let sequence: ScanSequence
        private var cursor: [UInt8]? = ScanPage.start  // nil once the last page has been fetched
        private var page: [ScanEntry] = []
        private var index = 0

        init(sequence: ScanSequence) {
            self.sequence = sequence
        }

        /// The next entry, or nil after the last one.
        public mutating func next() async throws(ActorKVError) -> ScanEntry? {
            while index == page.count {
                guard let current = cursor else { return nil }
                let fetched = try await sequence.client.scanPage(sequence.namespace, cursor: current,
                                                                 prefix: sequence.prefix, count: sequence.pageSize)
                page = fetched.entries
                index = 0
                cursor = fetched.isLast ? nil : fetched.nextCursor
            }
            defer { index += 1 }
            return page[index]
        }

        /// The next entry, or nil after the last one.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ActorKVError) -> ScanEntry? {
            try await next()
        }
    }
}
