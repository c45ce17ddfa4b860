"""ActorKV against a real redis-server, command for command: random hash commands go to both,
and their replies must be the same, byte for byte once decoded, but for the differences that
protocol.md "Differences from Redis" lists.

    python3 differential.py ACTORKV_SOCKET REDIS_SOCKET [COMMANDS]

Each round opens two connections to each server (RESP2 in even rounds, RESP3 after HELLO 3 in
odd ones, then switched by random HELLO 2, HELLO 3 and RESET) and sends the same random commands, drawn from a small set of hashes, fields and
values so that they meet: HSET, HMSET, HSETNX, HGET, HMGET, HDEL, HEXISTS, HLEN, HSTRLEN,
HINCRBY, HINCRBYFLOAT, HKEYS, HVALS, HGETALL, HRANDFIELD, HSCAN, EXISTS, TYPE, TOUCH, KEYS, UNLINK,
RENAME, RENAMENX and COPY (with and without REPLACE) between the hashes (not through an agent,
which refuses them),
a whole hash's deadline (EXPIREAT, PEXPIREAT with NX/XX/GT/LT, EXPIRE and PEXPIRE of a time
already passed, PERSIST, EXPIRETIME, PEXPIRETIME: absolute times far off, so both servers hold
the same ones),
PING, ECHO, MULTI/EXEC/DISCARD, WATCH/UNWATCH (the second connection writing in between), and
malformed ones (wrong arity, bad increments, bad counts). Each reply is decoded into a typed
tree (a RESP3 map stays a map, a double a double) and compared after `normalize`, which only
sorts what Redis leaves unordered (a hash's fields) and reduces what is drawn at random
(HRANDFIELD) to what must hold of it.

Then random inline lines (quotes, escapes, separators), each on a connection of its own.

The seed is `DIFF_SEED` or drawn, and printed; a mismatch prints it with the commands that led
there, and stops the round. Prints TAP-like `ok - ...` / `not ok - ...` lines (diagnostics as
`#   ...`) and exits 1 if any check failed. Only Python's standard library is used.
"""

import os
import random
import socket
import sys
import time

from resp_connection import Connection, failed, not_ok, ok

ACTORKV_SOCK, REDIS_SOCK = sys.argv[1], sys.argv[2]
COMMANDS = int(sys.argv[3]) if len(sys.argv) > 3 else 10000
ROUNDS = 4
SEED = int(os.environ.get("DIFF_SEED") or random.SystemRandom().randrange(1 << 32))
TAG = os.environ.get("RUN_TAG") or str(os.getpid())
# Whole hashes' deadlines are given at these seconds since the epoch and a little after: far
# off, never passing during a run, the same numbers on both servers.
FAR = int(time.time()) + 86_400
# Through an etcd agent a whole hash's deadline is refused (protocol.md "Cluster mode"): not drawn.
CLUSTER = bool(os.environ.get("ACTORKV_ETCD"))


# --- RESP: requests out, typed replies in (resp_connection.py).

def show(reply):
    kind, payload = reply
    if kind in ("array", "set", "push") and payload is not None:
        return f"{kind}[" + ", ".join(show(r) for r in payload) + "]"
    if kind == "map":
        return "map{" + ", ".join(f"{show(k)}: {show(v)}" for k, v in payload) + "}"
    return f"{kind}({payload!r})"


# --- What is drawn: few hashes, fields and values, so that commands meet.

HASHES = [f"diff:{TAG}:{i}" for i in range(3)]
FIELDS = ["a", "b", "c", "n", "fl", "two words", "caf\u00e9", "x" * 40, b"\x00bin", b"cr\r\nlf", b"\xff\xfe"]
VALUES = ["", "1", "-7", "42", "3.5", "x", "9223372036854775806", "-9223372036854775808", "1e3",
          " 1", "0x1A", "-0", "v" * 70]
INT_INCREMENTS = ["1", "-1", "100", "0", "9223372036854775807", "-9223372036854775808", "-3"]
BAD_INT_INCREMENTS = ["x", "1.5", "", "9223372036854775808"]
FLOAT_INCREMENTS = ["0.1", "-2.5", "1e3", "5", "-0.0", ".5", "3.0e-5", "1e300", "-1e300", "0x10",
                    "12345678901234567890"]
