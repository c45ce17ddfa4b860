#!/usr/bin/env python3
"""Benchmarks/stall.py: how long one big namespace's removal or expiry holds up everyone else, for
BENCHMARKS.md. Against a fresh ACTORKVD (`--fsync everysec`) or `redis` (redis-server without
saves): fills the hash `big` with KEYS fields f:0 … of 20-byte values (HSET, 1,000 fields a
command; in a shuffled order with ORDER=random in the environment, as a hash filled over time is),
then one client sends `PING`s one at a time while another sends OP:

  unlink   `UNLINK big`
  expire   `PEXPIRE big 300` (ActorKV deletes every field when it passes; Redis frees the hash)
  flush    `FLUSHALL`
  rename   `RENAME big big2` (the keys written as big2's snapshot off the loop)
  copy     `COPY big big2` (the same, `big` kept)
  del      Redis's `DEL big` (redis only: ActorKV's DEL takes keys)

Prints the worst PING round trip from OP's sending until 2 s after its reply (the stall every
other client sees), OP's own reply time, and the median PING. With FOLLOW=1 in the environment a
third connection follows `big` with `CHANGES` (ActorKV only), so the removal has someone to tell.
Asserts nothing: it is a measuring tool.
usage: stall.py ACTORKVD|redis KEYS OP"""
import os, random, shutil, socket, subprocess, sys, tempfile, threading, time

BIN, KEYS, OP = sys.argv[1], int(sys.argv[2]), sys.argv[3]
DIR = tempfile.mkdtemp(prefix="actorkv-stall.")
SOCK = DIR + "/s.sock"
if BIN == "redis":
    command = ["redis-server", "--port", "0", "--unixsocket", SOCK, "--save", "", "--appendonly", "no", "--dir", DIR]
else:
    command = [BIN, "--socket", SOCK, "--data-dir", DIR + "/data", "--fsync", "everysec"]
OPS = {"unlink": b"UNLINK big\r\n", "expire": b"PEXPIRE big 300\r\n", "flush": b"FLUSHALL\r\n", "del": b"DEL big\r\n",
       "rename": b"RENAME big big2\r\n", "copy": b"COPY big big2\r\n"}


def connect():
    s = socket.socket(socket.AF_UNIX)
    s.connect(SOCK)
    return s, s.makefile("rb")


def fill(client, reader):
    order = list(range(KEYS))
    if os.environ.get("ORDER") == "random": random.Random(7).shuffle(order)
    sent = 0
    while sent < KEYS:
        n = min(1000, KEYS - sent)
        parts = [b"HSET", b"big"]
        for i in order[sent:sent + n]:
            parts += [b"f:%d" % i, b"v" * 20]
        client.sendall(b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))
        line = reader.readline()
        if not line.startswith(b":"): raise SystemExit("HSET replied %r" % line)
        sent += n


server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        if os.path.exists(SOCK): break
        time.sleep(0.05)
    client, reader = connect()
    fill(client, reader)
    if os.environ.get("FOLLOW") == "1":
        follower, _ = connect()
        follower.sendall(b"CHANGES big\r\n")
        threading.Thread(target=lambda: [None for _ in iter(lambda: follower.recv(1 << 16), b"")], daemon=True).start()
    pinger, preader = connect()
    rtts, stop, marks = [], threading.Event(), {}

    def ping():
        while not stop.is_set():
            t = time.monotonic()
            pinger.sendall(b"PING\r\n")
            preader.readline()
            rtts.append((t, time.monotonic() - t))

    thread = threading.Thread(target=ping)
    thread.start()
    time.sleep(0.5)
    marks["sent"] = time.monotonic()
    client.sendall(OPS[OP])
    reply = reader.readline()
    marks["reply"] = time.monotonic()
    time.sleep(2.0)
    stop.set()
    thread.join()
    during = [r for t, r in rtts if t >= marks["sent"] - 0.05]
    before = sorted(r for t, r in rtts if t < marks["sent"])
    print("%s keys=%d op=%s reply=%s worst_ping_ms=%.1f op_reply_ms=%.1f median_ping_ms=%.3f" % (
        "redis" if BIN == "redis" else "actorkv", KEYS, OP, reply.strip().decode(), max(during) * 1000,
        (marks["reply"] - marks["sent"]) * 1000, before[len(before) // 2] * 1000))
finally:
    server.terminate()
    server.wait()
    shutil.rmtree(DIR, ignore_errors=True)
