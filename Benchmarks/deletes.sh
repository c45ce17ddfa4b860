#!/usr/bin/env bash
# Server CPU per DEL of a key that exists, for HOTPATHS.md (Benchmarks/cpu.sh BIN DEL measures
# DELs of random keys, most of them gone already).
#
# Usage: Benchmarks/deletes.sh ACTORKVD [KEYS]
#
# Starts ACTORKVD on a fresh temp directory with automatic compaction off, PUTs KEYS (default
# 500000) keys with 100-byte values in a scattered order, then DELs each of them once, in another
# scattered order, through `redis-cli --pipe`, and prints the server's utime+stime per DEL (from
# /proc/PID/stat) and the keys left (0). Needs redis-cli (redis-tools) and python3. Asserts
# nothing: it is a measuring tool.
set -euo pipefail
BIN=$1 KEYS=${2:-500000}
DIR=$(mktemp -d /tmp/actorkv-deletes.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
"$BIN" --socket "$DIR/s.sock" --data-dir "$DIR/data" --compact-min-bytes 100000000000 2>"$DIR/log" &
PID=$!
for _ in $(seq 1 100); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
# requests.py COMMAND STRIDE: one request per key, key:((i * STRIDE) mod KEYS), as RESP.
cat >"$DIR/requests.py" <<'PY'
import sys
command, stride, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
out = sys.stdout.buffer
for i in range(keys):
    key = b"key:%d" % ((i * stride) % keys)
    if command == "PUT":
        out.write(b"*4\r\n$3\r\nPUT\r\n$5\r\nbench\r\n$%d\r\n%s\r\n$100\r\n%s\r\n" % (len(key), key, b"v" * 100))
    else:
        out.write(b"*3\r\n$3\r\nDEL\r\n$5\r\nbench\r\n$%d\r\n%s\r\n" % (len(key), key))
PY
python3 "$DIR/requests.py" PUT 7919 "$KEYS" | redis-cli -s "$DIR/s.sock" --pipe >/dev/null
python3 "$DIR/requests.py" DEL 104729 "$KEYS" >"$DIR/dels"
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
t0=$(ticks)
redis-cli -s "$DIR/s.sock" --pipe <"$DIR/dels" >/dev/null
t1=$(ticks)
left=$(redis-cli -s "$DIR/s.sock" HLEN bench)
awk -v a="$t0" -v b="$t1" -v n="$KEYS" -v hz="$(getconf CLK_TCK)" -v left="$left" \
    'BEGIN {printf "DEL of a key that exists: %.2f us CPU/request, %d keys left\n", (b - a) * 1e6 / hz / n, left}'
