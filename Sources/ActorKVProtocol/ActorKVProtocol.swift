// ActorKVProtocol: the wire protocol, RESP2 and RESP3. Pure: no I/O, no dependencies.
//
// Where each concern lives:
// - Requests/  what clients send: `Request`, the incremental `RequestDecoder` and its state
//              machine `RequestParser` (multibulk and inline, `InlineSplitter`), the `InputBuffer`
//              they read, the `ProtocolLimits` they enforce and the `ProtocolError` they raise;
//              `RequestEncoder`, for clients.
// - Replies/   what the server sends: `Reply`, one value encoded per protocol version, packed
//              strings (`BulkStrings`), the bounded incremental `ReplyStream`, the pieces of output
//              they share (`RESPWriter`), the `WireErrorCode`s; `ReplyDecoder` and `ReplyParser`,
//              for clients.
// - Bytes/     byte helpers: ASCII values, decimal integers, a fast byte search (`ByteScanner`),
//              Redis's glob (`RedisGlob`), a queue (`FIFO`), array reuse.
//
// Beside them: `ActorKVVersion` (the build's version) and `RepositoryKey` (ids of typed
// repositories).
