#!/usr/bin/env bash
# Server-side cost per request of one actorkvd binary, for HOTPATHS.md: CPU time and (when
# perf can probe glibc) malloc calls per request. Less sensitive to a noisy shared machine than
# requests per second, since it does not count the time the server waits for the CPU.
#
# Usage: Benchmarks/cpu.sh ACTORKVD GET|PUT|INCR|HSET|HGET|DEL|BATCH [REQUESTS] [PIPELINE] [mallocs]
#
# Starts ACTORKVD on a fresh temp directory with automatic compaction off (or with the flags in
# ACTORKVD_FLAGS instead, when that is set: ACTORKVD_FLAGS= keeps the defaults), fills 100,000 keys with
# 100-byte values, then runs REQUESTS (default 600000) GETs, PUTs, INCRs (of 100,000 counters),
# HSETs and HGETs of the same keys (a namespace is a hash), DELs of them (most of which find the
# key already gone once the first hundred thousand have run), or BATCHes of an INCR and a PUT
# (the write planner's path for a batch that reads before it writes, which MULTI/EXEC takes too)
# with redis-benchmark -c 50
# -r 100000 -P PIPELINE (default 16) and prints the server's utime+stime per request (from
# /proc/PID/stat). With `mallocs` as the fifth argument it counts malloc calls per request
# instead (a uprobe per call slows the server several times over, so the CPU figure of such a
# run is not printed). With CPU_LIFETIME=1, one more key of the namespace gets a deadline an hour
# away (PX) before the run: the cost a namespace with some key's lifetime puts on the others.
# Needs redis-benchmark (redis-tools); counting mallocs needs perf and a probe:
#   perf probe -x /usr/lib/x86_64-linux-gnu/libc.so.6 malloc
# Asserts nothing: it is a measuring tool.
set -euo pipefail
BIN=$1 CMD=$2 N=${3:-600000} P=${4:-16} MODE=${5:-cpu}
V=$(printf 'v%.0s' $(seq 1 100))
DIR=$(mktemp -d /tmp/actorkv-cpu.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT

read -r -a flags <<<"${ACTORKVD_FLAGS---compact-min-bytes 100000000000}"
"$BIN" --socket "$DIR/s.sock" --data-dir "$DIR/data" "${flags[@]}" 2>"$DIR/log" &
PID=$!
for _ in $(seq 1 100); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
redis-benchmark -s "$DIR/s.sock" -c 50 -n 200000 -r 100000 -P 16 -q PUT bench key:__rand_int__ "$V" >/dev/null 2>&1
if [ "${CPU_LIFETIME:-0}" = 1 ]; then
    [ "$(redis-cli -s "$DIR/s.sock" PUT bench lifetime:key v PX 3600000)" = OK ] || { echo "PUT … PX failed" >&2; exit 1; }
fi
case $CMD in
    GET) args=(GET bench key:__rand_int__) ;;
    PUT) args=(PUT bench key:__rand_int__ "$V") ;;
    INCR) args=(INCR bench counter:__rand_int__) ;;
    HSET) args=(HSET bench key:__rand_int__ "$V") ;;
    HGET) args=(HGET bench key:__rand_int__) ;;
    DEL) args=(DEL bench key:__rand_int__) ;;
    BATCH) args=(BATCH bench INCR counter:__rand_int__ 1 PUT key:__rand_int__ "$V") ;;
    *) echo "usage: $0 ACTORKVD GET|PUT|INCR|HSET|HGET|DEL|BATCH [REQUESTS] [PIPELINE]" >&2; exit 2 ;;
esac

probe=no
if [ "$MODE" = mallocs ]; then
    perf probe -l 2>/dev/null | grep -q 'probe_libc:malloc' || { echo "no probe_libc:malloc: see the usage" >&2; exit 2; }
    probe=yes
    perf stat -e probe_libc:malloc -p "$PID" -o "$DIR/stat" -- sleep 3600 2>/dev/null &
    STAT=$!
    sleep 0.3
fi
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
t0=$(ticks)
rps=$(redis-benchmark -s "$DIR/s.sock" -c 50 -n "$N" -r 100000 -P "$P" -q "${args[@]}" 2>&1 |
    tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/')
t1=$(ticks)
hz=$(getconf CLK_TCK)
line=$(awk -v a="$t0" -v b="$t1" -v n="$N" -v hz="$hz" -v r="$rps" \
    'BEGIN {printf "%s -P %s: %.2f us CPU/request (%s rps)", "'"$CMD"'", "'"$P"'", (b - a) * 1e6 / hz / n, r}')
if [ $probe = yes ]; then
    pkill -P "$STAT" sleep 2>/dev/null || true  # perf stat reports when its workload ends
    wait "$STAT" 2>/dev/null || true
    line="$CMD -P $P: $(awk -v n="$N" '/probe_libc:malloc/ {gsub(",", "", $1); printf "%.2f mallocs/request", $1 / n}' "$DIR/stat")"
fi
compactions=$(grep -c 'snapshot of' "$DIR/log" || true)
echo "$line, $compactions compactions"
