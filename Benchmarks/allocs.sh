#!/usr/bin/env bash
# Where a request's allocations come from: every malloc call of one actorkvd while it serves a
# workload, grouped by the first ActorKV function on its stack (and the standard-library call
# just below it), per operation. Counts, not times, so a noisy shared machine does not move them.
#
# Usage: Benchmarks/allocs.sh ACTORKVD lock [CLIENTS]                      # lock acquire + release
#        Benchmarks/allocs.sh ACTORKVD GET|PUT|INCR [CLIENTS] [PIPELINE] [N] # redis-benchmark
#   lock: `actorkv-bench lock --clients CLIENTS --shared no` for 2 s (default 1 client), counted
#   per lock (two requests); GET/PUT/INCR: `redis-benchmark -c CLIENTS -P PIPELINE -n N`
#   (defaults 1, 1, 20000) on 1,000 keys with 100-byte values (INCR: 1,000 counters), counted
#   per request.
#   BENCH=path to actorkv-bench (default: .build-bench/release/actorkv-bench); TOP=rows (25).
# Needs perf, python3 and a uprobe on glibc's malloc, added once with
#   perf probe -x /usr/lib/x86_64-linux-gnu/libc.so.6 malloc
# (Swift allocates through malloc; Redis links jemalloc, so it is not counted this way.)
set -euo pipefail
BIN=$1 WORKLOAD=$2 CLIENTS=${3:-1} PIPELINE=${4:-1} N=${5:-20000}
top=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$top/.build-bench/release/actorkv-bench}
perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc' || { echo "no probe_libc:malloc: see the usage" >&2; exit 2; }
DIR=$(mktemp -d /tmp/actorkv-allocs.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
"$BIN" --socket "$DIR/s.sock" --data-dir "$DIR/data" 2>"$DIR/log" &
PID=$!
for _ in $(seq 1 100); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
V=$(printf 'v%.0s' $(seq 1 100))
if [ "$WORKLOAD" != lock ]; then
    redis-benchmark -s "$DIR/s.sock" -c 10 -n 1000 -r 1000 -q PUT bench key:__rand_int__ "$V" >/dev/null
fi
perf record -e probe_libc:malloc -c 1 -g -m 4096 -p "$PID" -o "$DIR/perf.data" >/dev/null 2>&1 &
REC=$!
sleep 0.3
if [ "$WORKLOAD" = lock ]; then
    out=$("$BENCH" lock --socket "$DIR/s.sock" --target akv --clients "$CLIENTS" --shared no --seconds 2 | grep '^lock')
    ops=$(sed 's/.*acquired=\([0-9]*\).*/\1/' <<<"$out")
    unit=lock
else
    args=(GET bench key:__rand_int__)
    [ "$WORKLOAD" = PUT ] && args=(PUT bench key:__rand_int__ "$V")
    [ "$WORKLOAD" = INCR ] && args=(INCR bench counter:__rand_int__)
    redis-benchmark -s "$DIR/s.sock" -c "$CLIENTS" -P "$PIPELINE" -n "$N" -r 1000 -q "${args[@]}" >/dev/null
    ops=$N
    unit=request
fi
sleep 0.2
kill -INT $REC
wait $REC 2>/dev/null || true
lost=$(perf report -i "$DIR/perf.data" --stats 2>/dev/null | awk '/LOST_SAMPLES|LOST events/ {s += $NF} END {print s + 0}')
[ "$lost" -eq 0 ] || echo "warning: perf lost $lost samples: the counts below are low (a busy machine?)" >&2
perf script -i "$DIR/perf.data" 2>/dev/null | python3 -c '
import re, sys, collections
ops, unit, top = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ours = re.compile(r"^\$s1[0-9]ActorKV")
sites, stack, total = collections.Counter(), [], 0
def flush():
    global total
    if not stack: return
    total += 1
    i = next((i for i, f in enumerate(stack) if ours.match(f)), None)
    sites[("(outside ActorKV)", stack[-1]) if i is None else (stack[i], stack[i - 1] if i else "")] += 1
for line in sys.stdin:
    if not line.strip():
        flush(); stack = []
    elif line[0] in "\t ":
        parts = line.strip().split(" ", 1)
        if len(parts) == 2: stack.append(re.sub(r"\+0x[0-9a-f]+$", "", parts[1].split(" (")[0]))
flush()
print("%d mallocs over %d %ss (the count covers a little more than the workload): %.1f per %s" % (total, ops, unit, total / ops, unit))
for (site, below), n in sites.most_common(top):
    print("%6.2f  %s  <=  %s" % (n / ops, site, below))
' "$ops" "$unit" "${TOP:-25}" | swift demangle --simplified | sed 's/specialized //g' | cut -c1-220
