#!/usr/bin/env bash
# Change-feed fan-out (issue #19): actorkvd builds and Redis, alternating, each on a fresh server:
# one writer, W watchers. Prints delivered messages/s, the server's CPU per delivery
# (utime+stime from /proc/PID/stat over delivered messages) and the delivery latency p50/p99.
#
# Usage: Benchmarks/fanout.sh ROUNDS W N BUILD...
#   ROUNDS rounds of each BUILD and then Redis; W watchers; N messages of 100 bytes
#   (`actorkv-bench fanout --watchers W --messages N`: ActorKV PUT + CHANGES, Redis PUBLISH +
#   SUBSCRIBE, AOF with appendfsync everysec as actorkvd's default fsync).
#   PIN=yes runs every server on CPU 0 and the benchmark on CPU 1 (taskset): on a 2-core
#   machine the benchmark's own threads otherwise take turns with the server's loop, and where
#   the scheduler puts them moves delivered/s by a third either way. CPU per delivery is the
#   steadier figure.
#   RATE=R paces the writer to R writes/s (`--rate`): the latencies compared at one load that
#   both servers carry, rather than each at its own saturation (default 0: as fast as it can).
#   BENCH=path to actorkv-bench (default: .build-bench/release/actorkv-bench).
# Asserts nothing (the benchmark itself fails if a watcher misses a message).
set -euo pipefail
ROUNDS=$1 W=$2 N=$3
shift 3
top=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$top/.build-bench/release/actorkv-bench}
WORK=$(mktemp -d /tmp/actorkv-fanout.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
server_cpu=() bench_cpu=()
if [ "${PIN:-no}" = yes ]; then server_cpu=(taskset -c 0) bench_cpu=(taskset -c 1); fi

run() {  # build path or "redis"
    local dir pid target out t0 t1
    dir=$(mktemp -d "$WORK/r.XXXXXX")
    if [ "$1" = redis ]; then
        "${server_cpu[@]}" redis-server --port 0 --unixsocket "$dir/s.sock" --dir "$dir" --appendonly yes \
            --appendfsync everysec --save '' --maxclients 10000 >/dev/null 2>&1 &
        target=redis
    else
        "${server_cpu[@]}" "$1" --socket "$dir/s.sock" --data-dir "$dir/data" 2>"$dir/log" &
        target=akv
    fi
    pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    t0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    out=$("${bench_cpu[@]}" "$BENCH" fanout --socket "$dir/s.sock" --target $target --watchers "$W" --messages "$N" \
        --ns "fan$W" --rate "${RATE:-0}" 2>&1 | grep '^fanout')
    t1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
    awk -v l="$(basename "$1")" -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" -v w="$W" '{
        for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        printf "%s W=%d: %d delivered/s, %.2f us server CPU per delivery, latency p50 %d us, p99 %d us\n",
            l, w, v["delivered_per_s"], (b - a) * 1e6 / hz / v["delivered"], v["lat_p50_us"], v["lat_p99_us"] }' <<<"$out"
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
}

for _ in $(seq 1 "$ROUNDS"); do
    for build in "$@" redis; do run "$build"; done
done
