#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file `<data-dir>/.sequence-floor`: the highest sequence that a removed namespace reached
/// (its removal's own, the change deleting its keys). A namespace created afterwards numbers its
/// first write after it (``Store/removeNamespace(_:)``).
///
/// So a name that is removed and used again never hands out a version or a change number that
/// its earlier life did: a client's `IFVERSION` of a version read before the removal fails, and
/// a follower resuming from a change of the earlier life either continues exactly after the
/// removal's change or gets `COMPACTED`, never the new life's changes as if they followed its
/// own. One number serves every name (it only grows), so the file stays a line long however
/// many namespaces come and go.
///
/// Written before the removal it covers takes effect, through a temporary file, an fsync and a
/// rename, and the directory fsync'd: whatever a crash leaves, it is at least as high as any
/// removal that took effect. A file that is not exactly its text is reported, never ignored.
enum SequenceFloor {
    static let fileName = ".sequence-floor"
    private static let prefix = "actorkv numbers new namespaces after sequence "

    /// The file's text for `floor`.
    static func text(_ floor: UInt64) -> String { NumberLine.text(prefix, floor) }

    /// The floor the file's bytes name, or nil unless they are exactly its text.
    static func floor(in bytes: [UInt8]) -> UInt64? { NumberLine.number(in: bytes, prefix: prefix) }

    /// The floor of the data directory `directory`: 0 when no namespace was ever removed there
    /// (no file); throws `corrupt` for a file that is not the floor's text.
    static func read(directory: String, system: SystemCalls) throws(StoreError) -> UInt64 {
        let path = directory + "/" + fileName
        let present: Bool
        do { present = try SystemCalls.status(path) != nil } catch { throw StoreError.io("reading", path, error) }
        guard present else { return 0 }
        let window = try FileWindow(path: path, capacity: 128, system: system)
        guard let floor = floor(in: Array(window.bytes)) else {
            throw StoreError(.corrupt, "\(path) does not hold the sequence floor of removed namespaces (\(String(decoding: window.bytes, as: UTF8.self).debugDescription)): without it a namespace created again could reuse versions of its earlier life; restore it (its text is \(text(0).debugDescription) with the highest last sequence a removed namespace had), and restart")
        }
        return floor
    }

    /// Makes `floor` the data directory's floor, durably: a temporary file written and fsync'd,
    /// renamed over the old one, and the directory fsync'd.
    static func write(_ floor: UInt64, directory: String, system: SystemCalls) throws(StoreError) {
        let path = directory + "/" + fileName
        do { try system.replaceDurably(path, with: text(floor), directory: directory) } catch {
            throw StoreError.io("writing", path, error)
        }
    }
}
