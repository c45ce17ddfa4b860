#if canImport(Glibc)
import Glibc
#endif

/// Whether the entries of a directory can be replaced by no one but the server's user (or root):
/// whoever may rename or remove entries in a directory can swap a file the server trusts there
/// for one of their own. The socket's directory and the `--acl` file's must pass.
enum PrivateDirectory {
    /// The directory `path` is in: what comes before its last `/` (`/` for a path at the root,
    /// `.` for a bare name).
    static func containing(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let directory = String(path[..<slash])
        return directory.isEmpty ? "/" : directory
    }

    /// Why another user could replace `thing` in `directory`, or nil if no one but this
    /// process's user or root can: the directory cannot be read, is writable by every user
    /// (or, `groupToo`, by its group) without the sticky bit, or is owned by another user.
    /// `role` names the directory in the message ("socket directory /run/x is writable by every
    /// user and not sticky: …").
    static func problem(_ directory: String, role: String, holding thing: String, groupToo: Bool = false) -> String? {
        var st = stat()
        guard fstatat(AT_FDCWD, directory, &st, 0) == 0 else {
            return "\(role) \(directory) does not exist or cannot be read"
        }
        let sticky = st.st_mode & UInt32(S_ISVTX) != 0
        if st.st_mode & 0o002 != 0 && !sticky {
            return "\(role) \(directory) is writable by every user and not sticky: another user could replace \(thing); use a private directory"
        }
        if groupToo && st.st_mode & 0o020 != 0 && !sticky {
            return "\(role) \(directory) is writable by its group (gid \(st.st_gid)) and not sticky: a member of the group could replace \(thing); run chmod g-w on it"
        }
        if st.st_uid != geteuid() && st.st_uid != 0 {
            return "\(role) \(directory) is owned by uid \(st.st_uid): its owner could replace \(thing); use a directory owned by this user (uid \(geteuid())) or by root"
        }
        return nil
    }
}
