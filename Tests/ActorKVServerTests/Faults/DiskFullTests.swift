import ActorKVProtocol
import ActorKVTestSupport
import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A real full disk: the data directory on a 1 MiB tmpfs (needs root and mount; skipped with a
/// note otherwise). The engine's own tests inject ENOSPC and EIO through the fault seam too.
@Suite(.serialized) struct DiskFullTests {
    @Test func aFullDiskFailsTheWriteKeepsReadsAndResumesWhenSpaceReturns() async throws {
        try await onOwnThread {
            let dir = TemporaryDirectory()
            let disk = dir.path + "/disk"
            try FileManager.default.createDirectory(atPath: disk, withIntermediateDirectories: false)
            guard shell("mount -t tmpfs -o size=1m,mode=0700 tmpfs \(disk)") == 0 else {
                print("disk-full test skipped: cannot mount a tmpfs here")
                return
            }
            defer { _ = shell("umount \(disk)") }
            let flags = ["--fsync", "always", "--snapshot-interval", "0", "--compact-min-bytes", "1000000000"]
            var acknowledged: [String] = []
            do {
                let server = try ServerProcess(directory: dir, arguments: flags + ["--data-dir", disk + "/data"])
                defer { server.stop() }
                let c = try RawConnection(path: server.socketPath)
                let value = String(repeating: "v", count: 4096)
                var failure: Reply?
                for i in 0..<1000 {
                    let reply = try c.command(["PUT", "full", "k\(i)", value])
                    if reply == .simple("OK") { acknowledged.append("k\(i)") } else { failure = reply; break }
                }
                #expect(failure?.errorCode == "IOERR", "a write on a full disk fails with IOERR, got \(String(describing: failure))")
                #expect(acknowledged.count > 50)
                let failedKey = "k\(acknowledged.count)"
                #expect(try c.command(["GET", "full", failedKey]) == .null, "the failed write was not applied")
                #expect(try c.command(["GET", "full", acknowledged[0]]) == .bulk(value), "reads keep working")
                #expect(try c.command(["COUNT", "full"]) == .integer(Int64(acknowledged.count)))
                #expect(shell("mount -o remount,size=8m \(disk)") == 0)
                #expect(try c.command(["PUT", "full", failedKey, value]) == .simple("OK"), "writes resume when space returns")
                acknowledged.append(failedKey)
                #expect(server.stop() == 0)
            }
            let again = try ServerProcess(directory: dir, arguments: flags + ["--data-dir", disk + "/data"])
            defer { again.stop() }
            let d = try RawConnection(path: again.socketPath)
            #expect(try d.command(["COUNT", "full"]) == .integer(Int64(acknowledged.count)), "every acknowledged write survived")
            print("disk full: \(acknowledged.count - 1) writes fit in 1 MiB, the next failed with IOERR, and after growing the disk writes resumed; all survived a restart")
        }
    }

    private func shell(_ command: String) -> Int32 { runShell(command + " >/dev/null 2>&1") }
}
