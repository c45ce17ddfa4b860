#!/usr/bin/env bash
# The cost of one compaction (a snapshot of the whole namespace): server CPU (utime+stime from
# /proc/PID/stat) and wall time of a `COMPACT bench` after loading a RESP file of PUTs into a
# fresh actorkvd with automatic compaction off.
#
# Usage: Benchmarks/compact.sh ACTORKVD [RESP_FILE]
#   RESP_FILE: PUTs into namespace `bench` (default: 1M keys of 100-byte values made with
#   `actorkv-bench gen-resp --target akv --keys 1000000 --prefix exp:`; BENCH=path to actorkv-bench).
# Asserts nothing: it is a measuring tool.
set -euo pipefail
BIN=$1
top=$(cd "$(dirname "$0")/.." && pwd)
BENCH=${BENCH:-$top/.build-bench/release/actorkv-bench}
DIR=$(mktemp -d /tmp/actorkv-compact.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
FILE=${2:-}
if [ -z "$FILE" ]; then
    FILE=$DIR/load.resp
    "$BENCH" gen-resp --target akv --keys 1000000 --prefix exp: --out "$FILE"
fi
"$BIN" --socket "$DIR/s.sock" --data-dir "$DIR/data" --compact-min-bytes 100000000000 2>"$DIR/log" &
PID=$!
for _ in $(seq 1 100); do [ -S "$DIR/s.sock" ] && break; sleep 0.05; done
redis-cli -s "$DIR/s.sock" --pipe <"$FILE" >/dev/null
sleep 0.5
t0=$(awk '{print $14 + $15}' "/proc/$PID/stat"); s0=$(date +%s%N)
[ "$(redis-cli -s "$DIR/s.sock" COMPACT bench)" = OK ] || { echo "COMPACT failed" >&2; exit 1; }
t1=$(awk '{print $14 + $15}' "/proc/$PID/stat"); s1=$(date +%s%N)
echo "$(basename "$BIN"): COMPACT took $(( (t1 - t0) * 1000 / $(getconf CLK_TCK) )) ms of server CPU, $(( (s1 - s0) / 1000000 )) ms wall; snapshot $(du -m "$DIR/data/bench/snapshot.json" | cut -f1) MiB"
