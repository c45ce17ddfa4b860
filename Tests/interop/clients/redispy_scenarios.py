"""redis-py against actorkvd: issue #21's scenario set, run with the client's default settings.

    python redispy_scenarios.py SOCKET MODE

MODE picks the connection settings, for redis.Redis and (one scenario) redis.asyncio.Redis;
everything else is redis-py's default:
  resp3-hiredis  redis.Redis(unix_socket_path=SOCKET): RESP3 (HELLO 3), hiredis's parser
  resp2-hiredis  the same with protocol=2 (no HELLO)
  resp3-python   RESP3 with redis-py's pure-Python parser forced (parser_class=_RESP3Parser)
  resp2-python   RESP2 with redis-py's pure-Python parser forced (parser_class=_RESP2Parser)

Prints TAP-like `ok - ...` / `not ok - ...` lines (diagnostics as `#   ...`) and exits 1 if any
check failed. Checks of ActorKV's own replies (error texts, CROSSNS, expired cursors) run only when
EXPECT_SERVER is `actorkv` (the default); with EXPECT_SERVER=redis the same scenarios run against a
real redis-server, to check the scenarios themselves.

Namespaces (Redis hash keys) are named py-MODE-SCENARIO-TAG, TAG from $RUN_TAG or the pid, so a
rerun against the same server starts from empty hashes.
"""

import asyncio
import datetime
import multiprocessing
import os
import signal
import sys
import time
import traceback
import warnings

import redis
import redis.asyncio
from redis._parsers import _AsyncRESP2Parser, _AsyncRESP3Parser, _RESP2Parser, _RESP3Parser
from redis.exceptions import ResponseError, WatchError

SOCK = sys.argv[1]
MODE = sys.argv[2]
EXPECT_SERVER = os.environ.get("EXPECT_SERVER", "actorkv")
ACTORKV = EXPECT_SERVER == "actorkv"
# An agent of an etcd cluster (cluster mode): its INFO has no Keyspace section (protocol.md).
CLUSTER = bool(os.environ.get("ACTORKV_ETCD"))
TAG = os.environ.get("RUN_TAG") or str(os.getpid())
# Seconds one scenario may take before it is reported as hanging.
SCENARIO_LIMIT = int(os.environ.get("SCENARIO_LIMIT", "40"))
UNKNOWN_TEXT = "ActorKV keeps keys in namespaces: see protocol.md \"Differences from Redis\""
# A Redis command ActorKV lacks; against a real Redis (checking the scenarios), one neither has.
MISSING = "LPUSH" if ACTORKV else "NOSUCHCOMMAND"

MODES = {
    "resp3-hiredis": dict(protocol=None, parser=None, async_parser=None, parser_name="_HiredisParser", proto=3),
    "resp2-hiredis": dict(protocol=2, parser=None, async_parser=None, parser_name="_HiredisParser", proto=2),
    "resp3-python": dict(protocol=None, parser=_RESP3Parser, async_parser=_AsyncRESP3Parser,
                         parser_name="_RESP3Parser", proto=3),
    "resp2-python": dict(protocol=2, parser=_RESP2Parser, async_parser=_AsyncRESP2Parser,
                         parser_name="_RESP2Parser", proto=2),
}
if MODE not in MODES:
    sys.exit(f"unknown mode {MODE!r}; one of {', '.join(MODES)}")
SETTINGS = MODES[MODE]
PROTO = SETTINGS["proto"]

failures = 0


def ok(name):
    print(f"ok - redis-py {MODE}: {name}", flush=True)


def not_ok(name, *diagnostics):
    global failures
    failures += 1
    print(f"not ok - redis-py {MODE}: {name}", flush=True)
    for line in diagnostics:
        for part in str(line).splitlines():
            print(f"#   {part}", flush=True)


def check(name, condition, *diagnostics):
    if condition:
        ok(name)
    else:
        not_ok(name, *diagnostics)
    return condition


def expect_eq(name, expected, actual):
    return check(name, expected == actual, f"expected: {expected!r}", f"actual:   {actual!r}")


def expect_error(name, call, *needles, kind=redis.RedisError):
    """The call raises a `kind` of redis error whose text holds every needle."""
    try:
        result = call()
    except kind as error:
        text = str(error)
        missing = [n for n in needles if n not in text]
        return check(name, not missing, f"error: {type(error).__name__}: {text}",
                     *[f"expected it to contain: {n}" for n in missing])
    not_ok(name, f"no error; the call returned {result!r}")
    return False


def skip(name):
    print(f"#   skip (EXPECT_SERVER={EXPECT_SERVER}): {name}", flush=True)


def ns(scenario):
    return f"py-{MODE}-{scenario}-{TAG}"


def make_client():
    """A client as a user of MODE writes it: defaults, plus protocol=2 or the parser class."""
    if SETTINGS["parser"] is None:
        if SETTINGS["protocol"] is None:
            return redis.Redis(unix_socket_path=SOCK)
        return redis.Redis(unix_socket_path=SOCK, protocol=SETTINGS["protocol"])
    kwargs = dict(connection_class=redis.UnixDomainSocketConnection, path=SOCK,
                  parser_class=SETTINGS["parser"])
    if SETTINGS["protocol"] is not None:
        kwargs["protocol"] = SETTINGS["protocol"]
    return redis.Redis(connection_pool=redis.ConnectionPool(**kwargs))


def make_async_client():
    """The same, with redis.asyncio: what an asyncio program writes (`aclose()` it when done)."""
    kwargs = dict(unix_socket_path=SOCK)
    if SETTINGS["protocol"] is not None:
        kwargs["protocol"] = SETTINGS["protocol"]
    if SETTINGS["async_parser"] is None:
        return redis.asyncio.Redis(**kwargs)
    pool_kwargs = dict(connection_class=redis.asyncio.UnixDomainSocketConnection, path=SOCK,
                       parser_class=SETTINGS["async_parser"])
    if SETTINGS["protocol"] is not None:
        pool_kwargs["protocol"] = SETTINGS["protocol"]
    return redis.asyncio.Redis(connection_pool=redis.asyncio.ConnectionPool(**pool_kwargs))


