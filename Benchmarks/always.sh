#!/usr/bin/env bash
# Writes under an fsync before every acknowledgement: two actorkvd binaries and Redis, for
# before-and-after figures in HOTPATHS.md.
#
# Usage: Benchmarks/always.sh OLD_ACTORKVD NEW_ACTORKVD [ROUNDS]
#
# Each round runs OLD, NEW (`--fsync always`) and redis-server (`appendfsync always`) in turn,
# each on a fresh data directory under Benchmarks/out (the repository's disk: /tmp may be a
# tmpfs, where fsync costs nothing), warmed with one write, then redis-benchmark PUT/SET with
# 100-byte values at -c 1 (-n 2000) and -c 50 (-n 20000). Prints the median requests per second
# of ROUNDS rounds (default 5) and every round's figure. Needs redis-benchmark and redis-server.
# Asserts nothing: it is a measuring tool.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-5}
V=$(printf 'v%.0s' $(seq 1 100))
mkdir -p "$(dirname "$0")/out"
WORK=$(mktemp -d "$(cd "$(dirname "$0")" && pwd)/out/always.XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

# rps WHO CLIENTS N: one run against a fresh server (WHO is old, new or redis).
rps() {
    local who=$1 c=$2 n=$3 dir; dir=$(mktemp -d "$WORK/s.XXXXXX")
    local cmd=(PUT bench "key:__rand_int__" "$V") warm=(PUT bench warm up)
    case $who in
        old|new) local bin=$OLD; [ "$who" = new ] && bin=$NEW
                 "$bin" --socket "$dir/s.sock" --data-dir "$dir/data" --fsync always 2>"$dir/log" & ;;
        redis) mkdir -p "$dir/data"; cmd=(SET "key:__rand_int__" "$V"); warm=(SET warm up)
               redis-server --port 0 --unixsocket "$dir/s.sock" --unixsocketperm 700 --appendonly yes \
                   --appendfsync always --save '' --dir "$dir/data" >"$dir/log" 2>&1 & ;;
    esac
    local pid=$!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
    redis-cli -s "$dir/s.sock" "${warm[@]}" >/dev/null
    redis-benchmark -s "$dir/s.sock" -c "$c" -n "$n" -r 100000 -P 1 -q "${cmd[@]}" 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

declare -A all
for _ in $(seq 1 "$ROUNDS"); do
    for who in old new redis; do
        all[$who-1]+="$(rps "$who" 1 2000) "
        all[$who-50]+="$(rps "$who" 50 20000) "
    done
done
for c in 1 50; do
    for who in old new redis; do
        # shellcheck disable=SC2086
        printf '%-6s -c %-3s median %10.0f rps   (%s)\n' "$who" "$c" "$(median ${all[$who-$c]})" "${all[$who-$c]% }"
    done
done
