import ActorKVStore
import ActorKVTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Fault injection belongs to one store: what a test arms on its store's ``FaultInjector`` fires
/// for that store only, never for another store open at the same time in the same process (the
/// other suites of this test process, running in parallel, are such stores).
@Suite("Fault injection is per store")
struct FaultIsolationTests {
    @Test("a failpoint and syscall faults armed on one store's injector never fire in another store")
    func faultsStayWithTheirStore() async throws {
        let dirA = TemporaryDirectory("faults-a"), dirB = TemporaryDirectory("faults-b"), dirC = TemporaryDirectory("faults-c")
        defer {
            dirA.remove()
            dirB.remove()
            dirC.remove()
        }
        let faultsA = FaultInjector(), faultsB = FaultInjector()
        try await withStore(dirA.data, testOptions(faults: faultsA)) { storeA in
            try await withStore(dirB.data, testOptions(faults: faultsB)) { storeB in
                // And a store with no injector at all.
                try await withStore(dirC.data) { storeC in
                    let a = try await storeA.namespace("n")
                    let others = [try await storeB.namespace("n"), try await storeC.namespace("n")]
                    try await a.put(b("k"), b("a0"))
                    for ns in others { try await ns.put(b("k"), b("0")) }

                    // A compaction step armed on A: A's compaction stops there...
                    faultsA.arm(failpoint: "compaction.afterRotate", .fail)
                    #expect(await storeError { try await a.compact() }?.code == .io)
                    #expect(faultsA.hits("compaction.afterRotate") == 1)
                    // ... B's and C's pass the same step and finish, and A's injector never hears of them.
                    for ns in others {
                        try await ns.compact()
                        #expect(await ns.currentStatistics().compactions == 1)
                    }
                    #expect(faultsA.hits("compaction.afterRotate") == 1)
                    #expect(faultsB.hits("compaction.afterRotate") == 0)

                    // Every write and every fsync of A fails, whatever the path...
                    faultsA.failSyscall(.write, pathContains: "/", errno: ENOSPC, count: nil)
                    faultsA.failSyscall(.fsync, pathContains: "/", errno: EIO, count: nil)
                    #expect(await storeError { try await a.put(b("k"), b("a1")) }?.code == .io)
                    #expect(await a.get(b("k")) == b("a0"))
                    // ... while B and C write, fsync (`always`) and compact as if nothing were armed.
                    for ns in others {
                        try await ns.put(b("k"), b("1"))
                        try await ns.apply([.put(key: b("j"), value: b("1")), .delete(key: b("k"))])
                        try await ns.compact()
                        #expect(await ns.currentStatistics().ioErrors == 0)
                        #expect(await ns.currentStatistics().failure == nil)
                        expectSameContents(await contents(ns), [b("j"): b("1")])
                    }
                    #expect(await a.currentStatistics().ioErrors >= 1)
                }
            }
        }
        // What B and C acknowledged is on disk.
        for dir in [dirB, dirC] {
            try await withStore(dir.data) { store in
                expectSameContents(await contents(try await store.namespace("n")), [b("j"): b("1")])
            }
        }
    }
}