BAD_FLOAT_INCREMENTS = ["x", "nan", "inf", " 1", "1 ", ""]


class Draw:
    def __init__(self, rng):
        self.rng = rng

    def hash(self):
        return self.rng.choice(HASHES)

    def field(self):
        return self.rng.choice(FIELDS)

    def fields(self, most=3):
        return [self.field() for _ in range(self.rng.randint(1, most))]

    def value(self):
        return self.rng.choice(VALUES)

    def pairs(self, most=3):
        out = []
        for _ in range(self.rng.randint(1, most)):
            out += [self.field(), self.value()]
        return out

    def deadline(self, h):
        """A change of a whole hash's deadline: an absolute time far off (the same on both
        servers), under a condition, or one already passed (the hash deleted), or none."""
        r = self.rng.random()
        options = self.rng.choice([[], [], ["NX"], ["XX"], ["GT"], ["LT"], ["XX", "GT"], ["gt"]])
        if r < 0.4:
            return ["EXPIREAT", h, str(FAR + self.rng.choice([0, 50, 100]))] + options
        if r < 0.6:
            return ["PEXPIREAT", h, str(FAR * 1000 + self.rng.choice([1, 777, 50_000]))] + options
        if r < 0.75:
            return [self.rng.choice(["EXPIRE", "PEXPIRE"]), h, self.rng.choice(["0", "-1"])] + options
        return ["PERSIST", h]

    def write(self, h=None):
        """A write that can be queued in MULTI and cannot fail when it runs."""
        h = h or self.hash()
        r = self.rng.random()
        if r < 0.06 and not CLUSTER:
            return self.deadline(h)
        if r < 0.35:
            return ["HSET", h] + self.pairs()
        if r < 0.45:
            return ["HMSET", h] + self.pairs()
        if r < 0.6:
            return ["HSETNX", h, self.field(), self.value()]
        return ["HDEL", h] + self.fields()

    def read(self, h=None):
        """A read that can be queued in MULTI."""
        h = h or self.hash()
        return self.rng.choice([
            ["HGET", h, self.field()], ["HMGET", h] + self.fields(4), ["HEXISTS", h, self.field()],
            ["HLEN", h], ["HSTRLEN", h, self.field()], ["HKEYS", h], ["HVALS", h], ["HGETALL", h],
        ] + ([] if CLUSTER else [["EXPIRETIME", h], ["PEXPIRETIME", h]]))

    def increment(self, h=None):
        h = h or self.hash()
        if self.rng.random() < 0.5:
            return ["HINCRBY", h, self.field(), self.rng.choice(INT_INCREMENTS)]
        return ["HINCRBYFLOAT", h, self.field(), self.rng.choice(FLOAT_INCREMENTS)]

    def random_field(self, h=None):
        h = h or self.hash()
        r = self.rng.random()
        if r < 0.3:
            return ["HRANDFIELD", h]
        count = str(self.rng.choice([1, 2, 3, 5, 20, -1, -4, -30, 0]))
        return ["HRANDFIELD", h, count] + (["WITHVALUES"] if r < 0.65 else [])

    def malformed_unqueued(self):
        """A malformed command that does not touch a transaction's state."""
        while True:
            command = self.malformed()
            if command[0] not in ("MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH", "HSCAN"):
                return command

    def malformed(self):
        h = self.hash()
        return self.rng.choice([
            ["HSET", h], ["HSET", h, "a"], ["HSET", h, "a", "1", "b"], ["HMSET", h, "a"], ["HGET", h],
            ["HGET", h, "a", "b"], ["HMGET", h], ["HDEL", h], ["HLEN"], ["HLEN", h, "a"], ["HSETNX", h, "a"],
            ["HINCRBY", h, "a"], ["HINCRBYFLOAT", h, "a"], ["HEXISTS", h], ["HSTRLEN", h], ["HKEYS"],
            ["HGETALL", h, "x"], ["HRANDFIELD"], ["HRANDFIELD", h, "x"], ["HRANDFIELD", h, "1", "WITHSCORES"],
            ["HRANDFIELD", h, "1", "WITHVALUES", "x"], ["HSCAN", h], ["HSCAN", h, "0", "COUNT"],
            ["HSCAN", h, "0", "COUNT", "0"], ["HSCAN", h, "0", "COUNT", "x"], ["HSCAN", h, "0", "BOGUS", "1"],
            ["HINCRBYFLOAT", h, "a", self.rng.choice(BAD_FLOAT_INCREMENTS)],
            ["TYPE"], ["EXISTS"], ["TOUCH"], ["ECHO"], ["ECHO", "a", "b"], ["PING", "a", "b"], ["UNLINK"], ["KEYS"],
            ["MULTI", "x"], ["EXEC", "x"], ["DISCARD", "x"], ["WATCH"], ["UNWATCH", "x"],
            ["EXPIRE", h], ["EXPIRE", h, "x"], ["EXPIRE", h, "10", "NX", "XX"], ["EXPIRE", h, "10", "GT", "LT"],
            ["EXPIRE", h, "10", "soon"], ["EXPIREAT", h], ["TTL"], ["TTL", h, "x"], ["EXPIRETIME", h, "x"], ["PERSIST"],
        ])


