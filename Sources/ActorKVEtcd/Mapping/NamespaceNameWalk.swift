/// The names of the namespaces under an etcd key prefix, gathered from pages of a keys-only
/// range (pure: no I/O; ``EtcdStore/namespaceNames()`` reads the pages).
///
/// A namespace is there while it holds a key, `<prefix>ns/<key>`; its marker `<prefix>ns0`
/// (``EtcdStore/marker(of:)``) comes right after its keys and names no namespace. Each page is
/// read from ``start`` with at most ``limit`` keys. A page's namespaces are taken in the order
/// of their keys; the next page starts past the last one's keys and its marker, so a namespace
/// of many keys costs one page, and namespaces of a few keys each come many to a page. The
/// limit adapts: it doubles (up to ``maximumLimit``) while pages reach two namespaces or
/// markers or more, and halves (down to 1) when a page holds one namespace's keys alone, so
/// that the pages that land inside large namespaces shrink to one key.
struct NamespaceNameWalk {
    /// The most keys a page asks for.
    static let maximumLimit = 512

    /// The key prefix the namespaces are under.
    let prefix: [UInt8]
    /// The names found so far, in the order of their keys (`ns-b` before `ns`: `-` sorts
    /// before `/`).
    private(set) var names: [String] = []
    /// Where the next page starts; nil once the walk is over.
    private(set) var start: [UInt8]?
    /// How many keys the next page asks for.
    private(set) var limit: Int

    /// A walk of the namespaces under `prefix`, its first page asking for `firstLimit` keys.
    init(prefix: [UInt8], firstLimit: Int = 16) {
        self.prefix = prefix
        start = prefix
        limit = max(1, min(firstLimit, Self.maximumLimit))
    }

    /// Takes the keys of the page read from ``start`` (in key order), `more` saying whether the
    /// range held keys past them.
    mutating func take(_ keys: [[UInt8]], more: Bool) {
        var groups = 0  // namespaces and markers the page reached
        var resume: [UInt8]?
        var previous: [UInt8] = []
        for key in keys {
            guard key.count > prefix.count, let slash = key[prefix.count...].firstIndex(of: UInt8(ascii: "/")),
                  slash > prefix.count else {
                resume = EtcdKeys.after(key)  // a marker (or a key of no namespace)
                groups += 1
                continue
            }
            let namespaceKey = Array(key[...slash])  // `<prefix>ns/`
            // Past the namespace's keys and its marker: no other namespace's key lies in
            // between (a name that continues this one sorts its next byte before `/` or after
            // the marker's last).
            resume = EtcdKeys.after(EtcdKeys.rangeEnd(ofPrefix: namespaceKey))
            if namespaceKey != previous {
                names.append(String(decoding: key[prefix.count..<slash], as: UTF8.self))
                previous = namespaceKey
                groups += 1
            }
        }
        guard more, let resume else {
            start = nil
            return
        }
        start = resume
        limit = groups >= 2 ? min(limit * 2, Self.maximumLimit) : max(limit / 2, 1)
    }
}