def raw(client, *args):
    """One command's reply as the parser returns it, without redis-py's response callbacks."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        pool.release(conn)


class Hang(Exception):
    pass


def on_alarm(signum, frame):
    raise Hang(f"no answer within {SCENARIO_LIMIT} s")


def run(scenario):
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(SCENARIO_LIMIT)
    start = time.monotonic()
    try:
        scenario()
    except Exception as error:  # a scenario that raises fails, the others still run
        not_ok(f"{scenario.__name__} ran to the end",
               f"{type(error).__name__}: {error}", *traceback.format_exc().splitlines()[-5:-1])
    finally:
        signal.alarm(0)
    print(f"#   {scenario.__name__} took {time.monotonic() - start:.1f}s", flush=True)


# ---------------------------------------------------------------------------------------------
def connect_with_defaults():
    r = make_client()
    expect_eq("PING on a new connection", True, r.ping())
    pool = r.connection_pool
    conn = pool.get_connection()
    try:
        expect_eq("the reply parser is the intended one", SETTINGS["parser_name"],
                  type(conn._parser).__name__)
        meta = conn.handshake_metadata
        if PROTO == 3:
            check("the connection sent HELLO 3 and kept its answer", isinstance(meta, dict),
                  f"handshake_metadata: {meta!r}")
            meta = {(k.decode() if isinstance(k, bytes) else k): v for k, v in (meta or {}).items()}
            expect_eq("HELLO 3 answer: proto 3", 3, meta.get("proto"))
            for field in ("server", "version", "proto", "id", "mode", "role", "modules"):
                check(f"HELLO 3 answer has '{field}'", field in meta, f"answer: {meta!r}")
            server = meta.get("server")
            server = server.decode() if isinstance(server, bytes) else server
            expect_eq("HELLO 3 answer: server", EXPECT_SERVER, server)
            mode = meta.get("mode")
            expect_eq("HELLO 3 answer: mode standalone", "standalone",
                      mode.decode() if isinstance(mode, bytes) else mode)
        else:
            expect_eq("protocol=2 sends no HELLO", None, meta)
    finally:
        pool.release(conn)
    client_id = r.client_id()
    check("CLIENT ID is an integer", isinstance(client_id, int), f"CLIENT ID: {client_id!r}")
    info = r.client_info()
    expect_eq("CLIENT INFO names this connection's id", str(client_id), str(info.get("id")))
    for field in ("addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "multi", "cmd", "user", "resp"):
        check(f"CLIENT INFO has Redis's '{field}'", field in info, f"client_info(): {info!r}")
    expect_eq("CLIENT INFO: cmd", "client|info", info.get("cmd"))
    listed = r.client_list()
    check("CLIENT LIST (client_list()) holds this connection, with its fields",
          any(str(entry.get("id")) == str(client_id) and "age" in entry and "flags" in entry for entry in listed),
          f"client_list(): {listed!r}")
    expect_eq("CLIENT LIST TYPE pubsub (client_list(_type='pubsub')): nobody follows here", [], r.client_list(_type="pubsub"))
    other = make_client()
    other_id = other.client_id()
    other.hset(ns("clients"), "f", "v")
    other_line = [entry for entry in r.client_list() if str(entry.get("id")) == str(other_id)]
    expect_eq("CLIENT LIST: another connection's cmd is its last command", ["hset"], [entry.get("cmd") for entry in other_line])
    check("CLIENT LIST: another connection's idle is a whole number of seconds",
          len(other_line) == 1 and str(other_line[0].get("idle")).isdigit(), f"client_list(): {other_line!r}")
    expect_eq("CLIENT KILL ID (client_kill_filter(_id=...)) closes the other connection", 1, r.client_kill_filter(_id=other_id))
    check("the killed connection is gone from CLIENT LIST",
          all(str(entry.get("id")) != str(other_id) for entry in r.client_list()), f"client_list(): {r.client_list()!r}")
    other.close()
    # INFO with a section: only that section, with Redis's field names.
    memory = r.info("memory")
    check("INFO memory has used_memory, an integer > 0",
          isinstance(memory.get("used_memory"), int) and memory["used_memory"] > 0, f"info('memory'): {memory!r}")
    check("INFO memory holds only the memory section", "connected_clients" not in memory, f"info('memory'): {memory!r}")
    expect_eq("INFO clients: blocked_clients", 0, r.info("clients").get("blocked_clients"))
    r.hset(ns("info"), "f", "v")
    if CLUSTER:
        print("#   skip (cluster mode): INFO keyspace counts db0's keys", flush=True)
    else:
        keyspace = r.info("keyspace")
        check("INFO keyspace counts db0's keys", keyspace.get("db0", {}).get("keys", 0) >= 1, f"info('keyspace'): {keyspace!r}")
    expect_eq("CLIENT SETNAME / GETNAME", True, r.client_setname("redispy-" + MODE))
    name = r.client_getname()
    expect_eq("CLIENT GETNAME", "redispy-" + MODE, name.decode() if isinstance(name, bytes) else name)
    # A second client on the same socket, as a second process would open it.
    expect_eq("a second client connects too", True, make_client().ping())


def hash_commands():
    r = make_client()
    key = ns("hash")
    expect_eq("HSET one new field -> 1", 1, r.hset(key, "a", "1"))
    expect_eq("HSET mapping of two new fields -> 2", 2, r.hset(key, mapping={"b": "2", "c": "3"}))
    expect_eq("HSET of an existing field -> 0", 0, r.hset(key, "a", "10"))
    expect_eq("HGET", b"10", r.hget(key, "a"))
    expect_eq("HGET of a missing field -> None", None, r.hget(key, "nope"))
    expect_eq("HGETALL", {b"a": b"10", b"b": b"2", b"c": b"3"}, r.hgetall(key))
    expect_eq("HDEL of one present and one missing field -> 1", 1, r.hdel(key, "b", "nope"))
    expect_eq("HGETALL after HDEL", {b"a": b"10", b"c": b"3"}, r.hgetall(key))
    expect_eq("HMGET", [b"10", None, b"3"], r.hmget(key, ["a", "nope", "c"]))
    expect_eq("HLEN", 2, r.hlen(key))
    expect_eq("HEXISTS present / missing", (True, False), (r.hexists(key, "a"), r.hexists(key, "b")))
    sums = [r.hincrbyfloat(key, "fl", 0.1) for _ in range(3)] + [r.hincrbyfloat(key, "fl", 1e3)]
    expect_eq("hincrbyfloat: 0.1 three times, then 1e3, as Redis adds them", ([0.1, 0.2, 0.3, 1000.3], b"1000.29999999999999999"),
              (sums, r.hget(key, "fl")))
    fields = set(r.hkeys(key))
    check("hrandfield() is one of the fields", r.hrandfield(key) in fields)
    expect_eq("hrandfield(count=50): every field once", sorted(fields), sorted(r.hrandfield(key, 50)))
    drawn = r.hrandfield(key, -9, withvalues=True)
    check("hrandfield(-9, withvalues=True): 9 fields with their values, repeats allowed",
          len(drawn) == 18 and all(r.hget(key, f) == v for f, v in zip(drawn[::2], drawn[1::2])), f"{drawn!r}")
    solo = ns("hash-solo")
    pipe = r.pipeline()  # transaction=True: MULTI ... EXEC
    pipe.hset(solo, "only", "1").hrandfield(solo, -2, withvalues=True).hrandfield(solo)
    expect_eq("pipeline(): hrandfield queued in MULTI sees the HSET before it", [1, [b"only", b"1", b"only", b"1"], b"only"], pipe.execute())
    r.hset(key, "nf", "x")
    expect_error("hincrbyfloat of a value that is not a float raises", lambda: r.hincrbyfloat(key, "nf", 1), "hash value is not a float")
    r.hdel(key, "fl", "nf")
    if ACTORKV:  # Redis 8's (the redis-server checked against here is older)
        r.hset(key, mapping={"t1": "x", "t2": "y"})
        expect_eq("hgetdel(): the values, None for a missing field", [b"x", None, b"y"], r.hgetdel(key, "t1", "nope", "t2"))
        expect_eq("... and the fields are gone", [None, None], r.hmget(key, ["t1", "t2"]))
    expect_eq("HSETNX new / existing", (True, False), (r.hsetnx(key, "d", "4"), r.hsetnx(key, "d", "5")))
    expect_eq("HINCRBY", 15, r.hincrby(key, "a", 5))
    expect_eq("HSTRLEN", 2, r.hstrlen(key, "a"))
    expect_eq("HKEYS", [b"a", b"c", b"d"], sorted(r.hkeys(key)))
    expect_eq("HVALS", [b"15", b"3", b"4"], sorted(r.hvals(key)))
    binary = b"\x00\xff\r\nbin\x80ary"
    r.hset(key, b"bin\x00key", binary)
    expect_eq("binary field and value round trip", binary, r.hget(key, b"bin\x00key"))
    expect_eq("HGETALL of a hash nobody wrote -> {}", {}, r.hgetall(ns("never-written")))
    expect_eq("HLEN of a hash nobody wrote -> 0", 0, r.hlen(ns("never-written")))
    reply = raw(r, "HGETALL", key)
    if PROTO == 3:
        check("RESP3 HGETALL arrives as a map (dict before any callback)", isinstance(reply, dict),
              f"raw reply: {reply!r}")
    else:
        check("RESP2 HGETALL arrives as a flat array", isinstance(reply, list) and len(reply) == 8,
              f"raw reply: {reply!r}")
    expect_eq("RESP null for a missing field (raw)", None, raw(r, "HGET", key, "nope"))
    # HSCAN MATCH is Redis's glob: *, ?, [...], and \ escapes.
    r.hset(key, mapping={"m*x": "1", "mAx": "2", "m?x": "3", "mbx": "4", "mb": "5"})
    for pattern, expected in [("m*", {"m*x", "mAx", "m?x", "mbx", "mb"}), ("m?x", {"m*x", "mAx", "m?x", "mbx"}),
                              ("m[a-zA]x", {"mAx", "mbx"}), ("m[^b]x", {"m*x", "mAx", "m?x"}),
                              (r"m\*x", {"m*x"}), (r"m\?x", {"m?x"}), ("nothing*", set())]:
        got = [f.decode() for f, _ in r.hscan_iter(key, match=pattern)]
        expect_eq(f"hscan_iter(match={pattern!r})", sorted(expected), sorted(got))
    # NOVALUES came with Redis 7.4 (the redis-server checked against here may be older).
    if ACTORKV:
        expect_eq("hscan_iter(match='m?x', no_values=True): the fields alone", sorted([b"m*x", b"mAx", b"m?x", b"mbx"]),
                  sorted(r.hscan_iter(key, match="m?x", no_values=True)))


STABLE = 10_000


def churn_writer(count, started, stop, key):
    """Another process: adds, rewrites and deletes churn:N fields until told to stop."""
    r = make_client()
    i = 0
    while not stop.is_set():
        i += 1
        r.hset(key, f"churn:{i}", str(i))
        if i % 3 == 0:
            r.hset(key, f"churn:{i - 1}", "rewritten")
        if i > 40:
            r.hdel(key, f"churn:{i - 40}")
        with count.get_lock():
            count.value += 1
        if i == 50:
            started.set()
    started.set()


def stable_fields():
    return {f"stable:{n:05d}".encode(): f"value-{n}".encode() for n in range(STABLE)}


def check_stable_once(name, expected, seen_pairs, allowed_prefixes=(b"churn:",)):
    counts = {}
    wrong_values = []
    unexpected = []
    for field, value in seen_pairs:
        if field in expected:
            counts[field] = counts.get(field, 0) + 1
            if value != expected[field]:
                wrong_values.append((field, value))
        elif not field.startswith(allowed_prefixes):
            unexpected.append(field)
    missing = [f for f in expected if f not in counts]
    twice = [f for f, c in counts.items() if c > 1]
    return check(name, not missing and not twice and not wrong_values and not unexpected,
                 f"{len(missing)} missing (first: {missing[:3]!r})",
                 f"{len(twice)} returned more than once (first: {twice[:3]!r})",
                 f"{len(wrong_values)} with a wrong value (first: {wrong_values[:3]!r})",
                 f"{len(unexpected)} unexpected fields (first: {unexpected[:3]!r})")


def hscan_under_writes():
    r = make_client()
    key = ns("scan")
    stable = stable_fields()
    items = list(stable.items())
    for i in range(0, STABLE, 1000):
        expect_eq(f"HSET of 1,000 fields at once ({i // 1000 + 1}/10)", 1000,
                  r.hset(key, mapping=dict(items[i:i + 1000])))
    expect_eq("HLEN after the fill", STABLE, r.hlen(key))

    ctx = multiprocessing.get_context("fork")
    count, started, stop = ctx.Value("l", 0), ctx.Event(), ctx.Event()
    writer = ctx.Process(target=churn_writer, args=(count, started, stop, key))
    writer.start()
    try:
        started.wait(10)
        before = count.value
        seen = list(r.hscan_iter(key))
        during = count.value - before
        check_stable_once(f"hscan_iter saw each of {STABLE} stable fields exactly once, "
                          "with its value, while another process wrote", stable, seen)
        check("the other process wrote while hscan_iter ran", during > 0,
              f"writes during the scan: {during}")
        print(f"#   hscan_iter: {len(seen)} pairs, {during} concurrent writes", flush=True)

        # The pages of one scan asked on two connections in turn, as a pool may send them.
        other = make_client()
        cursor, pairs, cursors, bad_cursors = b"0", [], 0, []
        clients = [r, other]
        while True:
            reply = raw(clients[cursors % 2], "HSCAN", key, cursor, "COUNT", "500")
            cursors += 1
            cursor, flat = reply[0], reply[1]
            if not (cursor.isdigit() and int(cursor) <= 2 ** 53):
                bad_cursors.append(cursor)
            pairs.extend(zip(flat[0::2], flat[1::2]))
            if cursor == b"0" or cursors > 10_000:
                break
        check_stable_once("HSCAN pages alternating between two connections: each stable field "
                          "exactly once, while another process wrote", stable, pairs)
        check("every HSCAN cursor is an unsigned decimal integer <= 2^53", not bad_cursors,
              f"bad cursors: {bad_cursors[:5]!r}")
        check("the paging above took more than one page", cursors > 1, f"pages: {cursors}")

        seen = list(r.hscan_iter(key, match="stable:00*", count=100))
        expect_eq("hscan_iter(match='stable:00*') under writes: the 1,000 fields, each once",
                  sorted(f for f in stable if f.startswith(b"stable:00")), sorted(f for f, _ in seen))
    finally:
        stop.set()
        writer.join(10)
    expect_eq("the writer process exited cleanly", 0, writer.exitcode)

    if ACTORKV:
        # redis-py drops the "ERR " of the message; an unknown command would raise too.
        try:
            reply = r.hscan(key, cursor=2 ** 53 - 1)
            not_ok("HSCAN with a cursor the server never gave -> error, not a restart", f"reply: {reply!r}"[:300])
        except ResponseError as error:
            expect_eq("HSCAN with a cursor the server never gave -> error, not a restart",
                      "BADCURSOR unknown or expired HSCAN cursor; start again from 0", str(error))
    else:
        skip("HSCAN with an unknown cursor is an error")


def large_pipeline():
    # redis-py writes a whole pipeline before it reads a reply: 5,000 HGETs of 1 KB are 5 MB of
    # replies, past the server's 1 MiB output limit (it must read on while they wait, or both
    # sides wait for ever: the socket timeout turns that into a failure).
    key = ns("large-pipeline")
    value = b"v" * 1000
    r = make_client()
    r.hset(key, "f", value)
    slow = redis.Redis(unix_socket_path=SOCK, socket_timeout=60,
                       **({} if SETTINGS["protocol"] is None else {"protocol": SETTINGS["protocol"]}))
    pipe = slow.pipeline(transaction=False)
    for _ in range(5000):
        pipe.hget(key, "f")
    replies = pipe.execute()
    expect_eq("pipeline(transaction=False) of 5,000 HGETs of 1 KB: every reply",
              (5000, True), (len(replies), all(reply == value for reply in replies)))
    pipe = slow.pipeline(transaction=False)
    for i in range(20000):
        pipe.hset(key, f"bulk:{i}", str(i))
    expect_eq("pipeline(transaction=False) of 20,000 HSETs: every reply", [1] * 20000, pipe.execute())
    expect_eq("... all applied", 20001, r.hlen(key))
    slow.close()


def pipeline_batch():
    r = make_client()
    key = ns("pipe")
    r.hset(key, "w", "old")
    pipe = r.pipeline()  # transaction=True: MULTI ... EXEC
    pipe.hset(key, "x", "1")
    pipe.hset(key, mapping={"y": "2", "z": "3"})
    pipe.hdel(key, "w")
    pipe.hincrby(key, "n", 5)
    pipe.hget(key, "x")
    pipe.hexists(key, "w")
    expect_eq("pipeline() batch replies", [1, 2, 1, 5, b"1", False], pipe.execute())
    expect_eq("pipeline() batch applied", {b"x": b"1", b"y": b"2", b"z": b"3", b"n": b"5"},
              r.hgetall(key))

    # PING and ECHO queue too: their replies in their places, as Redis gives them.
    pipe = r.pipeline()
    pipe.ping()
    pipe.hset(key, "e", "1")
    pipe.echo("hi")
    pipe.hget(key, "e")
    pipe.hdel(key, "e")
    expect_eq("pipeline() with ping() and echo() between hash commands", [True, 1, b"hi", b"1", 1], pipe.execute())
    pipe = r.pipeline()
    pipe.ping()
    expect_eq("pipeline() of one ping()", [True], pipe.execute())

    # Reads of the whole hash between the writes see the writes before them, not those after.
    pipe = r.pipeline()
    pipe.hlen(key)
    pipe.hset(key, "a", "0")
    pipe.hgetall(key)
    pipe.hdel(key, "x", "y", "z")
    pipe.hkeys(key)
    pipe.hincrby(key, "n", 1)
    pipe.hvals(key)
    pipe.hlen(key)
    pipe.hmget(key, "n", "x", "a")
    replies = pipe.execute()
    # Redis lists a small hash's fields in the order they were added, ActorKV in key order.
    replies[4], replies[6] = sorted(replies[4]), sorted(replies[6])
    expect_eq("pipeline() with HLEN/HGETALL/HKEYS/HVALS/HMGET between writes: replies",
              [4, 1, {b"a": b"0", b"n": b"5", b"x": b"1", b"y": b"2", b"z": b"3"}, 3,
               [b"a", b"n"], 6, [b"0", b"6"], 2, [b"6", None, b"0"]], replies)
    expect_eq("... applied", {b"a": b"0", b"n": b"6"}, r.hgetall(key))
    r.hdel(key, "a")
    r.hset(key, mapping={"x": "1", "y": "2", "z": "3", "n": "5"})

    before = r.hgetall(key)
    pipe = r.pipeline()
    pipe.hset(key, "p", "1")
    pipe.execute_command(MISSING, key, "q")
    pipe.hset(key, "q", "1")
    expect_error("pipeline() with an unknown command raises", pipe.execute, "unknown command")
    expect_eq("... and applied none of its commands", before, r.hgetall(key))

    pipe = r.pipeline()
    pipe.hset(key, "p", "1")
    pipe.execute_command("HSET", key, "field-without-value")
    expect_error("pipeline() with a wrong-arity HSET raises", pipe.execute, "wrong number of arguments")
    expect_eq("... and applied none of its commands", before, r.hgetall(key))

    if ACTORKV:
        pipe = r.pipeline()
        pipe.hset(key, "p", "1")
        pipe.hset(ns("pipe-other"), "p", "1")
        expect_error("pipeline() over two hashes (namespaces) -> CROSSNS", pipe.execute, "CROSSNS")
        expect_eq("... and applied nothing in the first", before, r.hgetall(key))
        expect_eq("... nor in the second", {}, r.hgetall(ns("pipe-other")))
    else:
        skip("pipeline() over two hashes -> CROSSNS")

    if ACTORKV:
        # Stronger than Redis (protocol.md): a command failing inside EXEC applies nothing.
        r.hset(key, "text", "not a number")
        before = r.hgetall(key)
        pipe = r.pipeline()
        pipe.hset(key, "p", "1")
        pipe.hincrby(key, "text", 1)
        expect_error("pipeline() whose HINCRBY fails at EXEC raises", pipe.execute, "not an integer")
        expect_eq("... and applied none of it (ActorKV rolls back; Redis would keep the HSET)",
                  before, r.hgetall(key))
        r.hdel(key, "text")
    else:
        skip("pipeline() whose HINCRBY fails at EXEC applies nothing")

    # Atomic: a reader in another process never sees half of a batch.
    ctx = multiprocessing.get_context("fork")
    stop, torn, reads = ctx.Event(), ctx.Value("l", 0), ctx.Value("l", 0)
    reader = ctx.Process(target=torn_reader, args=(key, stop, torn, reads))
    reader.start()
    try:
        for i in range(300):
            pipe = r.pipeline()
            pipe.hset(key, "left", str(i))
            pipe.hset(key, "right", str(i))
            pipe.execute()
    finally:
        stop.set()
        reader.join(10)
    check("300 pipeline() batches: a concurrent HMGET never saw one half-applied",
          torn.value == 0 and reads.value > 0, f"torn reads: {torn.value} of {reads.value}")

    # transaction=False is plain pipelining: each command stands alone, its error in its place.
    pipe = r.pipeline(transaction=False)
    pipe.hset(key, "s1", "1")
    pipe.execute_command(MISSING, "s2", "1")
    pipe.hset(key, "s3", "1")
    replies = pipe.execute(raise_on_error=False)
    check("pipeline(transaction=False): the error stands in its place",
          replies[0] == 1 and isinstance(replies[1], ResponseError) and replies[2] == 1,
          f"replies: {replies!r}")
    expect_eq("... and the commands around it were applied, as their replies say",
              [b"1", b"1"], r.hmget(key, ["s1", "s3"]))


def torn_reader(key, stop, torn, reads):
    r = make_client()
    while not stop.is_set():
        left, right = r.hmget(key, ["left", "right"])
        reads.value += 1
        if left != right:
            torn.value += 1


WORKERS, INCREMENTS = 4, 300


def incr_worker(key, barrier, retries):
    r = make_client()
    tries = 0

    def increment(pipe):
        nonlocal tries
        tries += 1
        value = int(pipe.hget(key, "counter") or 0)
        pipe.multi()
        pipe.hset(key, "counter", str(value + 1))

    barrier.wait(10)
    for _ in range(INCREMENTS):
        r.transaction(increment, key)
    with retries.get_lock():
        retries.value += tries - INCREMENTS


def transactions():
    r = make_client()
    key = ns("tx")
    other = make_client()

    # A write between WATCH and EXEC makes EXEC fail: WatchError, nothing applied.
    with r.pipeline() as pipe:
        pipe.watch(key)
        pipe.hget(key, "counter")
        other.hset(key, "intruder", "1")
        pipe.multi()
        pipe.hset(key, "counter", "99")
        expect_error("WATCH, another client writes the hash, EXEC -> WatchError", pipe.execute,
                     kind=WatchError)
    expect_eq("... and the transaction's write was not applied", None, r.hget(key, "counter"))
    with r.pipeline() as pipe:
        pipe.watch(key)
        other.hset(ns("tx-elsewhere"), "f", "1")
        pipe.multi()
        pipe.hset(key, "counter", "0")
        expect_eq("WATCH, a write to another hash, EXEC -> applied", [1], pipe.execute())
    r.hdel(key, "counter")
    # Deleting fields that are not there is no write: the WATCH holds, as in Redis.
    with r.pipeline() as pipe:
        pipe.watch(key)
        expect_eq("another client's hdel() of a missing field -> 0", 0, other.hdel(key, "missing", "gone"))
        pipe.multi()
        pipe.hset(key, "counter", "0")
        expect_eq("WATCH, deletes of missing fields, EXEC -> applied", [1], pipe.execute())
    r.hdel(key, "counter")

    ctx = multiprocessing.get_context("fork")
    barrier, retries = ctx.Barrier(WORKERS), ctx.Value("l", 0)
    procs = [ctx.Process(target=incr_worker, args=(key, barrier, retries)) for _ in range(WORKERS)]
    start = time.monotonic()
    for p in procs:
        p.start()
    for p in procs:
        p.join(SCENARIO_LIMIT)
    expect_eq(f"{WORKERS} processes exited cleanly", [0] * WORKERS, [p.exitcode for p in procs])
    expect_eq(f"{WORKERS} processes x {INCREMENTS} r.transaction() increments of one field",
              str(WORKERS * INCREMENTS).encode(), r.hget(key, "counter"))
    print(f"#   transactions: {retries.value} WATCH retries, {time.monotonic() - start:.1f}s", flush=True)


ASYNC_TASKS, ASYNC_INCREMENTS, ASYNC_FIELDS = 8, 40, 2000


async def async_scenario():
    r = make_async_client()
    key = ns("asyncio")
    try:
        expect_eq("redis.asyncio: PING on a new connection", True, await r.ping())
        conn = await r.connection_pool.get_connection()
        expect_eq("redis.asyncio: the reply parser is the intended one", "_Async" + SETTINGS["parser_name"].lstrip("_"),
                  type(conn._parser).__name__)
        await r.connection_pool.release(conn)
        expect_eq("redis.asyncio: HSET with a mapping adds 2 fields", 2,
                  await r.hset(key, mapping={"a": "1", "b": "2"}))
        expect_eq("redis.asyncio: HGETALL", {b"a": b"1", b"b": b"2"}, await r.hgetall(key))
        async with r.pipeline() as pipe:  # transaction=True, the default: MULTI ... EXEC
            pipe.hset(key, "c", "3")
            pipe.hincrby(key, "n", 5)
            pipe.hdel(key, "a")
            expect_eq("redis.asyncio: pipeline() applies HSET, HINCRBY, HDEL", [1, 5, 1], await pipe.execute())
        expect_eq("... all of it", {b"b": b"2", b"c": b"3", b"n": b"5"}, await r.hgetall(key))

        # Tasks of one event loop share the client's pool: each transaction takes a connection of
        # its own, WATCHes the hash, and is retried by redis-py when another task's EXEC won.
        async def increment(pipe):
            value = int(await pipe.hget(key, "counter") or 0)
            await asyncio.sleep(0)  # let the other tasks read the same value
            pipe.multi()
            pipe.hset(key, "counter", str(value + 1))

        async def worker():
            for _ in range(ASYNC_INCREMENTS):
                await r.transaction(increment, key)

        await asyncio.gather(*(worker() for _ in range(ASYNC_TASKS)))
        expect_eq(f"redis.asyncio: {ASYNC_TASKS} tasks x {ASYNC_INCREMENTS} r.transaction() increments "
                  "of one field", str(ASYNC_TASKS * ASYNC_INCREMENTS).encode(), await r.hget(key, "counter"))

        fields = ns("asyncio-scan")
        for start in range(0, ASYNC_FIELDS, 500):
            await r.hset(fields, mapping={f"f{i}": str(i) for i in range(start, start + 500)})
        seen = [field async for field, _ in r.hscan_iter(fields, count=97)]
        expect_eq(f"redis.asyncio: hscan_iter returns each of {ASYNC_FIELDS} fields once",
                  sorted(f"f{i}".encode() for i in range(ASYNC_FIELDS)), sorted(seen))

        before = await r.hgetall(key)
        try:
            await r.execute_command(MISSING, key, "x")
            not_ok(f"redis.asyncio: {MISSING} raises", "no error")
        except ResponseError as error:
            check(f"redis.asyncio: {MISSING} raises", "unknown command" in str(error), str(error))
        expect_eq("... and the hash is untouched", before, await r.hgetall(key))
        expect_eq("... and the client is still usable", True, await r.ping())
    finally:
        await r.aclose()


def asyncio_client():
    asyncio.run(async_scenario())


def keyspace():
    """The keyspace walks: a hash with fields is a key, one whose fields were all deleted is not.
    Named as Redis programs name keys, with ':'."""
    r = make_client()
    a, b, gone = (f"py-{MODE}-ks-{TAG}:{name}" for name in ("a", "b", "gone"))
    r.hset(a, "f", "1")
    r.hset(b, mapping={"f": "1", "g": "2"})
    r.hset(gone, "f", "1")
    r.hdel(gone, "f")
    pattern = f"py-{MODE}-ks-{TAG}:*"
    expected = sorted(k.encode() for k in (a, b))
    expect_eq("scan_iter(match=) lists the hashes with fields, not the emptied one", expected,
              sorted(r.scan_iter(match=pattern)))
    expect_eq("scan_iter(match=, count=1, _type='hash')", expected,
              sorted(r.scan_iter(match=pattern, count=1, _type="hash")))
    expect_eq("scan_iter(_type='string') lists none of them", [], list(r.scan_iter(match=pattern, _type="string")))
    expect_eq("keys(pattern)", expected, sorted(r.keys(pattern)))
    everything = list(r.scan_iter())
    check("scan_iter() lists each key once", len(everything) == len(set(everything)), f"{len(everything)} keys")
    check("... among them these two", set(expected) <= set(everything))
    expect_eq("dbsize() counts what scan_iter() lists", len(everything), r.dbsize())
    check("randomkey() is one of them", r.randomkey() in set(everything) | {None}, "")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        expect_eq("hmset() (deprecated, still used) replies True", True, r.hmset(a, {"g": "2", "h": "3"}))
    expect_eq("... and set the fields", {b"f": b"1", b"g": b"2", b"h": b"3"}, r.hgetall(a))
    expect_eq("type(): hash / none", (b"hash", b"none", b"none"), (r.type(a), r.type(gone), r.type(a + ":never")))
    expect_eq("exists() of one hash: with fields / emptied", (1, 0), (r.exists(b), r.exists(gone)))
    with r.pipeline() as pipe:
        pipe.type(b).exists(b).hdel(b, "f", "g").type(b).exists(b)
        expect_eq("type() and exists() inside a transaction see the writes queued before them",
                  [b"hash", 1, 2, b"none", 0], pipe.execute())
    r.hset(b, "f", "1")
    expect_eq("unlink() removes the hashes and counts those that existed", 2, r.unlink(a, b, a + ":never"))
    expect_eq("... which are gone", (0, 0, {}, []), (r.exists(a), r.hlen(b), r.hgetall(a), sorted(r.keys(f"py-{MODE}-ks-{TAG}:[ab]"))))
    expect_eq("... and may be written again", 1, r.hset(a, "f", "again"))


def field_expiry():
    """Redis 7.4's hash-field expiry (hexpire() and its family) over a namespace's keys. The
    redis-server checked against here (Debian's 7.0) has none of it: ActorKV only."""
    if not ACTORKV:
        skip("field expiry needs Redis 7.4")
        return
    r = make_client()
    key = ns("hfe")
    r.hset(key, mapping={"a": "1", "b": "2", "c": "3", "d": "4"})
    expect_eq("hexpire(timedelta) of two fields and a missing one", [1, 1, -2],
              r.hexpire(key, datetime.timedelta(seconds=100), "a", "b", "missing"))
    ttl = r.httl(key, "a", "c")
    # An agent keeps deadlines to the second (the end of the second they fall in).
    check("httl(): the seconds left, -1 without a deadline", ttl[1] == -1 and 99 <= ttl[0] <= 101, f"{ttl!r}")
    expect_eq("hexpire(nx=True): only the field without a deadline", [0, 1], r.hexpire(key, 200, "a", "c", nx=True))
    expect_eq("hexpire(xx=True): only fields with one", [1, 0], r.hexpire(key, 300, "a", "d", xx=True))
    expect_eq("hexpire(gt=True): never a field without a deadline", [0, 0], r.hexpire(key, 10, "a", "d", gt=True))
    expect_eq("hexpire(lt=True): always a field without one", [1, 1], r.hexpire(key, 50, "a", "d", lt=True))
    at = int(time.time()) + 3600
    expect_eq("hexpireat(datetime)", [1], r.hexpireat(key, datetime.datetime.fromtimestamp(at), "b"))
    expect_eq("hexpiretime(): that second, for each field named", [at, at], r.hexpiretime(key, "b", "b"))
    pexpiretime = r.hpexpiretime(key, "b")[0]
    check("hpexpiretime(): within that second", at * 1000 - 1000 < pexpiretime <= at * 1000, f"{pexpiretime} against {at}")
    pttl = r.hpttl(key, "a")[0]
    check("hpttl(): the milliseconds left", 48_000 < pttl <= 51_000, f"{pttl}")
    expect_eq("hpersist(): removed, none to remove, no such field", [1, -1, -2], r.hpersist(key, "a", "a", "missing"))
    expect_eq("hgetex(ex=60): the values, None for a missing field", [b"1", None], r.hgetex(key, "a", "missing", ex=60))
    ttl = r.httl(key, "a")[0]
    check("... and the field has the deadline", 58 <= ttl <= 61, f"{ttl}")
    expect_eq("hgetex(persist=True): the value, the deadline removed", [[b"1"], [-1]], [r.hgetex(key, "a", persist=True), r.httl(key, "a")])
    expect_eq("hexpire() with 0 deletes the field", [2], r.hexpire(key, 0, "c"))
    expect_eq("... which is gone", None, r.hget(key, "c"))
    expect_eq("hpexpire() of a short deadline", [1], r.hpexpire(key, 100, "d"))
    deadline = time.monotonic() + 5
    while r.hget(key, "d") is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    expect_eq("the field is gone at its deadline, the others stay", {b"a": b"1", b"b": b"2"}, r.hgetall(key))
    expect_eq("httl() of the expired field: no such field", [-2], r.httl(key, "d"))
    expect_error("hexpire() of a negative time raises Redis's error", lambda: r.hexpire(key, -1, "a"), "invalid expire time, must be >= 0")
    expect_error("HEXPIRE without FIELDS raises", lambda: r.execute_command("HEXPIRE", key, 10, "a"), "wrong number of arguments")
    expect_error("HTTL with a wrong numfields raises", lambda: r.execute_command("HTTL", key, "FIELDS", 2, "a"),
                 "must match the number of arguments")
    expect_eq("... and nothing changed", ([-1], {b"a": b"1", b"b": b"2"}), (r.httl(key, "a"), r.hgetall(key)))
    # Redis 8's hsetex(): all the fields or none, with a deadline, the one each had, or none.
    key = ns("hsetex")
    expect_eq("hsetex(mapping=, ex=60)", 1, r.hsetex(key, mapping={"e": "5", "f": "6"}, ex=60))
    ttl = r.httl(key, "e", "f")
    check("... both fields have the deadline", all(58 <= t <= 61 for t in ttl), f"{ttl}")
    fnx = redis.commands.core.HashDataPersistOptions.FNX
    expect_eq("hsetex(FNX) where one field exists: 0, nothing written", (0, [b"5", None]),
              (r.hsetex(key, mapping={"e": "55", "g": "7"}, data_persist_option=fnx), r.hmget(key, "e", "g")))
    expect_eq("hsetex(keepttl=True): the new value, the deadline kept", (1, b"66"), (r.hsetex(key, "f", "66", keepttl=True), r.hget(key, "f")))
    check("... kept", 58 <= r.httl(key, "f")[0] <= 61, f"{r.httl(key, 'f')}")
    expect_eq("hsetex() without an option: the deadline goes", (1, [-1]), (r.hsetex(key, "f", "6"), r.httl(key, "f")))
    # In pipeline() (transaction=True: MULTI ... EXEC), as one log record: the rate limiter
    # Redis users write (count, give the counter a deadline once, read it).
    key = ns("hfe-multi")
    for expected in (1, 2, 3):
        pipe = r.pipeline()
        pipe.hincrby(key, "hits", 1)
        pipe.hexpire(key, 60, "hits", nx=True)
        pipe.httl(key, "hits")
        hits, given, ttl = pipe.execute()
        check(f"pipeline() of HINCRBY, HEXPIRE NX, HTTL, round {expected}: the count, the deadline given once and kept",
              hits == expected and given == [1 if expected == 1 else 0] and 58 <= ttl[0] <= 61, f"{hits} {given} {ttl}")
    pipe = r.pipeline()
    pipe.hsetex(key, mapping={"s": "1"}, px=5000)
    pipe.hgetex(key, "s", persist=True)
    pipe.hpttl(key, "s")
    expect_eq("pipeline() of HSETEX PX, HGETEX PERSIST, HPTTL: each sees the one before", [1, [b"1"], [-1]], pipe.execute())
    r.hset(key, "text", "x")
    pipe = r.pipeline()
    pipe.hexpire(key, 5, "hits")
    pipe.hincrby(key, "text", 1)
    expect_error("pipeline() of HEXPIRE and an HINCRBY that fails raises", pipe.execute, "not an integer")
    ttl = r.httl(key, "hits")[0]
    check("... and the deadline before it was not given (all or nothing)", ttl > 5, f"{ttl}")


def hash_deadline():
    """A deadline on a whole hash (protocol.md "A deadline on a whole namespace"): the session
    a Redis program keeps, hset() and expire() in a pipeline(), as against Redis itself; through
    an etcd agent, refused with nothing applied."""
    r = make_client()
    key = ns("session")
    pipe = r.pipeline()
    pipe.hset(key, mapping={"user": "alice", "cart": "3"})
    pipe.expire(key, 3600)
    pipe.ttl(key)
    if CLUSTER:
        expect_error("pipeline() of HSET, EXPIRE, TTL through an agent raises", pipe.execute, "not available in cluster mode")
        expect_eq("... and applied nothing", {}, r.hgetall(key))
        expect_error("expire() through an agent raises", lambda: r.expire(key, 60), "not available in cluster mode")
        return
    expect_eq("pipeline() of HSET, EXPIRE, TTL: the fields, the deadline, the seconds left", [2, True, 3600], pipe.execute())
    expect_eq("hset() of a new field keeps the deadline", (1, 3600), (r.hset(key, "page", "7"), r.ttl(key)))
    expect_eq("expire(nx=True) when it has one: False", False, r.expire(key, 60, nx=True))
    expect_eq("expire(gt=True) to a later one, then ttl()", (True, 7200), (r.expire(key, 7200, gt=True), r.ttl(key)))
    pttl = r.pttl(key)
    check("pttl(): the milliseconds left", 7_199_000 < pttl <= 7_200_000, f"{pttl}")
    at = int(time.time()) + 600
    expect_eq("expireat(lt=True), expiretime()", (True, at), (r.expireat(key, at, lt=True), r.expiretime(key)))
    expect_eq("pexpiretime(): in milliseconds", at * 1000, r.pexpiretime(key))
    expect_eq("persist(), then ttl() -1", (True, -1), (r.persist(key), r.ttl(key)))
    expect_eq("expire() of a hash that does not exist: False, ttl() -2", (False, -2), (r.expire(ns("nosuch"), 60), r.ttl(ns("nosuch"))))
    expect_eq("pexpire() of a short deadline", True, r.pexpire(key, 150))
    deadline = time.monotonic() + 5
    while r.exists(key) and time.monotonic() < deadline:
        time.sleep(0.05)
    expect_eq("the hash is gone at its deadline: hgetall() empty, ttl() -2, exists() 0", ({}, -2, 0), (r.hgetall(key), r.ttl(key), r.exists(key)))
    expect_eq("hset() afterwards makes a hash without a deadline", (1, -1), (r.hset(key, "user", "bob"), r.ttl(key)))
    expect_eq("expire() with a time already passed deletes it", (True, 0), (r.expire(key, -1), r.exists(key)))
    r.hset(key, "a", "1")
    r.expire(key, 100)
    r.hdel(key, "a")
    expect_eq("emptied by hdel(), a new field has no deadline", (1, -1), (r.hset(key, "b", "2"), r.ttl(key)))
    expect_error("expire() with NX and XX raises Redis's error", lambda: r.expire(key, 10, nx=True, xx=True), "not compatible")
    expect_eq("... and nothing changed", -1, r.ttl(key))


def rename():
    """RENAME/RENAMENX of a hash (protocol.md "RENAME, RENAMENX"): a hash built under a
    temporary name and swapped in whole, as against Redis itself; through an agent, refused with
    nothing changed."""
    r = make_client()
    live, tmp, fresh = ns("live"), ns("tmp"), ns("fresh")
    r.hset(live, mapping={"old": "1"})
    r.hset(tmp, mapping={"a": "1", "b": "2"})
    if CLUSTER:
        expect_error("rename() through an agent raises", lambda: r.rename(tmp, live), "not available in cluster mode")
        expect_eq("... and changed nothing", ({b"old": b"1"}, {b"a": b"1", b"b": b"2"}), (r.hgetall(live), r.hgetall(tmp)))
        return
    r.expire(tmp, 3600)
    expect_eq("rename() swaps the hash in: True", True, r.rename(tmp, live))
    expect_eq("... its fields replace the old ones, its TTL moved with it, the temporary name gone",
              ({b"a": b"1", b"b": b"2"}, 3600, 0), (r.hgetall(live), r.ttl(live), r.exists(tmp)))
    expect_error("rename() of a hash that does not exist raises", lambda: r.rename(tmp, live), "no such key")
    r.hset(tmp, "c", "3")
    expect_eq("renamenx() onto a hash that exists: False, nothing moved", (False, {b"c": b"3"}), (r.renamenx(tmp, live), r.hgetall(tmp)))
    expect_eq("renamenx() onto a new name: True, the fields moved", (True, {b"c": b"3"}, 0), (r.renamenx(tmp, fresh), r.hgetall(fresh), r.exists(tmp)))
    r.hdel(fresh, "c")
    expect_error("rename() of a hash whose fields were all deleted raises", lambda: r.rename(fresh, live), "no such key")
    expect_eq("... and the target is untouched", {b"a": b"1", b"b": b"2"}, r.hgetall(live))


def copy():
    """COPY of a hash (protocol.md "COPY"): a template copied to a new hash, the source kept,
    a hash that exists replaced only with replace=True, as against Redis itself; through an
    agent, refused with nothing changed."""
    r = make_client()
    template, user, other = ns("template"), ns("user"), ns("other")
    r.hset(template, mapping={"plan": "free", "quota": "10"})
    r.hset(user, mapping={"old": "1"})
    if CLUSTER:
        expect_error("copy() through an agent raises", lambda: r.copy(template, other), "not available in cluster mode")
        expect_eq("... and changed nothing", 0, r.exists(other))
        return
    r.expire(template, 3600)
    expect_eq("copy() to a new name: True, the fields and the TTL copied, the source kept",
              (True, {b"plan": b"free", b"quota": b"10"}, 3600, {b"plan": b"free", b"quota": b"10"}),
              (r.copy(template, other), r.hgetall(other), r.ttl(other), r.hgetall(template)))
    expect_eq("copy() onto a hash that exists: False, nothing changed", (False, {b"old": b"1"}), (r.copy(template, user), r.hgetall(user)))
    expect_eq("copy(replace=True) replaces it", (True, {b"plan": b"free", b"quota": b"10"}),
              (r.copy(template, user, replace=True), r.hgetall(user)))
    expect_eq("copy() of a hash that does not exist: False", (False, 0), (r.copy(ns("nosuch"), ns("nosuch2")), r.exists(ns("nosuch2"))))
    expect_eq("copy() with destination_db=0", True, r.copy(template, ns("db0"), destination_db=0))
    expect_error("copy() onto itself raises", lambda: r.copy(template, template), "source and destination objects are the same")
    r.hset(other, "mine", "1")
    expect_eq("the copy is the copy's own: a field written to it is not the source's", 2, r.hlen(template))


def memory_usage():
    """MEMORY USAGE of a hash (protocol.md "MEMORY USAGE"): memory_usage() answers a number of
    bytes that grows with the hash, None for a hash that does not exist, as against Redis
    itself; through an agent, refused."""
    r = make_client()
    key = ns("sizes")
    r.hset(key, mapping={"a": "1", "b": "22"})
    if CLUSTER:
        expect_error("memory_usage() through an agent raises", lambda: r.memory_usage(key), "not available in cluster mode")
        return
    small = r.memory_usage(key)
    check("memory_usage() of a hash: an int of at least its bytes", isinstance(small, int) and small >= 5, repr(small))
    r.hset(key, "big", "v" * 10000)
    big = r.memory_usage(key, samples=5)
    check("... that grows by at least a value's bytes when one is added", isinstance(big, int) and big - small >= 10000,
          f"{small} then {big}")
    expect_eq("memory_usage() of a hash that does not exist: None", None, r.memory_usage(ns("nosuch")))
    expect_error("memory_usage() with negative samples raises", lambda: r.memory_usage(key, samples=-1), "syntax error")
    expect_eq("... and the connection is usable", 3, r.hlen(key))


def wait_aof():
    """WAITAOF (protocol.md "WAITAOF", Redis 7.2's): waitaof() after a write returns once it is
    fsync'd, whatever --fsync says; through an agent etcd made it durable already. (Redis 7.0,
    the one tested against, has no WAITAOF.)"""
    if not ACTORKV:
        skip("waitaof(): redis-server 7.0 has no WAITAOF")
        return
    r = make_client()
    key = ns("durable")
    r.hset(key, "a", "1")
    expect_eq("waitaof(1, 0, 0) after hset(): [1, 0]", [1, 0], r.waitaof(1, 0, 0))
    pipe = r.pipeline(transaction=False)
    pipe.hset(key, "b", "2")
    pipe.waitaof(1, 0, 1000)
    expect_eq("in a pipeline after hset(), with a timeout: [1, 0]", [1, [1, 0]], pipe.execute())
    expect_error("waitaof(1, 1, 0) raises: there are no replicas", lambda: r.waitaof(1, 1, 0), "no replicas")
    expect_eq("... and the connection is usable", {b"a": b"1", b"b": b"2"}, r.hgetall(key))


def unknown_commands():
    r = make_client()
    key = ns("unknown")
    r.hset(key, mapping={"a": "1", "b": "2"})
    before = r.hgetall(key)
    if ACTORKV:
        expect_error("r.set() raises", lambda: r.set(key, "x"), "unknown command 'SET'", UNKNOWN_TEXT)
        expect_error("r.lpush() raises", lambda: r.lpush(key, "x"), "unknown command 'LPUSH'", UNKNOWN_TEXT)
        expect_error("r.incr() of a hash key raises", lambda: r.incr(key))
        # Redis calls whose arguments do not fit ActorKV's command of that name say where to go.
        expect_error("r.delete(hash) raises, pointing to UNLINK", lambda: r.delete(key), "wrong number of arguments", "UNLINK")
        expect_error("r.get(key) raises, pointing to HGET", lambda: r.get(key), "HGET ns field")
    expect_error(f"{MISSING} raises", lambda: r.execute_command(MISSING, key, "x"), "unknown command")
    expect_error("HSET with no field raises", lambda: r.execute_command("HSET", key),
                 "wrong number of arguments")
    expect_eq("... and the hash is untouched", before, r.hgetall(key))
    expect_eq("the connection is still usable", True, r.ping())


def main():
    print(f"# redis-py {redis.__version__}, mode {MODE}, hiredis "
          f"{'available' if redis.utils.HIREDIS_AVAILABLE else 'missing'}", flush=True)
    for scenario in (connect_with_defaults, hash_commands, hscan_under_writes, large_pipeline, pipeline_batch,
                     transactions, asyncio_client, keyspace, field_expiry, hash_deadline, rename, copy, memory_usage, wait_aof,
                     unknown_commands):
        run(scenario)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
