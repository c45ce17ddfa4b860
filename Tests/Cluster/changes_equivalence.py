"""CHANGES through an etcd agent against CHANGES of the local engine, on the same random writes.

    python3 changes_equivalence.py LOCAL_SOCKET AGENT_SOCKET [WRITES]

A follower on each server (`CHANGES ns`) receives the changes of the same random writes: PUT,
DEL of keys there and not, INCR, BATCH (with a guard that fails at times), conditional PUTs,
HSET and HDEL of several fields, HSETNX, HINCRBYFLOAT, HGETDEL, MULTI/EXEC, PEXPIRE and PERSIST.
Each follower's changes are applied in order to a map: the states it goes through must be the
same on both (also for a follower with `PREFIX b`) (a change that leaves the map as it was, such as a PEXPIRE that the agent shows as
a put of the same value, is not a state of its own), and the last the namespace's contents as
HGETALL gives them, as a `SNAPSHOT` gives them too. Halfway, each follower is dropped and resumed with `FROM` the last sequence
it received (each server's own numbers), the writes made meanwhile then reaching it from the
history. Then the writes are pipelined: the agent may send several as one change (protocol.md),
so its states must be among the local follower's, in the same order, and the last the same.

Prints `ok - ...` / `not ok - ...` lines and exits 1 if any failed. Standard library only.
"""

import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop", "clients"))
import resp_connection as resp  # noqa: E402
from resp_connection import failed, not_ok, ok  # noqa: E402

LOCAL, AGENT = sys.argv[1], sys.argv[2]
WRITES = int(sys.argv[3]) if len(sys.argv) > 3 else 600
SEED = int(os.environ.get("CHANGES_SEED") or random.SystemRandom().randrange(1 << 32))
NS = f"chg{os.getpid()}"


class Connection(resp.Connection):
    """A connection whose replies are plain values (``resp_connection.plain``)."""

    def __init__(self, path):
        super().__init__(path, timeout=30)

    def reply(self):
        return resp.plain(super().reply())


class Follower:
    """A connection following NS: the states its changes take the namespace through."""

    def __init__(self, path, start=None, prefix=None):
        self.path = path
        self.prefix = prefix
        self.state = {}
        self.states = []
        self.last = 0
        self.connect(start)

    def connect(self, start):
        self.conn = Connection(self.path)
        self.conn.send([["CHANGES", NS] + (["PREFIX", self.prefix] if self.prefix else [])
                        + (["FROM", str(start)] if start is not None else [])])
        head = self.conn.reply()
        if not (isinstance(head, list) and head[0] == b"changes"):
            raise ValueError(f"CHANGES answered {head!r}")
        if start is None:
            self.last = head[2]

    def read_until(self, key):
        """Applies change messages until one that writes `key`."""
        while True:
            message = self.conn.reply()
            if message[0] == b"synced":
                continue
            if message[0] != b"change":
                raise ValueError(f"unexpected message {message!r}")
            seq, items = message[2], message[3]
            if seq <= self.last:
                raise ValueError(f"change {seq} after {self.last}: not in order")
            self.last = seq
            keys = []
            for k, v in zip(items[0::2], items[1::2]):
                if self.prefix and not k.startswith(self.prefix.encode()):
                    raise ValueError(f"a change of {k!r}, outside PREFIX {self.prefix}")
                keys.append(k)
                if v is None:
                    self.state.pop(k, None)
                else:
                    self.state[k] = v
            snapshot = sorted(self.state.items())
            if not self.states or self.states[-1] != snapshot:
                self.states.append(snapshot)
            if key in keys:
                return


def random_write(rng):
    k = lambda: rng.choice(["a", "b", "c", "n", "f"])
    v = lambda: rng.choice(["1", "2", "x", "", "-4", "2.5"])
    r = rng.random()
    if r < 0.15:
        return ["PUT", NS, k(), v()]
    if r < 0.25:
        return ["DEL", NS] + [k() for _ in range(rng.randint(1, 3))]
    if r < 0.33:
        return ["INCR", NS, k(), str(rng.randint(-3, 3))]
    if r < 0.43:
        ops = []
        for _ in range(rng.randint(1, 4)):
            ops += rng.choice([["PUT", k(), v()], ["DEL", k()], ["INCR", k(), "1"], ["IFVERSION", k(), "0"]])
        return ["BATCH", NS] + ops
    if r < 0.48:
        return ["PUT", NS, k(), v(), "IFVERSION", "0"]
    if r < 0.6:
        return ["HSET", NS] + [x for _ in range(rng.randint(1, 3)) for x in (k(), v())]
    if r < 0.68:
        return ["HDEL", NS] + [k() for _ in range(rng.randint(1, 3))]
    if r < 0.72:
        return ["HSETNX", NS, k(), v()]
    if r < 0.78:
        return ["HINCRBYFLOAT", NS, k(), rng.choice(["0.5", "-1", "x"])]
    if r < 0.82:
        return ["HGETDEL", NS, "FIELDS", "1", k()]
    if r < 0.9:
        return ["PEXPIRE", NS, k(), "3600000"] if rng.random() < 0.5 else ["PERSIST", NS, k()]
    return None  # a transaction


