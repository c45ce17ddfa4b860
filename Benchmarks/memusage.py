#!/usr/bin/env python3
"""Benchmarks/memusage.py: MEMORY USAGE's estimate against what the server's resident set really
grows by, for BENCHMARKS.md ("MEMORY USAGE against the resident set"). The estimate's constants
(MemoryEstimate.swift) come from these figures; rerun this when the in-memory layout changes.

Each case starts a fresh ACTORKVD (`--fsync everysec`, a temporary data directory), reads its
VmRSS once the first namespace is open, loads the case's data with pipelined HSET / HSETEX
(1,000 fields a command), reads VmRSS again, and compares the growth with the sum of
`MEMORY USAGE` over the namespaces loaded:

  plain-N      KEYS keys of 16-byte names and N-byte values (N = 3, 100, 1000) in one namespace
  px-N         the same, each with a deadline an hour away (HSETEX PX)
  namespaces   NAMESPACES namespaces of one 3-byte key each

Prints per case: keys, resident growth, the estimate, estimate / growth, and the growth per key
beyond its bytes (or per namespace). The resident set includes what the allocator keeps and the
log's buffers, so expect a few percent either way. ONLY=px-3,namespaces in the environment runs
only those cases. Asserts nothing: it is a measuring tool.
usage: memusage.py ACTORKVD [KEYS [NAMESPACES]]   (defaults 300000 and 1000; at most --max-namespaces less one)"""
import os, socket, subprocess, sys, tempfile, time, shutil

BIN = sys.argv[1]
KEYS = int(sys.argv[2]) if len(sys.argv) > 2 else 300000
NAMESPACES = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
ONLY = [name for name in os.environ.get("ONLY", "").split(",") if name]


def command(*parts):
    parts = [p if isinstance(p, bytes) else str(p).encode() for p in parts]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


class Server:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="actorkv-memusage.")
        self.sock = self.dir + "/s.sock"
        self.process = subprocess.Popen([BIN, "--socket", self.sock, "--data-dir", self.dir + "/data",
                                         "--fsync", "everysec"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(400):
            if os.path.exists(self.sock): break
            time.sleep(0.05)
        self.client = socket.socket(socket.AF_UNIX)
        self.client.connect(self.sock)
        self.reader = self.client.makefile("rb")

    def ask(self, request):
        self.client.sendall(request)
        line = self.reader.readline()
        if line.startswith(b"-"): raise SystemExit("server replied %r" % line)
        if line.startswith(b"$") and line != b"$-1\r\n": return self.reader.readline()
        return line

    def rss(self):
        time.sleep(0.3)
        with open("/proc/%d/status" % self.process.pid) as status:
            return next(int(l.split()[1]) * 1024 for l in status if l.startswith("VmRSS:"))

    def close(self):
        self.process.kill()
        self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def load(server, namespace, keys, value_bytes, px):
    sent, value = 0, b"v" * value_bytes
    while sent < keys:
        n = min(1000, keys - sent)
        fields = []
        for i in range(sent, sent + n): fields += [b"key:%012d" % i, value]
        head = ["HSETEX", namespace, "PX", 3600000, "FIELDS", n] if px else ["HSET", namespace]
        server.ask(command(*head, *fields))
        sent += n


def usage(server, namespace):
    line = server.ask(command("MEMORY", "USAGE", namespace))
    return int(line[1:]) if line.startswith(b":") else 0


def case(name, fill, namespaces, key_count, data_bytes):
    if ONLY and name not in ONLY: return
    server = Server()
    try:
        server.ask(command("HSET", "warm", "k", "v"))
        before = server.rss()
        fill(server)
        grown = server.rss() - before
        estimate = sum(usage(server, ns) for ns in namespaces)
        per = (grown - data_bytes) / key_count if name != "namespaces" else grown / len(namespaces)
        print("%-11s %9d %12d %12d %7.3f %10.1f" % (name, key_count, grown, estimate, estimate / grown, per), flush=True)
    finally:
        server.close()


print("%-11s %9s %12s %12s %7s %10s" % ("case", "keys", "rss growth", "estimate", "ratio", "per key/ns"))
for px in (False, True):
    for size in (3, 100, 1000):
        case("%s-%d" % ("px" if px else "plain", size), lambda s, size=size, px=px: load(s, "m", KEYS, size, px),
             ["m"], KEYS, KEYS * (16 + size))
names = ["ns:%06d" % i for i in range(NAMESPACES)]
case("namespaces", lambda s: [s.ask(command("HSET", n, "k", "abc")) for n in names], names, NAMESPACES, NAMESPACES * 4)
