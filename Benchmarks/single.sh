#!/usr/bin/env bash
# One client sending one request at a time: actorkvd builds and Redis, alternating, each on a
# fresh server. `redis-benchmark -c 1 -n N` GETs of one key; prints requests/s, the server's CPU
# per request (utime+stime from /proc/PID/stat, then each apart: its own code, the kernel's on
# its behalf) and the server's context switches per request
# (all threads, voluntary and not, from /proc/PID/task/*/status): at about one per request the
# loop sleeps only to wait for the next request.
#
# Usage: Benchmarks/single.sh ROUNDS N BUILD...
# Asserts nothing: it is a measuring tool.
set -euo pipefail
ROUNDS=$1 N=$2
shift 2
WORK=$(mktemp -d /tmp/actorkv-single.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

switches() { cat /proc/"$1"/task/*/status | awk '/^(voluntary|nonvoluntary)_ctxt_switches/ {s += $2} END {print s}'; }

run() {  # build path or "redis"
    local dir pid ns t0 t1 u0 u1 c0 c1 rps
    dir=$(mktemp -d "$WORK/r.XXXXXX")
    if [ "$1" = redis ]; then
        redis-server --port 0 --unixsocket "$dir/s.sock" --dir "$dir" --appendonly yes --appendfsync everysec \
            --save '' >/dev/null 2>&1 &
        ns=()
    else
        "$1" --socket "$dir/s.sock" --data-dir "$dir/data" 2>"$dir/log" &
        ns=(bench)
    fi
    pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    if [ "$1" = redis ]; then redis-cli -s "$dir/s.sock" SET key:1 v >/dev/null; else redis-cli -s "$dir/s.sock" PUT bench key:1 v >/dev/null; fi
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat"); u0=$(awk '{print $14}' "/proc/$pid/stat"); c0=$(switches $pid)
    rps=$(redis-benchmark -s "$dir/s.sock" -c 1 -n "$N" -q GET "${ns[@]}" key:1 | tr '\r' '\n' | grep 'requests per second' | tail -1 |
        sed 's/.*: \([0-9.]*\) requests.*/\1/')
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat"); u1=$(awk '{print $14}' "/proc/$pid/stat"); c1=$(switches $pid)
    awk -v l="$(basename "$1")" -v r="$rps" -v a="$t0" -v b="$t1" -v u="$u0" -v v="$u1" -v x="$c0" -v y="$c1" -v n="$N" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "%s: %d requests/s, %.1f us server CPU per request (user %.1f, system %.1f), %.2f context switches per request\n",
                l, r, (b - a) * 1e6 / hz / n, (v - u) * 1e6 / hz / n, ((b - a) - (v - u)) * 1e6 / hz / n, (y - x) / n}'
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
}

for _ in $(seq 1 "$ROUNDS"); do
    for build in "$@" redis; do run "$build"; done
done