def transaction(rng):
    commands = [["MULTI"]]
    for _ in range(rng.randint(1, 3)):
        commands.append(rng.choice([["HSET", NS, rng.choice("abc"), "t"], ["HDEL", NS, rng.choice("abc")],
                                    ["HINCRBY", NS, "n", "1"], ["PUT", NS, rng.choice("abf"), "m"]]))
    return commands + [["EXEC"]]


def write(writers, commands):
    """Sends `commands` in one write to each server and reads their replies."""
    for w in writers:
        w.send(commands)
        for _ in commands:
            w.reply()


def within(some, states):
    """Whether `some` are among `states`, in the same order, ending with the same one."""
    position = 0
    for state in some:
        while position < len(states) and states[position] != state:
            position += 1
        if position == len(states):
            return False
    return bool(some) and some[-1] == states[-1]


def read_snapshot(path):
    """The keys and values of `CHANGES NS SNAPSHOT`'s pages, sorted."""
    conn = Connection(path)
    conn.send([["CHANGES", NS, "SNAPSHOT"]])
    entries = []
    while True:
        message = conn.reply()
        if message[0] == b"snapshot":
            entries += zip(message[3][0::2], message[3][1::2])
        elif message[0] == b"synced":
            break
        elif message[0] != b"changes":
            raise ValueError(f"unexpected message {message!r}")
    conn.close()
    return sorted(entries)


def main():
    rng = random.Random(SEED)
    print(f"#   seed {SEED}, {WRITES} writes one by one, then {WRITES} pipelined; namespace {NS}")
    writers = [Connection(LOCAL), Connection(AGENT)]
    followers = [Follower(LOCAL), Follower(AGENT)]
    prefixed = [Follower(LOCAL, prefix="b"), Follower(AGENT, prefix="b")]
    marker = 0

    def sync():
        """A write every follower gets (its key under the prefix), once all before it."""
        nonlocal marker
        marker += 1
        write(writers, [["PUT", NS, f"b~{marker}", "m"]])
        for f in followers + prefixed:
            f.read_until(f"b~{marker}".encode())

    for i in range(WRITES):
        command = random_write(rng)
        write(writers, transaction(rng) if command is None else [command])
        if i == WRITES // 2:
            sync()
            for f in followers + prefixed:
                f.conn.close()
            for _ in range(20):  # written while nobody follows: resumed from the history
                command = random_write(rng) or ["PUT", NS, "a", "z"]
                write(writers, [command])
            for f in followers + prefixed:
                f.connect(f.last)
    sync()
    local, agent = followers
    if local.states == agent.states:
        ok(f"one by one: the agent's changes take the namespace through the local engine's {len(local.states)} states, resumed FROM halfway")
    else:
        first = next(i for i, (x, y) in enumerate(zip(local.states, agent.states + [None])) if x != y)
        not_ok("one by one: the agent's changes take the namespace through the local engine's states",
               f"seed {SEED}; they differ at state {first} of {len(local.states)} / {len(agent.states)}",
               f"local: {local.states[first] if first < len(local.states) else None}",
               f"agent: {agent.states[first] if first < len(agent.states) else None}")

    # Pipelined: the agent may group plain writes into one change.
    for f in followers:
        f.states = f.states[-1:]
    for _ in range(WRITES // 10):
        batch = []
        for _ in range(rng.randint(2, 10)):
            command = random_write(rng)
            batch += transaction(rng) if command is None else [command]
        write(writers, batch)
    sync()
    if within(agent.states, local.states):
        ok(f"pipelined: the agent's {len(agent.states)} states are among the local engine's {len(local.states)}, in order, the last the same")
    else:
        not_ok("pipelined: the agent's states are among the local engine's, in order, the last the same", f"seed {SEED}")

    for follower, prefix_follower, writer, name in ((local, prefixed[0], writers[0], "local"), (agent, prefixed[1], writers[1], "agent")):
        contents = writer.call(["HGETALL", NS])
        held = sorted(zip(contents[0::2], contents[1::2]))
        under_b = [(k, v) for k, v in held if k.startswith(b"b")]
        snapshot = read_snapshot(follower.path)
        if follower.states[-1] == held and prefix_follower.states[-1] == under_b and snapshot == held:
            ok(f"{name}: the changes add up to the namespace's contents ({len(held)} keys), those under PREFIX b to its keys "
               f"under b ({len(under_b)}), and a SNAPSHOT is the same")
        else:
            not_ok(f"{name}: the changes, those under PREFIX b and a SNAPSHOT add up to the namespace's contents",
                   f"changes: {follower.states[-1]}", f"under b: {prefix_follower.states[-1]}", f"snapshot: {snapshot}", f"HGETALL: {held}")
    if within(prefixed[1].states, prefixed[0].states):
        ok(f"PREFIX b: the agent's {len(prefixed[1].states)} states are among the local engine's {len(prefixed[0].states)}, in order, the last the same")
    else:
        not_ok("PREFIX b: the agent's states are among the local engine's, in order, the last the same", f"seed {SEED}")
    sys.exit(1 if failed() else 0)


main()