# --- Comparing.

def normalize(command, reply, conn=None):
    """What must be equal of `reply` to `command`: an error's code (its first word: the texts
    may differ, protocol.md says, but for those `REDIS_TEXTS` lists); Redis orders a hash's
    fields as it pleases (by insertion, or by its table), so they are sorted; HRANDFIELD's draw
    is reduced to its shape, and with `conn`, each field drawn is checked against the hash as
    `conn` then holds it."""
    name = command[0].upper()
    kind, payload = reply
    if kind == "error":
        return reply if any(reply[1].startswith(t) for t in REDIS_TEXTS) else (kind, reply[1].split(b" ")[0])
    if payload is None or kind == "simple":
        return reply
    if name == "TIME" or (name == "COMMAND" and len(command) > 1):  # the clock; Redis's own count of commands
        return (kind, [r[0] for r in payload]) if kind == "array" else (kind,)
    if name in ("HKEYS", "HVALS", "KEYS") and kind in ("array", "set"):
        return (kind, sorted(payload))
    if name == "SCAN":
        return (kind, [payload[0], (payload[1][0], sorted(payload[1][1]))])
    if name == "HGETALL":
        if kind == "map":
            return (kind, sorted(payload))
        return (kind, sorted(zip(payload[0::2], payload[1::2])))
    if name == "HSCAN":
        cursor, items = payload
        return (kind, [cursor, ("array", sorted(zip(items[1][0::2], items[1][1::2])))])
    if name == "HRANDFIELD":
        return random_field_shape(command, reply, conn)
    return reply


def random_field_shape(command, reply, conn):
    """HRANDFIELD's reply as what must hold of it: its types and length, each field drawn in
    the hash with the value drawn beside it, and for a positive count, no field twice, and
    every field when the count covers the hash."""
    kind, payload = reply
    held = dict(hash_pairs(conn.call(["HGETALL", command[1]]))) if conn else {}
    if kind == "bulk":
        return ("drawn one", payload in held if conn else True)
    with_values = len(command) > 3
    if with_values and payload and payload[0][0] == "array":  # RESP3: [field, value] pairs
        drawn = [(p[1][0][1], p[1][1][1]) for p in payload]
    elif with_values:
        drawn = [(f[1], v[1]) for f, v in zip(payload[0::2], payload[1::2])]
    else:
        drawn = [(f[1], held.get(f[1])) for f in payload]
    count = int(command[2])
    fields = [f for f, _ in drawn]
    facts = {
        "types": sorted({r[0] for r in payload}),
        "length": len(payload),
    }
    if conn:
        facts["in the hash, with their values"] = all(f in held and held[f] == v for f, v in drawn)
    if count > 0:
        facts["distinct"] = len(set(fields)) == len(fields)
        if conn and count >= len(held):
            facts["all"] = sorted(fields) == sorted(held)
    return ("drawn", sorted(facts.items()))


def hash_pairs(reply):
    kind, payload = reply
    if kind == "map":
        return [(k[1], v[1]) for k, v in payload]
    return [(f[1], v[1]) for f, v in zip(payload[0::2], payload[1::2])]


# Error texts that protocol.md promises to be Redis's own, compared whole: HINCRBYFLOAT's
# refusals and an integer overflow. Other errors are compared by their code.
REDIS_TEXTS = [
    b"ERR value is not a valid float", b"ERR value is NaN or Infinity", b"ERR hash value is not a float",
    b"ERR increment would produce NaN or Infinity", b"ERR increment or decrement would overflow",
]


