#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The file a namespace writes when it closes cleanly, `<namespace>/closed-cleanly`: the last
/// sequence number its files held then, all fsync'd before the file is written.
///
/// Recovery cannot tell every kind of damage at the end of the last log segment from an append a
/// crash cut short (a flipped bit in the last record's length reads as a record running past the
/// end), and a missing last segment leaves no trace in the others. After a clean close neither
/// can be a crash's doing, and this file says how far the files must reach: recovery refuses a
/// namespace whose snapshot and log end before it (``check(lastSequence:files:present:)``), changing
/// nothing, instead of cutting what looks torn.
///
/// It is never removed: every later state of a namespace holds at least what was durable when it
/// was written (sequences only grow, and what was fsync'd stays), so an old one only claims less.
/// It is not fsync'd either: lost or cut short by a power failure, it is ignored (its text must
/// be whole, newline included), and a shorter number only claims less.
enum CleanCloseMarker {
    static let fileName = "closed-cleanly"
    private static let prefix = "actorkv closed this namespace cleanly through sequence "

    /// Where the namespace's marker is.
    static func path(in files: NamespaceFiles) -> String { files.directory + "/" + fileName }

    /// The marker's text for `sequence`.
    static func text(through sequence: UInt64) -> String { NumberLine.text(prefix, sequence) }

    /// The sequence a marker's bytes name, or nil unless they are exactly a marker's text.
    static func sequence(in bytes: [UInt8]) -> UInt64? { NumberLine.number(in: bytes, prefix: prefix) }

    /// Where the marker is written before it is renamed into place.
    static func temporaryPath(in files: NamespaceFiles) -> String { path(in: files) + ".tmp" }

    /// Writes the marker (replacing an older one through a temporary file and a rename). Call it
    /// only once everything through `sequence` is fsync'd. If that fails (a full disk), the
    /// temporary file is removed (or, if that fails too, at the namespace's next opening).
    static func write(through sequence: UInt64, files: NamespaceFiles) throws(Errno) {
        let temporary = temporaryPath(in: files)
        do throws(Errno) {
            let fd = try files.system.open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            defer { SystemCalls.close(fd) }
            let failed = Array(text(through: sequence).utf8).withUnsafeBytes { (raw) -> Errno? in
                do throws(Errno) { try files.system.pwriteAll(fd, raw, at: 0, path: temporary) } catch { return error }
                return nil
            }
            if let failed { throw failed }
            try files.system.rename(temporary, path(in: files))
        } catch {
            try? files.system.unlink(temporary)
            throw error
        }
    }

    /// The sequence the namespace's marker names, nil if it has none (`present`: its directory
    /// listing shows one) or one cut short.
    static func read(files: NamespaceFiles, present: Bool) throws(StoreError) -> UInt64? {
        guard present else { return nil }
        let window = try FileWindow(path: path(in: files), capacity: 128, system: files.system)
        return sequence(in: Array(window.bytes))
    }

    /// The bytes of the namespace's marker when one is there but is not a marker's text (garbage,
    /// or cut short by a power failure), which ``read(files:present:)`` ignores; nil when there
    /// is none or it reads. Asked only once a namespace opened without a sequence from its marker.
    static func unreadableText(files: NamespaceFiles) -> String? {
        let path = path(in: files)
        guard case .some(.some) = try? SystemCalls.status(path),
              let window = try? FileWindow(path: path, capacity: 128, system: files.system) else { return nil }
        let bytes = Array(window.bytes)
        return sequence(in: bytes) == nil ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// Throws `corrupt` if the namespace closed cleanly through a later sequence than its files
    /// now reach (`lastSequence`, from its snapshot and log as read, before anything is cut);
    /// otherwise returns the sequence the marker names (nil: none).
    static func check(lastSequence: UInt64, files: NamespaceFiles, present: Bool) throws(StoreError) -> UInt64? {
        guard let closed = try read(files: files, present: present) else { return nil }
        guard closed > lastSequence else { return closed }
        let path = path(in: files)
        throw StoreError(.corrupt, "\(files.directory): the namespace was closed cleanly through sequence \(closed) (\(path)), but its snapshot and log segments end at sequence \(lastSequence): the end of the last segment, or a whole segment, is damaged or missing; the files were left untouched (to accept the loss, as after restoring older files, remove \(path))")
    }
}
