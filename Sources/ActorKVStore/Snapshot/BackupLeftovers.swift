#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// The hidden directories backups are written in (`.NAME.partial-PID-XXXXXXXX`, beside the
/// target NAME; see ``BackupWriter``), and the removal of those that a process killed while
/// writing left behind.
///
/// A hidden directory is a leftover when the process its name gives no longer exists, or when
/// it is this process and no backup of this process is writing it (the server restarted with
/// the same process id, as in a container where it is always the first process). One whose
/// process exists is left alone: it may be another server's backup in progress. So is a name
/// this does not parse (written by an older version, which did not give its process id), and
/// one that is not a directory of this process's user (see ``isOwnDirectory(_:)``).
enum BackupLeftovers {
    /// The hidden directories this process's backups are writing now.
    private static let claimed = Mutex<Set<String>>([])

    /// A new hidden directory's name for a backup to NAME: this process's id and a random tag.
    static func hiddenName(of name: String) -> String {
        ".\(name).partial-\(getpid())-" + String(UInt32.random(in: .min ... .max), radix: 16)
    }

    /// The process id in `entry` if it is the name of a hidden directory of a backup to any
    /// name (``hiddenName(of:)``: `.NAME.partial-PID-XXXXXXXX`); nil otherwise. Pure.
    static func owner(of entry: String) -> Int32? {
        let marker = Array(".partial-".utf8), bytes = Array(entry.utf8)
        // The last marker, after a dot and a name of at least one byte.
        guard bytes.first == UInt8(ascii: "."), bytes.count > marker.count + 1,
              let at = stride(from: bytes.count - marker.count, through: 2, by: -1).first(where: { bytes[$0..<$0 + marker.count].elementsEqual(marker) })
        else { return nil }
        let rest = String(decoding: bytes[(at + marker.count)...], as: UTF8.self).split(separator: "-", omittingEmptySubsequences: false)
        guard rest.count == 2, let pid = Int32(rest[0]), pid > 0, !rest[1].isEmpty,
              rest[1].allSatisfy(\.isHexDigit) else { return nil }
        return pid
    }

    /// Notes that this process writes `partial`: a search for leftovers passes it by.
    static func claim(_ partial: String) { _ = claimed.withLock { $0.insert(partial) } }

    /// Notes that `partial` was renamed or removed.
    static func release(_ partial: String) { _ = claimed.withLock { $0.remove(partial) } }

    /// Removes the leftovers of backups to any name in directory `parent` (a backup cut short
    /// by its server's stop or death, to this path or to another: a nightly backup to a new
    /// dated name each time would otherwise leave each one there for good), as
    /// ``BackupWriter/discard(_:names:system:)`` removes a failed one's (what it does not know
    /// stays, and so does the directory holding it); returns the paths it removed. Never fails:
    /// a leftover it cannot read or remove stays.
    static func removeStale(in parent: String, system: SystemCalls) -> [String] {
        guard let entries = try? system.listDirectory(parent) else { return [] }
        var removed: [String] = []
        let me = getpid()
        for entry in entries.sorted() {
            guard let pid = owner(of: entry) else { continue }
            let path = parent + (parent == "/" ? "" : "/") + entry
            let stale = pid == me ? !claimed.withLock { $0.contains(path) } : !SystemCalls.processExists(pid)
            guard stale, isOwnDirectory(path) else { continue }
            let names = ((try? system.listDirectory(path)) ?? []).filter { isOwnDirectory(path + "/" + $0) }
            BackupWriter.discard(path, names: names, system: system)
            if isGone(path) { removed.append(path) }
        }
        return removed
    }

    /// Whether `path` is a directory (not a symbolic link to one) of this process's user, as
    /// the hidden directories it writes are (mode 0700): a directory another user made under
    /// that name, perhaps holding links to elsewhere, is not touched.
    private static func isOwnDirectory(_ path: String) -> Bool {
        guard let status = try? SystemCalls.linkStatus(path) else { return false }
        return status.st_mode & S_IFMT == S_IFDIR && status.st_uid == geteuid()
    }

    /// Whether nothing is at `path` (false if that cannot be read).
    private static func isGone(_ path: String) -> Bool {
        do { return try SystemCalls.linkStatus(path) == nil } catch { return false }
    }
}
