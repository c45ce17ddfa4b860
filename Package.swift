// swift-tools-version:6.0
// ActorKV: a local key-value server on a Unix-domain socket. Toolchain only: no package dependencies.
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "ActorKV",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ActorKVStore", targets: ["ActorKVStore"]),
        .library(name: "ActorKVProtocol", targets: ["ActorKVProtocol"]),
        .library(name: "ActorKVClient", targets: ["ActorKVClient"]),
        .executable(name: "actorkvd", targets: ["actorkvd"]),
        .executable(name: "actorkv", targets: ["actorkv"]),
    ],
    targets: [
        // Storage engine: namespace actors, append-only log, snapshots. Embeddable, no sockets.
        .target(name: "ActorKVStore", dependencies: ["ActorKVProtocol", "CActorKVPrefetch", "CActorKVCRC32C"], swiftSettings: strict),
        // Cache prefetch hints for the B+tree walk (a header-only C function; Swift has no prefetch).
        .target(name: "CActorKVPrefetch"),
        // CRC-32C with the CPU's instruction where there is one (SSE 4.2 on x86-64).
        .target(name: "CActorKVCRC32C"),
        // Wire protocol: request decoder (RESP2 multibulk + inline), reply encoder/decoder. Pure, no I/O.
        .target(name: "ActorKVProtocol", swiftSettings: strict),
        // Linux headers Glibc's Swift module lacks (epoll, eventfd, SO_PEERCRED), as a tiny C shim.
        .target(name: "CActorKVSys"),
        // HINCRBYFLOAT's arithmetic in C's long double, as Redis's.
        .target(name: "CActorKVLongDouble"),
        // Cluster mode's back end: the engine's operations over an etcd cluster's v3 JSON gateway
        // (a small HTTP/1.1 client of its own), leases for ephemeral and expiring keys.
        .target(name: "ActorKVEtcd", dependencies: ["ActorKVStore"], swiftSettings: strict),
        // The server: epoll event loop, connections, command dispatch, configuration.
        .target(name: "ActorKVServer", dependencies: ["ActorKVStore", "ActorKVProtocol", "ActorKVEtcd", "CActorKVSys", "CActorKVLongDouble"],
                swiftSettings: strict),
        .executableTarget(name: "actorkvd", dependencies: ["ActorKVServer", "ActorKVProtocol"], swiftSettings: strict),
        // Test helper: drives the engine in a child process for kill -9 and failpoint crash tests.
        .executableTarget(name: "actorkv-stress", dependencies: ["ActorKVStore"], swiftSettings: strict),
        // Benchmarks: embedded put latency vs store size, the seed pattern's rewrite-per-save baseline,
        // latency during compaction. Driven by Benchmarks/run.sh.
        .executableTarget(name: "actorkv-bench", dependencies: ["ActorKVStore", "ActorKVProtocol"],
                          path: "Benchmarks/Sources/actorkv-bench", swiftSettings: strict),
        .target(name: "ActorKVClient", dependencies: ["ActorKVProtocol"], path: "Clients/Swift/ActorKVClient",
                swiftSettings: strict),
        .executableTarget(name: "actorkv", dependencies: ["ActorKVClient", "ActorKVProtocol"], path: "Clients/CLI/actorkv",
                          swiftSettings: strict),
        // Tests' own child-process runner (posix_spawn + waitpid), shared by the test targets below
        // with the other fixtures: temporary directories, an actorkvd server process, the built
        // binaries, a seeded random generator, threads of their own for blocking test bodies.
        .target(name: "CActorKVTestSys", path: "Tests/CActorKVTestSys"),
        .target(name: "ActorKVTestSupport", dependencies: ["CActorKVTestSys"], path: "Tests/ActorKVTestSupport",
                swiftSettings: strict),
        .testTarget(name: "ActorKVStoreTests", dependencies: ["ActorKVStore", "ActorKVTestSupport"], swiftSettings: strict),
        .testTarget(name: "ActorKVProtocolTests", dependencies: ["ActorKVProtocol", "ActorKVTestSupport"], swiftSettings: strict),
        .testTarget(name: "ActorKVServerTests", dependencies: ["ActorKVServer", "ActorKVProtocol", "ActorKVEtcd", "ActorKVTestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "ActorKVEtcdTests", dependencies: ["ActorKVEtcd", "ActorKVTestSupport", "CActorKVSys"], swiftSettings: strict),
        .testTarget(name: "ActorKVClientTests", dependencies: ["ActorKVClient", "ActorKVTestSupport"], swiftSettings: strict),
    ]
)
