#!/usr/bin/env bash
# The cost of deleting expired keys (issue #20): server CPU per key the expiry sweep deletes.
#
# Usage: Benchmarks/sweep.sh ACTORKVD [KEYS] [PX_MS]
#
# Starts ACTORKVD (--fsync everysec, automatic compaction off) on a fresh temp directory, loads
# KEYS (default 500,000) keys of 100-byte values, each `PUT … PX PX_MS` (default 15,000: longer
# than the load, so that none expires before it ends), through redis-cli --pipe, then polls INFO
# until no key with a deadline is left, and prints the server's utime+stime per key deleted
# (from /proc/PID/stat, from the end of the load on) and how long the deletions took from the
# first deadline. Nothing else runs meanwhile: the sweep paces itself as with any backlog that
# no request waits behind (at most half of the time, SweepPacing), and the CPU is the sweep's.
# Needs redis-cli (redis-tools). Asserts nothing: it is a measuring tool.
set -euo pipefail
BIN=$1 KEYS=${2:-500000} PX=${3:-15000}
DIR=$(mktemp -d /tmp/actorkv-sweep.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
V=$(printf 'v%.0s' $(seq 1 100))
awk -v n="$KEYS" -v v="$V" -v px="$PX" 'BEGIN {
    for (i = 0; i < n; i++) {
        k = sprintf("exp:%09d", i)
        printf "*6\r\n$3\r\nPUT\r\n$5\r\nsweep\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n$2\r\nPX\r\n$%d\r\n%s\r\n", length(k), k, length(v), v, length(px), px
    }
}' >"$DIR/px.resp"
"$BIN" --socket "$DIR/s.sock" --data-dir "$DIR/data" --fsync everysec --compact-min-bytes 100000000000 2>"$DIR/log" &
PID=$!
for _ in $(seq 1 100); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
ticks() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
loading=$(date +%s%N)
redis-cli -s "$DIR/s.sock" --pipe <"$DIR/px.resp" | grep -q 'errors: 0'
t0=$(ticks)
left=$(redis-cli -s "$DIR/s.sock" INFO | tr ',' '\n' | sed -n 's/^expiring_keys=//p' | awk '{s += $1} END {print s + 0}')
[ "$left" = "$KEYS" ] || { echo "$left of $KEYS keys still had a deadline after the load: raise PX_MS" >&2; exit 1; }
s0=$((loading + PX * 1000000))  # the first deadline
while :; do
    left=$(redis-cli -s "$DIR/s.sock" INFO | tr ',' '\n' | sed -n 's/^expiring_keys=//p' | awk '{s += $1} END {print s + 0}')
    [ "$left" = 0 ] && break
    sleep 0.2
done
t1=$(ticks) s1=$(date +%s%N)
awk -v a="$t0" -v b="$t1" -v ms=$(( (s1 - s0) / 1000000 )) -v n="$KEYS" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%d expired keys deleted in %d ms, %.2f us of server CPU per key\n", n, ms, (b - a) * 1e6 / hz / n}'