def same(command, a, r):
    """Whether ActorKV's reply `a`, normalized, is Redis's `r`."""
    return a == r


# --- A round.

class Round:
    """One protocol version, two connections to each server, COMMANDS random commands."""

    def __init__(self, number, rng):
        self.number, self.rng, self.draw = number, rng, Draw(rng)
        self.protocol = 3 if number % 2 else 2
        self.akv = [Connection(ACTORKV_SOCK) for _ in range(2)]
        self.redis = [Connection(REDIS_SOCK) for _ in range(2)]
        if self.protocol == 3:
            for c in self.akv + self.redis:
                kind, _ = c.call(["HELLO", "3"])
                assert kind == "map", f"HELLO 3 gave {kind}"
        self.history = []
        self.compared = 0
        self.transaction_hash = None
        self.last_reply = None
        self.queued = []

    def close(self):
        for c in self.akv + self.redis:
            c.close()

    def send(self, command, on=0, compare=True):
        """Sends `command` on connection `on` of both servers; False once they differ."""
        a = self.akv[on].call(command)
        r = self.redis[on].call(command)
        self.history.append((on, command))
        self.last_reply = a
        return not compare or self.compare(command, a, r, on)

    def compare(self, command, a, r, on, look=True):
        """Whether replies `a` (ActorKV's) and `r` (Redis's) to `command` on connection `on`
        agree; reports them if not. `look`: HRANDFIELD's draw is checked against the hash now."""
        na = normalize(command, a, self.akv[on] if look else None)
        nr = normalize(command, r, self.redis[on] if look else None)
        self.compared += 1
        if same(command, na, nr):
            return True
        recent = [f"{'ab'[c]}: {' '.join(map(str, cmd))}" for c, cmd in self.history[-25:]]
        not_ok(f"RESP{self.protocol} round {self.number}: {' '.join(map(str, command))} answers as redis-server does",
               f"seed {SEED} (rerun with DIFF_SEED={SEED}); the last commands, on connection a or b:",
               *recent, f"ActorKV: {show(a)}", f"Redis:   {show(r)}")
        return False

    def transaction(self):
        """MULTI, queued commands on one hash (at times a refused one), then EXEC or DISCARD;
        at times under WATCH, with the other connection writing in between."""
        h = self.transaction_hash = self.draw.hash()
        steps = []
        watching = self.rng.random() < 0.4
        if watching:
            steps.append((0, ["WATCH", h]))
            if self.rng.random() < 0.5:
                steps.append((1, self.draw.write(self.rng.choice([h, self.draw.hash()]))))
            if self.rng.random() < 0.15:
                steps.append((0, ["UNWATCH"]))
        steps.append((0, ["MULTI"]))
        for _ in range(self.rng.randint(0, 4)):
            r = self.rng.random()
            command = (self.draw.write(h) if r < 0.45 else self.draw.read(h) if r < 0.8
                       else self.draw.random_field(h) if r < 0.85 else ["PING"] if r < 0.88
                       else self.draw.increment(h) if r < 0.94
                       # refused while queueing (EXEC then aborts), or answered at once, not queued
                       else self.rng.choice([["HSET", h], ["NOSUCHCOMMAND", h], ["MULTI"], ["WATCH", h]]))
            steps.append((0, command))
        steps.append((0, ["EXEC"] if self.rng.random() < 0.85 else ["DISCARD"]))
        self.queued = []
        if self.rng.random() < 0.5:  # MULTI to EXEC in one write
            start = next(i for i, (_, c) in enumerate(steps) if c == ["MULTI"])
            for on, command in steps[:start]:
                if not self.send(command, on):
                    return False
            return self.pipelined_transaction([c for _, c in steps[start:]])
        for on, command in steps:
            if command[0] == "EXEC":
                if not self.exec(command):
                    return False
            elif not self.send(command, on):
                return False
            elif on == 0 and self.last_reply == ("simple", b"QUEUED"):
                self.queued.append(command)
        return True

    def pipelined_transaction(self, commands):
        """MULTI, the queue and EXEC (or DISCARD) sent in one write to each server."""
        replies = zip(commands, self.akv[0].pipeline(commands), self.redis[0].pipeline(commands))
        for command, a, r in replies:
            if command[0] == "EXEC":
                self.history.append((0, command))
                return self.exec_compare(command, a, r)
            self.history.append((0, command))
            if not self.compare(command, a, r, 0, look=False):
                return False
            if a == ("simple", b"QUEUED"):
                self.queued.append(command)
        return True

    def pipelined(self):
        """A few random commands outside MULTI sent in one write (each reply compared, an
        HRANDFIELD's by its shape: the commands after it may change the hash)."""
        commands = []
        for _ in range(self.rng.randint(2, 12)):
            r = self.rng.random()
            d = self.draw
            commands.append(d.write() if r < 0.4 else d.read() if r < 0.7 else d.increment() if r < 0.85
                            else d.random_field() if r < 0.9 else self.rng.choice([["PING"], ["EXISTS", d.hash()], ["TYPE", d.hash()]])
                            if r < 0.95 else d.malformed_unqueued())
        on = self.rng.randrange(2)
        for command, a, r in zip(commands, self.akv[on].pipeline(commands), self.redis[on].pipeline(commands)):
            self.history.append((on, command))
            if not self.compare(command, a, r, on, look=False):
                return False
        return True

    def exec(self, command):
        a = self.akv[0].call(command)
        r = self.redis[0].call(command)
        self.history.append((0, command))
        return self.exec_compare(command, a, r)

    def exec_compare(self, command, a, r):
        """EXEC's replies. Where Redis applied the commands around one that failed (an
        increment of a value that is no number, or one that overflows), ActorKV applies none and
        answers that failure (protocol.md: all or nothing): the hash then differs, so both
        servers drop it."""
        failed = [e for e in (r[1] or []) if e[0] == "error"] if r[0] == "array" else []
        if failed:
            if normalize(command, a) != normalize(command, failed[0]):
                return self.report_exec(a, r, "ActorKV's EXEC answers the first failure, alone")
            self.akv[0].call(["UNLINK", self.transaction_hash])
            self.redis[0].call(["UNLINK", self.transaction_hash])
            return True
        self.compared += 1
        if a == r or (r[0] == "array" and a[0] == "array" and self.exec_replies_same(a, r)):
            return True
        return self.report_exec(a, r, "EXEC answers as redis-server does")

    def exec_replies_same(self, a, r):
        queued = self.queued
        if len(queued) != len(a[1]) or len(queued) != len(r[1]):
            return False
        # HRANDFIELD inside EXEC: its shape (later commands of the queue may change the hash).
        return all(same(cmd, normalize(cmd, x), normalize(cmd, y))
                   for cmd, x, y in zip(queued, a[1], r[1]))

    def report_exec(self, a, r, what):
        recent = [f"{'ab'[c]}: {' '.join(map(str, cmd))}" for c, cmd in self.history[-25:]]
        not_ok(f"RESP{self.protocol} round {self.number}: {what}",
               f"seed {SEED} (rerun with DIFF_SEED={SEED}); the last commands:", *recent,
               f"ActorKV: {show(a)}", f"Redis:   {show(r)}")
        return False

    def switch(self):
        """HELLO 2 or 3 (its reply, the server's facts, differs: only its type is compared),
        or RESET (back to RESP2, no name, no transaction, nothing watched) on one connection."""
        on = self.rng.randrange(2)
        if self.rng.random() < 0.3:
            return self.send(["RESET"], on)
        command = ["HELLO", self.rng.choice(["2", "3"])] + (["SETNAME", "hello"] if self.rng.random() < 0.3 else [])
        a, r = self.akv[on].call(command), self.redis[on].call(command)
        self.history.append((on, command))
        self.compared += 1
        return a[0] == r[0] or self.report_exec(a, r, f"{' '.join(command)} answers a {r[0]}")

    def fill(self, h):
        """Many fields at once, or many deleted: the hash grows past one leaf of ActorKV's tree
        (and past Redis's small encoding), or shrinks back."""
        names = [f"k{i:04d}" for i in self.rng.sample(range(400), self.rng.randint(20, 300))]
        if self.rng.random() < 0.7:
            command = ["HSET", h] + [x for name in names for x in (name, self.draw.value())]
        else:
            command = ["HDEL", h] + names
        return self.send(command)

    def scan_all(self, h):
        """HSCAN from cursor 0 to the end on each server, a few fields a page: the cursors differ
        (Redis's are positions in its table, ActorKV's drawn at random), but the fields and
        values collected must be the same, each once."""
        count = str(self.rng.choice([1, 2, 3, 10]))
        match = ["MATCH", self.rng.choice(["*", "?", "[a-c]*", "*o*", "n"])] if self.rng.random() < 0.4 else []
        collected = []
        for conn in (self.akv[0], self.redis[0]):
            cursor, pairs = b"0", []
            for _ in range(1000):
                kind, payload = conn.call(["HSCAN", h, cursor, "COUNT", count] + match)
                if kind != "array":
                    pairs.append(("error", payload))
                    break
                cursor = payload[0][1]
                items = payload[1][1]
                pairs += [(f[1], v[1]) for f, v in zip(items[0::2], items[1::2])]
                if cursor == b"0":
                    break
            collected.append(pairs)
        self.history.append((0, ["HSCAN", h, "…", "COUNT", count] + match + ["(to the end)"]))
        self.compared += 1
        a, r = collected
        if sorted(a) == sorted(set(r)) and len(a) == len(set(a)):
            return True
        return self.report_exec(("scan", a), ("scan", r), "an HSCAN to the end returns the same fields, each once")

    def unlink(self, names):
        """UNLINK. Its count differs where protocol.md says: a namespace emptied by HDEL is no
        Redis key any more (EXISTS 0), but it is still there, and UNLINK counts it. So each
        server's count is checked against what it held before: Redis's the names that EXIST,
        ActorKV's those that NAMESPACES lists, and every name Redis held must be listed."""
        listed = {name for _, name in self.akv[0].call(["NAMESPACES"])[1]}
        held = {n for n in set(names) if self.redis[0].call(["EXISTS", n]) == ("integer", 1)}
        a = self.akv[0].call(["UNLINK"] + names)
        r = self.redis[0].call(["UNLINK"] + names)
        self.history.append((0, ["UNLINK"] + names))
        self.compared += 1
        expected_a = len({n for n in set(names) if n.encode() in listed})
        if r == ("integer", len(held)) and a == ("integer", expected_a) and all(n.encode() in listed for n in held):
            return True
        return self.report_exec(a, r, f"UNLINK {' '.join(names)} counts the namespaces there (NAMESPACES: {sorted(listed)})")

    def malformed_scan(self, command):
        """A malformed HSCAN: refused by both, but Redis reads its options only once it found
        the hash, answering an absent one an empty page (protocol.md: ActorKV checks them
        first)."""
        if self.redis[0].call(["EXISTS", command[1]]) == ("integer", 1):
            return self.send(command)
        a = self.akv[0].call(command)
        self.history.append((0, command))
        self.compared += 1
        return a[0] == "error" or self.report_exec(a, ("error", b"(none: the hash is absent)"), "a malformed HSCAN is refused")

    def one(self):
        r = self.rng.random()
        d = self.draw
        if r < 0.2:
            return self.send(d.write(), self.rng.randrange(2))
        if r < 0.35:
            return self.send(d.read(), self.rng.randrange(2))
        if r < 0.45:
            return self.send(d.increment())
        if r < 0.47:
            return self.send(["HINCRBY", d.hash(), d.field(), self.rng.choice(BAD_INT_INCREMENTS)])
        if r < 0.52:
            return self.send(d.random_field())
        if r < 0.53:
            return self.fill(d.hash())
        if r < 0.55:
            return self.scan_all(d.hash())
        if r < 0.59:
            return self.send(self.rng.choice([
                ["EXISTS", d.hash()], ["TYPE", d.hash()], ["TOUCH", d.hash(), d.hash(), d.hash()], ["KEYS", f"diff:{TAG}:*"],
                ["SCAN", "0", "MATCH", f"diff:{TAG}:*", "COUNT", "1000"], ["SCAN", "0", "MATCH", f"diff:{TAG}:*", "TYPE", "hash", "COUNT", "1000"],
                ["SCAN", "0", "MATCH", f"diff:{TAG}:*", "TYPE", "string", "COUNT", "1000"], ["PING"], ["PING", d.value()], ["ECHO", d.value()],
                ["SELECT", "0"], ["CLIENT", "SETNAME", self.rng.choice(["", "differential"])], ["CLIENT", "GETNAME"],
                ["UNWATCH"], ["DISCARD"], ["EXEC"], ["CLIENT", "SETNAME", "two words"], ["TIME"], ["COMMAND", "COUNT"]]), self.rng.randrange(2))
        if r < 0.595:
            return self.switch()
        if r < 0.61:
            return self.scan_all(d.hash())
        if r < 0.63:
            return self.unlink([d.hash() for _ in range(self.rng.randint(1, 2))])
        if r < 0.645 and not CLUSTER:
            return self.send([self.rng.choice(["RENAME", "RENAMENX"]), d.hash(), d.hash()], self.rng.randrange(2))
        if r < 0.655 and not CLUSTER:
            return self.send(["COPY", d.hash(), d.hash()] + self.rng.choice([[], ["REPLACE"], ["DB", "0"], ["REPLACE", "DB", "0"]]), self.rng.randrange(2))
        if r < 0.76:
            return self.pipelined()
        if r < 0.81:
            command = d.malformed()
            return self.malformed_scan(command) if command[0] == "HSCAN" else self.send(command)
        return self.transaction()

    def run(self):
        for h in HASHES:
            self.send(["UNLINK", h], compare=False)
        while self.compared < COMMANDS:
            if not self.one():
                return False
        return True


