#!/usr/bin/env bash
# Two actorkvd builds measured at the same time, for before-and-after figures on a noisy machine:
# both servers are loaded at once by two redis-benchmark runs, so whatever else the machine does
# slows both alike, and the ratio of their server CPU per request is steadier than figures taken
# one after the other (Benchmarks/cpu.sh, ab.sh).
#
# Usage: Benchmarks/duo.sh OLD_ACTORKVD NEW_ACTORKVD [ROUNDS] [CLIENTS] [PIPELINE] [REQUESTS] [PUT|GET]
#   ROUNDS (default 4) fresh pairs of servers; each round: 100,000 keys of 100-byte values
#   filled into each, then REQUESTS (default 200000) PUTs or GETs (default GET) with
#   redis-benchmark -c CLIENTS (default 50) -P PIPELINE (default 1) -r 100000 against both at
#   once, the server's utime+stime per request from /proc/PID/stat. Automatic compaction off.
# Prints each round's CPU per request of both and NEW/OLD, then the median NEW/OLD. Asserts
# nothing: it is a measuring tool. With 2 cores the two servers and two clients compete: a
# turn then holds fewer requests than on an idle machine, so compare ratios, not absolute figures.
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-4} CLIENTS=${4:-50} PIPELINE=${5:-1} REQUESTS=${6:-200000} COMMAND=${7:-GET}
case "$COMMAND" in PUT | GET) ;; *) echo "duo.sh: the command is PUT or GET, not $COMMAND" >&2; exit 2 ;; esac
command -v redis-benchmark >/dev/null || { echo "duo.sh: needs redis-benchmark (redis-tools)" >&2; exit 2; }
V=$(printf 'v%.0s' $(seq 1 100))
WORK=$(mktemp -d /tmp/actorkv-duo.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
load() {  # socket count -> runs the measured load
    if [ "$COMMAND" = PUT ]; then
        redis-benchmark -s "$1" -c "$CLIENTS" -n "$2" -r 100000 -P "$PIPELINE" -q PUT bench key:__rand_int__ "$V"
    else
        redis-benchmark -s "$1" -c "$CLIENTS" -n "$2" -r 100000 -P "$PIPELINE" -q GET bench key:__rand_int__
    fi >/dev/null 2>&1
}

ratios=()
for round in $(seq 1 "$ROUNDS"); do
    dir=$(mktemp -d "$WORK/r.XXXXXX")
    "$OLD" --socket "$dir/old.sock" --data-dir "$dir/old" --compact-min-bytes 100000000000 2>/dev/null &
    old_pid=$!
    "$NEW" --socket "$dir/new.sock" --data-dir "$dir/new" --compact-min-bytes 100000000000 2>/dev/null &
    new_pid=$!
    for _ in $(seq 1 200); do [ -S "$dir/old.sock" ] && [ -S "$dir/new.sock" ] && break; sleep 0.05; done
    for side in old new; do
        redis-benchmark -s "$dir/$side.sock" -c 50 -n 100000 -r 100000 -P 16 -q PUT bench key:__rand_int__ "$V" >/dev/null 2>&1
    done
    old0=$(cpu $old_pid) new0=$(cpu $new_pid)
    load "$dir/old.sock" "$REQUESTS" & old_job=$!
    load "$dir/new.sock" "$REQUESTS" & new_job=$!
    wait $old_job; old1=$(cpu $old_pid)
    wait $new_job; new1=$(cpu $new_pid)
    line=$(awk -v a0="$old0" -v a1="$old1" -v b0="$new0" -v b1="$new1" -v n="$REQUESTS" -v t="$(getconf CLK_TCK)" 'BEGIN {
        old = (a1 - a0) * 1e6 / t / n; new = (b1 - b0) * 1e6 / t / n
        printf "%.2f %.2f %.3f", old, new, (old > 0 ? new / old : 0) }')
    read -r old_us new_us ratio <<<"$line"
    echo "round $round: $COMMAND -c $CLIENTS -P $PIPELINE: old $old_us µs, new $new_us µs of server CPU per request, new/old $ratio"
    ratios+=("$ratio")
    kill $old_pid $new_pid; wait $old_pid $new_pid 2>/dev/null || true
    rm -rf "$dir"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{ r[NR] = $1 } END {
    m = (NR % 2) ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
    printf "median new/old of %d rounds: %.3f\n", NR, m }'
