#!/usr/bin/env bash
# Throughput and memory while 1M keys expire (issue #20): ActorKV against Redis, each with the
# keys' deadlines (PX) and without them.
#
# Usage: Benchmarks/expiry.sh [ROUNDS] [KEYS] [SPREAD_MS]
#   ACTORKVD=path (default .build-bench/release/actorkvd), BENCH=path (actorkv-bench, same dir),
#   TARGETS="akv redis" (the default; "akv" alone to compare ActorKV builds)
#
# Each run: a fresh server (ActorKV --fsync everysec; Redis --appendonly yes --appendfsync
# everysec), 100,000 persistent keys key:… written by redis-benchmark, then KEYS (default 1M)
# keys exp:… of 100-byte values loaded with redis-cli --pipe, each with PX drawn from
# 1..SPREAD_MS (default 10000) in the "px" mode and without in the "none" mode. Right after the
# load: redis-benchmark -c 50 -r 100000 -P 16 GET, then PUT, of the key:… keys (about 3 s each,
# inside the expiry window), VmRSS sampled every 0.5 s until SPREAD_MS + 3 s after the load,
# then the keys left with a deadline (INFO). Modes and servers alternate, ROUNDS (default 2)
# times; medians printed. Asserts nothing: it is a measuring tool (it fails only if a step does).
set -euo pipefail
ROUNDS=${1:-2} KEYS=${2:-1000000} SPREAD=${3:-10000}
top=$(cd "$(dirname "$0")/.." && pwd)
ACTORKVD=${ACTORKVD:-$top/.build-bench/release/actorkvd}
BENCH=${BENCH:-$(dirname "$ACTORKVD")/actorkv-bench}
TARGETS=${TARGETS:-akv redis}
V=$(printf 'v%.0s' $(seq 1 100))
WORK=$(mktemp -d "$top/Benchmarks/out.expiry.XXXXXX")   # on the repository's disk, as run.sh
SOCKS=$(mktemp -d /tmp/akvx.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK" "$SOCKS"' EXIT

for target in $TARGETS; do
    "$BENCH" gen-resp --target $target --keys "$KEYS" --prefix exp: --px-spread "$SPREAD" --out "$WORK/$target-px.resp"
    "$BENCH" gen-resp --target $target --keys "$KEYS" --prefix exp: --out "$WORK/$target-none.resp"
done

rss() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
rps() {  # socket n command...
    local sock=$1 n=$2; shift 2
    redis-benchmark -s "$sock" -c 50 -n "$n" -r 100000 -P 16 -q "$@" 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}
ms_now() { date +%s%3N; }

# one TARGET MODE: prints "get_rps put_rps rss_loaded_kib rss_peak_kib rss_end_kib left"
one() {
    local target=$1 mode=$2 dir pid sock
    dir=$(mktemp -d "$WORK/s.XXXXXX"); sock="$SOCKS/$target.sock"; rm -f "$sock"
    if [ "$target" = akv ]; then
        "$ACTORKVD" --socket "$sock" --data-dir "$dir" --fsync everysec 2>"$dir/log" &
        pid=$!
    else
        redis-server --port 0 --unixsocket "$sock" --unixsocketperm 700 --appendonly yes --appendfsync everysec \
            --save '' --dir "$dir" --logfile "$dir/log" &
        pid=$!
    fi
    for _ in $(seq 1 200); do [ -S "$sock" ] && break; sleep 0.05; done
    local put=(PUT bench) get=(GET bench) info=(INFO)
    [ "$target" = redis ] && put=(SET) get=(GET) info=(INFO keyspace)
    redis-benchmark -s "$sock" -c 50 -n 200000 -r 100000 -P 16 -q "${put[@]}" key:__rand_int__ "$V" >/dev/null 2>&1
    redis-cli -s "$sock" --pipe <"$WORK/$target-$mode.resp" >"$dir/pipe.out"
    grep -q 'errors: 0' "$dir/pipe.out" || { cat "$dir/pipe.out" >&2; exit 1; }
    local loaded; loaded=$(ms_now)
    local rss_loaded; rss_loaded=$(rss $pid)
    ( peak=0; while [ $(( $(ms_now) - loaded )) -lt $((SPREAD + 3000)) ]; do
          r=$(rss $pid); [ "$r" -gt "$peak" ] && peak=$r; sleep 0.5; done; echo "$peak" >"$dir/peak" ) &
    local sampler=$!
    local g p
    g=$(rps "$sock" 2000000 "${get[@]}" key:__rand_int__)
    p=$(rps "$sock" 1500000 "${put[@]}" key:__rand_int__ "$V")
    wait $sampler
    local left
    if [ "$target" = akv ]; then
        left=$(redis-cli -s "$sock" INFO | tr -d '\r' | sed -n 's/.*expiring_keys=\([0-9]*\).*/\1/p' | head -1)
    else
        left=$(redis-cli -s "$sock" INFO keyspace | tr -d '\r' | sed -n 's/.*expires=\([0-9]*\).*/\1/p' | head -1)
    fi
    echo "$g $p $rss_loaded $(cat "$dir/peak") $(rss $pid) ${left:-0}"
    kill $pid; wait $pid 2>/dev/null || true
    rm -rf "$dir"
}

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A col
for r in $(seq 1 "$ROUNDS"); do
    for target in $TARGETS; do
        for mode in none px; do
            line=$(one $target $mode)
            echo "round $r $target $mode: get_rps put_rps rss_loaded_kib rss_peak_kib rss_end_kib left_with_deadline = $line" >&2
            read -r g p rl rp re left <<<"$line"
            for f in g p rl rp re left; do col[$target-$mode-$f]="${col[$target-$mode-$f]:-} ${!f}"; done
        done
    done
done
echo "medians of $ROUNDS round(s), $KEYS keys expiring over $SPREAD ms (none: the same keys without PX):"
printf '%-11s %10s %10s %12s %12s %12s %10s\n' server GET/s PUT/s "RSS loaded" "RSS peak" "RSS end" "left"
for target in $TARGETS; do for mode in none px; do
    m() { median ${col[$target-$mode-$1]}; }
    printf '%-11s %10.0f %10.0f %9d MiB %9d MiB %9d MiB %10s\n' "$target-$mode" "$(m g)" "$(m p)" \
        $(( $(m rl) / 1024 )) $(( $(m rp) / 1024 )) $(( $(m re) / 1024 )) "$(m left)"
done; done
for target in $TARGETS; do
    awk -v a="$(median ${col[$target-px-g]})" -v b="$(median ${col[$target-none-g]})" \
        -v c="$(median ${col[$target-px-p]})" -v d="$(median ${col[$target-none-p]})" -v t=$target \
        'BEGIN {printf "%s: GET with expiry / without %.2f, PUT %.2f\n", t, a/b, c/d}'
done