# Inline requests (a line typed by hand, `nc`): bytes their words are split at, quoted and
# escaped by, as Redis's sdssplitargs reads them (protocol.md, "Requests").
INLINE_PIECES = [b"a", b"b", b" ", b"\t", b'"', b"'", b"\\", b"x", b"4", b"1", b"n", b"\v", b"\f", b"\r",
                 b"\\x4", b"\\x41", b"\\'", b'\\"', b"\\n"]


def inline_round(rng, lines):
    """Random inline lines, each on a connection of its own followed by PING: the same
    replies (errors by their code), but where protocol.md says: on a line Redis refuses as
    unbalanced quotes, a PROTO error from ActorKV, the connection closed by both; an empty
    field, which ActorKV refuses (BADKEY)."""
    def ask(path, line):
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(line + b"\r\nPING\r\n")
        conn.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := conn.recv(65536):
            out += chunk
        conn.close()
        return b"".join(l.split(b" ")[0] if l.startswith(b"-") else l for l in out.split(b"\r\n"))

    for _ in range(lines):
        body = b"".join(rng.choice(INLINE_PIECES) for _ in range(rng.randint(0, 12)))
        line = rng.choice([b"ECHO ", b"PING ", b"HSET diff:%s:inline " % TAG.encode(), b"ECHO a "]) + body
        a, r = ask(ACTORKV_SOCK, line), ask(REDIS_SOCK, line)
        # An empty field (`""`), which Redis takes: ActorKV's keys are 1 byte or more.
        empty_field = line.startswith(b"HSET") and a == b"-BADKEY+PONG"
        if a != r and not (a == b"-PROTO" and r == b"-ERR") and not empty_field:
            not_ok("an inline request answers as redis-server's", f"seed {SEED}; the line {line!r}",
                   f"ActorKV: {a!r}", f"Redis:   {r!r}")
            return
    ok(f"{lines} random inline requests (quotes, escapes, separators) answer as redis-server's")


def main():
    print(f"#   seed {SEED}, {COMMANDS} commands a round, {ROUNDS} rounds (RESP2, RESP3, …)")
    rng = random.Random(SEED)
    for number in range(ROUNDS):
        round_ = Round(number, rng)
        try:
            if round_.run():
                ok(f"RESP{round_.protocol} round {number}: {round_.compared} random hash commands answer as redis-server's")
        except (OSError, ConnectionError, ValueError) as error:
            not_ok(f"RESP{round_.protocol} round {number} ran to its end", f"{type(error).__name__}: {error}",
                   f"seed {SEED}; the last commands:", *[' '.join(map(str, c)) for _, c in round_.history[-10:]])
        finally:
            round_.close()
    try:
        inline_round(rng, max(200, COMMANDS // 5))
    except (OSError, ConnectionError) as error:
        not_ok("the inline requests ran to their end", f"{type(error).__name__}: {error}")
    sys.exit(1 if failed() else 0)


main()
