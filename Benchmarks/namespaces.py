#!/usr/bin/env python3
"""Benchmarks/namespaces.py: creates N namespaces (one key each, PUT nsI k v pipelined 500 at a
time), stops the server cleanly, restarts it and times until PING answers, then measures its idle
CPU (utime+stime from /proc/PID/stat) over IDLE seconds, 2 s after that answer; with LATE=1 also
over IDLE seconds from 80 s after it (past the first periodic snapshots).
usage: namespaces.py ACTORKVD N DATADIR [IDLE]   (DATADIR is removed first)"""
import os, socket, subprocess, sys, time, shutil, signal

BIN, N, DATA = sys.argv[1], int(sys.argv[2]), sys.argv[3]
IDLE = float(sys.argv[4]) if len(sys.argv) > 4 else 20
SOCK = DATA + ".sock"
LOG = DATA + ".log"
TICKS = os.sysconf("SC_CLK_TCK")

def start():
    if os.path.exists(SOCK): os.unlink(SOCK)
    f = open(LOG, "a")
    return subprocess.Popen([BIN, "--socket", SOCK, "--data-dir", DATA, "--max-namespaces", str(N + 100), "--max-clients", "256"], stdout=f, stderr=f)

def wait_ping(p, limit=600):
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        if p.poll() is not None: raise SystemExit("server exited %s" % p.returncode)
        try:
            s = socket.socket(socket.AF_UNIX); s.connect(SOCK); s.sendall(b"PING\r\n")
            r = s.recv(100); s.close()
            if r.startswith(b"+PONG"): return time.monotonic() - t0
        except OSError: pass
        time.sleep(0.01)
    raise SystemExit("no PING answer")

def cpu(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICKS

def stop(p):
    p.send_signal(signal.SIGTERM); p.wait(600)
    assert p.returncode == 0, p.returncode

shutil.rmtree(DATA, ignore_errors=True)
t0 = time.monotonic()
p = start(); wait_ping(p)
s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
batch = 500
created0 = time.monotonic()
for start_i in range(0, N, batch):
    msg = b"".join(b"PUT ns%d k v\r\n" % i for i in range(start_i, min(N, start_i + batch)))
    s.sendall(msg)
    want = min(N, start_i + batch) - start_i
    buf = b""
    while buf.count(b"\r\n") < want:
        d = s.recv(65536)
        if not d: raise SystemExit("closed")
        buf += d
    if b"-" in buf: raise SystemExit(buf[buf.index(b"-"):][:300])
create = time.monotonic() - created0
s.close()
stop(p)
p = start(); ready = wait_ping(p)
time.sleep(2)
c0, w0 = cpu(p.pid), time.monotonic()
time.sleep(IDLE)
c1, w1 = cpu(p.pid), time.monotonic()
late = ""
if os.environ.get("LATE"):
    time.sleep(max(0, 80 - (w1 - w0) - 2))
    c2, w2 = cpu(p.pid), time.monotonic()
    time.sleep(IDLE)
    c3, w3 = cpu(p.pid), time.monotonic()
    late = " idle_cpu_80s_after_ready=%.1f%% (%.2fs CPU in %.1fs)" % (100 * (c3 - c2) / (w3 - w2), c3 - c2, w3 - w2)
stop(p)
print("N=%d create=%.2fs restart_to_PONG=%.2fs idle_cpu=%.1f%% of a core (%.2fs CPU in %.1fs)%s" % (N, create, ready, 100 * (c1 - c0) / (w1 - w0), c1 - c0, w1 - w0, late))
