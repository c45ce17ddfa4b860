#!/usr/bin/env bash
# A/B throughput of two actorkvd binaries, for before-and-after figures in HOTPATHS.md.
#
# Usage: Benchmarks/ab.sh OLD_ACTORKVD NEW_ACTORKVD [ROUNDS]
#
# For each of PUT and GET at -P 16 and -P 1 (redis-benchmark -c 50 -r 100000, 100-byte values),
# runs OLD and NEW alternately ROUNDS times (default 3), each against a fresh server in a temp
# directory with automatic compaction off, and prints the median requests per second of each.
# Needs redis-benchmark (redis-tools). Asserts nothing: it is a measuring tool.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-3}
V=$(printf 'v%.0s' $(seq 1 100))
WORK=$(mktemp -d /tmp/actorkv-ab.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

# rps BINARY N PIPELINE COMMAND...: one redis-benchmark run against a fresh server.
rps() {
    local bin=$1 n=$2 p=$3; shift 3
    local dir; dir=$(mktemp -d "$WORK/s.XXXXXX")
    "$bin" --socket "$dir/s.sock" --data-dir "$dir/data" --compact-min-bytes 100000000000 2>"$dir/log" &
    local pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    if [ "$1" = GET ]; then  # something to read: fill the key space first
        redis-benchmark -s "$dir/s.sock" -c 50 -n 200000 -r 100000 -P 16 -q PUT bench key:__rand_int__ "$V" >/dev/null 2>&1
    fi
    redis-benchmark -s "$dir/s.sock" -c 50 -n "$n" -r 100000 -P "$p" -q "$@" 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for spec in "16 PUT" "16 GET" "1 PUT" "1 GET"; do
    set -- $spec
    p=$1 cmd=$2 n=$([ "$1" = 16 ] && echo 600000 || echo 100000)
    args=(PUT bench key:__rand_int__ "$V"); [ "$cmd" = GET ] && args=(GET bench key:__rand_int__)
    old=() new=()
    for _ in $(seq 1 "$ROUNDS"); do
        old+=("$(rps "$OLD" "$n" "$p" "${args[@]}")")
        new+=("$(rps "$NEW" "$n" "$p" "${args[@]}")")
    done
    mo=$(median "${old[@]}") mn=$(median "${new[@]}")
    printf '%s -P %-2s  old %10.0f rps  new %10.0f rps  new/old %.2f   (old: %s; new: %s)\n' \
        "$cmd" "$p" "$mo" "$mn" "$(awk -v a="$mn" -v b="$mo" 'BEGIN {print a / b}')" "${old[*]}" "${new[*]}"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
