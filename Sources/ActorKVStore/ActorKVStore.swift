// ActorKVStore: the storage engine. Embeddable; no sockets.
//
// Where each concern lives:
// - Store/      the entry points: `Store` (a data directory's namespaces, opened lazily, one
//               actor each), `StoreOptions` (fsync policy, compaction, limits), `StoreError`,
//               the typed `Repository`, the directory lock and the background fsync (`Housekeeper`).
// - Namespace/  one namespace: the `Namespace` actor (reads from memory; writes planned,
//               logged, then applied), the `Operation`s it runs, recovery when it opens,
//               the offline `NamespaceCheck`, names and scan cursors.
// - Log/        the append-only log: the record codec (`LogRecordCodec`, `Mutation`), segments
//               and their header, scanning them at recovery, the group-commit `LogSyncer`, and
//               the zero-filled reservation ahead of records.
// - Snapshot/   the JSON snapshot: its codec (whole-file and windowed), the atomic writer.
// - OrderedMap/ the in-memory B+tree of keys and values, its group lookups and prefetch hints.
// - System/     the one seam for file syscalls (`SystemCalls`), `Errno`, the per-store fault injector
//               that tests arm through it and the recorder of file operations it may carry (for
//               the power-loss tests), blocking I/O off the cooperative pool, file windows.
// - Encoding/   CRC-32C, Base64, UTF-8 validation, byte helpers: pure functions.
//
// Pure logic (codecs, cursors, policies, the map) does no I/O; files are touched only through
// `SystemCalls`.
