#if canImport(Glibc)
import Glibc
#endif

/// Looks up account names: user and group names to ids for the `user:NAME` and `group:NAME`
/// subjects of the ACL file (``AccessRules``), and a uid to its user name for messages.
/// Injectable, so that tests need no real accounts.
struct AccountNames: Sendable {
    /// The uid of the user of this name; nil if there is none.
    var uidForUser: @Sendable (String) -> UInt32?
    /// The gid of the group of this name; nil if there is none.
    var gidForGroup: @Sendable (String) -> UInt32?
    /// The name of the user of this uid; nil if there is none.
    var userForUID: @Sendable (UInt32) -> String?

    /// The system's account databases (`/etc/passwd`, `/etc/group`, or what NSS is set up to
    /// ask), through the reentrant `getpwnam_r`, `getgrnam_r` and `getpwuid_r`. A lookup that
    /// fails for any reason other than a short buffer answers nil.
    static let system = system(initialBufferSize: 1024)

    /// ``system`` with lookups that start from a buffer of this many bytes and double it while
    /// the C function answers ERANGE (tests start from 1 to see the buffer grow).
    static func system(initialBufferSize: Int) -> AccountNames {
        AccountNames(
            uidForUser: { name in
                guard !name.utf8.contains(0) else { return nil }
                return lookUp(passwd(), initialBufferSize, { getpwnam_r(name, $0, $1, $2, $3) }, { $0.pw_uid })
            },
            gidForGroup: { name in
                guard !name.utf8.contains(0) else { return nil }
                return lookUp(group(), initialBufferSize, { getgrnam_r(name, $0, $1, $2, $3) }, { $0.gr_gid })
            },
            userForUID: { uid in
                lookUp(passwd(), initialBufferSize, { getpwuid_r(uid, $0, $1, $2, $3) }, { $0.pw_name.map { String(cString: $0) } }) ?? nil
            })
    }

    /// The largest buffer a lookup grows to on ERANGE before giving up.
    private static let maxBuffer = 1 << 20

    /// Calls a `get*_r` function with a buffer that doubles while it answers ERANGE (and again on
    /// EINTR), and reads `value` from the entry found while the buffer it points into is alive.
    private static func lookUp<Entry, Value>(
        _ empty: Entry,
        _ initialBufferSize: Int,
        _ call: (UnsafeMutablePointer<Entry>, UnsafeMutablePointer<CChar>, Int, UnsafeMutablePointer<UnsafeMutablePointer<Entry>?>) -> Int32,
        _ value: (Entry) -> Value
    ) -> Value? {
        var capacity = max(1, initialBufferSize)
        while capacity <= maxBuffer {
            var buffer = [CChar](repeating: 0, count: capacity)
            let (code, found): (Int32, Value?) = buffer.withUnsafeMutableBufferPointer { bytes in
                var entry = empty
                var result: UnsafeMutablePointer<Entry>?
                let code = call(&entry, bytes.baseAddress!, bytes.count, &result)
                return (code, code == 0 ? result.map { value($0.pointee) } : nil)
            }
            switch code {
            case ERANGE: capacity *= 2
            case EINTR: continue
            default: return found
            }
        }
        return nil
    }
}
