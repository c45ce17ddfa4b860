#!/usr/bin/env bash
# Lock acquire + release (issue #20): two actorkvd builds and Redis, alternating, each on a fresh
# server: locks per second and the server's CPU per lock (utime+stime from /proc/PID/stat).
#
# Usage: Benchmarks/lock.sh BUILD_A BUILD_B [ROUNDS] [CLIENTS] [SHARED] [WAIT]
#   ROUNDS (default 3) rounds of A, B and Redis; CLIENTS (default 10) threads of
#   `actorkv-bench lock` for 3 s each; SHARED yes (default: all on one lock) or no (a lock
#   each); WAIT spin (default: a refused acquire is retried at once, as against Redis) or
#   changes (ActorKV waits for the key's delete on CHANGES; Redis is then not run).
#   BENCH=path to actorkv-bench (default: .build-bench/release/actorkv-bench).
# ActorKV: PUT locks job <owner> IFVERSION 0 EPHEMERAL, then BATCH … IFVERSION job <token> DEL job;
# Redis 7: SET job <owner> NX PX 30000, then DEL job (AOF, appendfsync everysec, as actorkvd's
# default fsync). Prints each run; asserts nothing (the benchmark itself fails if two clients
# ever hold the lock together).
set -euo pipefail
A=$1 B=$2 ROUNDS=${3:-3} CLIENTS=${4:-10} SHARED=${5:-yes} WAIT=${6:-spin}
top=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$top/.build-bench/release/actorkv-bench}
WORK=$(mktemp -d /tmp/actorkv-lock.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

run() {  # label server(path|redis)
    local dir pid target out
    dir=$(mktemp -d "$WORK/r.XXXXXX")
    if [ "$2" = redis ]; then
        redis-server --port 0 --unixsocket "$dir/s.sock" --dir "$dir" --appendonly yes --appendfsync everysec \
            --save '' >/dev/null 2>&1 &
        target=redis
    else
        "$2" --socket "$dir/s.sock" --data-dir "$dir/data" 2>"$dir/log" &
        target=akv
    fi
    pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    local t0 t1
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$("$BENCH" lock --socket "$dir/s.sock" --target $target --clients "$CLIENTS" --seconds 3 --shared "$SHARED" \
        --wait "$WAIT" 2>&1 | grep '^lock')
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    local n lps refused
    n=$(sed 's/.*acquired=\([0-9]*\).*/\1/' <<<"$out")
    lps=$(sed 's/.*locks_per_s=\([0-9]*\).*/\1/' <<<"$out")
    refused=$(sed 's/.*refused=\([0-9]*\).*/\1/' <<<"$out")
    awk -v l="$1" -v lps="$lps" -v r="$refused" -v n="$n" -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" \
        'BEGIN {printf "%s: %d locks/s, %.1f refused acquires per lock, %.1f us server CPU per lock\n", l, lps, r / n, (b - a) * 1e6 / hz / n}'
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
}

for _ in $(seq 1 "$ROUNDS"); do
    run "A $(basename "$A")" "$A"
    run "B $(basename "$B")" "$B"
    if [ "$WAIT" = spin ]; then run "redis" redis; fi
done
