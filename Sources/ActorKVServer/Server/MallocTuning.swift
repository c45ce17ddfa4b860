#if canImport(Glibc)
import Glibc
#endif

/// glibc's per-thread cache of freed blocks (tcache) holds 7 blocks per size by default. The
/// event loop decodes, runs and answers a whole turn of requests at a time — hundreds of keys
/// and values of the same few sizes allocated, then freed together — so after the 7th every
/// allocation went through glibc's slower bins (a quarter of the CPU of a pipelined `PUT` in
/// profiles). A larger cache keeps that churn on the fast path; see `Benchmarks/HOTPATHS.md`.
///
/// The cache size can only be set by the `GLIBC_TUNABLES` environment variable, read when the
/// process starts, so `actorkvd` re-executes itself once with it added. An operator's own
/// `glibc.malloc.tcache_count`, or `ACTORKV_MALLOC_TUNING=off`, is left alone.
public enum MallocTuning {
    /// The tcache blocks kept per size and thread (glibc's default is 7). At most about 17 MB per
    /// thread if every size class filled up; in practice the few sizes a workload churns.
    public static let tcacheCount = 512

    /// The `GLIBC_TUNABLES` value to run with, given the current one and `ACTORKV_MALLOC_TUNING`;
    /// nil when nothing should change (already set, or turned off).
    public static func tunables(current: String?, setting: String?) -> String? {
        if setting == "off" { return nil }
        let ours = "glibc.malloc.tcache_count=\(tcacheCount)"
        guard let current, !current.isEmpty else { return ours }
        if current.split(separator: ":").contains(where: { $0.hasPrefix("glibc.malloc.tcache_count=") }) { return nil }
        return current + ":" + ours
    }

    /// Re-executes this program (same binary, same arguments) with the tuned environment,
    /// unless ``tunables(current:setting:)`` says nothing should change. Call in `main` before
    /// anything is started (`actorkvd` calls it once its command line has parsed, so `--help`
    /// and usage errors never re-execute). Returns only if no re-execution was needed or `execv`
    /// failed (then the process simply runs with glibc's defaults).
    public static func reexecIfNeeded(arguments: [String]) {
        let current = getenv("GLIBC_TUNABLES").map { String(cString: $0) }
        let setting = getenv("ACTORKV_MALLOC_TUNING").map { String(cString: $0) }
        guard let tuned = tunables(current: current, setting: setting) else { return }
        setenv("GLIBC_TUNABLES", tuned, 1)
        let argv = arguments.map { strdup($0) } + [nil]
        execv(executablePath(), argv)
        for pointer in argv { free(pointer) }  // execv returned: it failed; carry on untuned
        if let current { setenv("GLIBC_TUNABLES", current, 1) } else { unsetenv("GLIBC_TUNABLES") }
    }

    /// The path to re-execute: the binary's own path as `/proc/self/exe` resolves it, since the
    /// kernel names a process after the file it executes (`ps`, `pgrep actorkvd`, `pkill` and
    /// `top` read that name: executing `/proc/self/exe` itself would rename the server `exe`).
    /// `/proc/self/exe` when the link cannot be read or its target is gone (the binary was
    /// replaced or deleted since it started).
    static func executablePath() -> String {
        let fallback = "/proc/self/exe"
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(fallback, &buffer, buffer.count - 1)
        guard length > 0, length < buffer.count - 1 else { return fallback }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return access(path, X_OK) == 0 ? path : fallback
    }
}
