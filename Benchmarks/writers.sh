#!/usr/bin/env bash
# Writers' PUT throughput with watchers attached (issue #19's "within 0.8x of no watchers"):
# actorkvd builds, alternating, each on a fresh server, with W watchers and with none.
#
# Usage: Benchmarks/writers.sh ROUNDS W BUILD...
#   Per round and build: a fresh `actorkvd` (--fsync everysec); `actorkv-bench fanout --watchers W
#   --messages 0 --seconds 14 --ns hold` connects W connections following `CHANGES hold` and
#   drains them; a second later `redis-benchmark -c 50 -n 1000000 -r 100000 -P 16 PUT hold
#   key:__rand_int__ <100 B>` runs. Then the same on a fresh server with no watchers. Prints the
#   writers' PUT/s both ways, their ratio, the server's CPU per PUT both ways (utime+stime from
#   /proc/PID/stat over the redis-benchmark run, all threads), and its changes_sent and
#   followers_dropped (a watcher more than --changes-lag-bytes behind is dropped with -LAGGING).
#   BENCH=path to actorkv-bench (default: .build-bench/release/actorkv-bench).
# Asserts nothing: it is a measuring tool.
set -euo pipefail
ROUNDS=$1 W=$2
shift 2
top=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$top/.build-bench/release/actorkv-bench}
V=$(printf 'v%.0s' $(seq 1 100))
WORK=$(mktemp -d /tmp/actorkv-writers.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

run() {  # build watchers -> "PUT/s cpu_us_per_put changes_sent followers_dropped"
    local dir pid fan="" rps stats t0 t1 cpu
    dir=$(mktemp -d "$WORK/r.XXXXXX")
    "$1" --socket "$dir/s.sock" --data-dir "$dir/data" 2>"$dir/log" &
    pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    if [ "$2" != 0 ]; then
        "$BENCH" fanout --socket "$dir/s.sock" --target akv --watchers "$2" --messages 0 --seconds 14 --ns hold >"$dir/fan" 2>&1 &
        fan=$!
        sleep 1
    fi
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    rps=$(redis-benchmark -s "$dir/s.sock" -c 50 -n 1000000 -r 100000 -P 16 -q PUT hold key:__rand_int__ "$V" 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/')
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", (b - a) * 1e6 / hz / 1000000}')
    stats=$(redis-cli -s "$dir/s.sock" INFO | tr -d '\r' | grep '^ns_hold:' |
        sed 's/.*changes_sent=\([0-9]*\).*followers_dropped=\([0-9]*\).*/\1 \2/')
    [ -n "$fan" ] && { kill "$fan" 2>/dev/null || true; wait "$fan" 2>/dev/null || true; }
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
    echo "$rps $cpu $stats"
}

for _ in $(seq 1 "$ROUNDS"); do
    for build in "$@"; do
        read -r with cpuwith sent dropped < <(run "$build" "$W")
        read -r without cpuwithout _ < <(run "$build" 0)
        awk -v l="$(basename "$(dirname "$build")")/$(basename "$build")" -v w="$W" -v a="$with" -v b="$without" -v s="$sent" -v d="$dropped" \
            -v x="$cpuwith" -v y="$cpuwithout" \
            'BEGIN { printf "%s: %d PUT/s with %d watchers, %d without (%.2fx); server CPU %s us per PUT with, %s without; %d changes sent, %d watchers dropped\n", l, a, w, b, a / b, x, y, s, d }'
    done
done
