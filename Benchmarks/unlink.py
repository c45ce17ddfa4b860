#!/usr/bin/env python3
"""Benchmarks/unlink.py: the cost of a namespace made and removed, for BENCHMARKS.md: one client
runs CYCLES times `HSET tmp-I f v` then `UNLINK tmp-I` (a hash per session, dropped when done),
each waiting for its reply, against a fresh ACTORKVD (with `--fsync FSYNC`, default everysec) or
`redis` (redis-server without saves). Prints cycles per second and the cycle's median and 99th
percentile time, and for ActorKV what is left in the data directory (only .lock and
.sequence-floor should be). The server's directory is made in $TMPDIR (or /tmp): put it on the
disk being measured, since on a tmpfs an fsync costs nothing. Asserts nothing: it is a measuring tool.
usage: unlink.py ACTORKVD|redis CYCLES [FSYNC]"""
import os, shutil, socket, subprocess, sys, tempfile, time

BIN, CYCLES = sys.argv[1], int(sys.argv[2])
FSYNC = sys.argv[3] if len(sys.argv) > 3 else "everysec"
DIR = tempfile.mkdtemp(prefix="actorkv-unlink.")
SOCK, DATA = DIR + "/s.sock", DIR + "/data"

if BIN == "redis":
    command = ["redis-server", "--port", "0", "--unixsocket", SOCK, "--save", "", "--appendonly", "no", "--dir", DIR]
else:
    command = [BIN, "--socket", SOCK, "--data-dir", DATA, "--fsync", FSYNC]
server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        if os.path.exists(SOCK): break
        time.sleep(0.05)
    client = socket.socket(socket.AF_UNIX)
    client.connect(SOCK)
    reader = client.makefile("rb")

    def cycle(i):
        client.sendall(b"HSET tmp-%d f v\r\nUNLINK tmp-%d\r\n" % (i, i))
        first, second = reader.readline(), reader.readline()
        if first != b":1\r\n" or second != b":1\r\n":
            raise SystemExit("unexpected replies %r %r" % (first, second))

    for i in range(min(100, CYCLES)): cycle(i)  # warm up
    times = []
    start = time.monotonic()
    for i in range(CYCLES):
        t = time.monotonic()
        cycle(100 + i)
        times.append(time.monotonic() - t)
    elapsed = time.monotonic() - start
    times.sort()
    label = "redis" if BIN == "redis" else "actorkv fsync %s" % FSYNC
    print("%s: %d cycles in %.2f s: %.0f cycles/s, median %.0f us, p99 %.0f us" % (
        label, CYCLES, elapsed, CYCLES / elapsed, times[len(times) // 2] * 1e6, times[int(len(times) * 0.99)] * 1e6))
    if BIN != "redis":
        print("left in the data directory: %s" % sorted(os.listdir(DATA)))
finally:
    server.terminate()
    server.wait()
    shutil.rmtree(DIR, ignore_errors=True)
