#!/usr/bin/env bash
# Cluster mode (issue #23): actorkvd as a local agent in front of a 3-member etcd cluster,
# against a client talking to etcd's v3 JSON gateway directly, on one cluster in one run.
#
# Usage: Benchmarks/cluster.sh [--quick] [--ops N]
#   ACTORKVD=path   use this actorkvd instead of building one (swift build -c release
#                   --product actorkvd --build-path .build-bench)
#   --ops N         sequential round trips per operation and side (default 2000; --quick: 200)
#
# 1. Benchmarks/cluster_bench.py: one client, sequential PUT, GET and guarded write (PUT …
#    IFVERSION against /v3/kv/txn comparing mod_revision), agent and direct in alternating blocks;
#    ops/s, p50/p99 latency and the agent's overhead.
# 2. redis-benchmark against the agent: PUT and GET (-r 10000, 16-byte values) at -c 50 -P 16,
#    -c 50 -P 1 and -c 1 -P 1 (how far concurrency helps), -n 20000 (--quick: 2000); requests/s.
# The cluster (Tests/Cluster/etcd-cluster.sh, client ports 24790-24792) and the agent
# (--etcd-prefix bench/) run in a temp directory and are stopped on exit, even on failure.
# Exits non-zero if a step fails or any reply is an error; asserts nothing about timings.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=() OPS=() N=20000 BASE=24790
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=(--quick) N=2000 ;;
        --ops) OPS=(--ops "${2:?--ops needs a number}"); shift ;;
        *) echo "usage: $0 [--quick] [--ops N]" >&2; exit 2 ;;
    esac
    shift
done
[ -x /opt/swift/usr/bin/swift ] && PATH=$PATH:/opt/swift/usr/bin
if [ -z "${ACTORKVD:-}" ]; then
    (cd "$ROOT" && swift build -c release --product actorkvd --build-path .build-bench) >&2
    ACTORKVD=$ROOT/.build-bench/release/actorkvd
fi
for port in $BASE $((BASE + 1)) $((BASE + 2)) $((BASE + 10)) $((BASE + 11)) $((BASE + 12)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then echo "cluster.sh: port $port is in use" >&2; exit 1; fi
done

WORK=$(mktemp -d /tmp/akv-cluster-bench.XXXXXX)
AGENT=""
cleanup() {
    if [ -n "$AGENT" ]; then kill "$AGENT" 2>/dev/null || true; wait "$AGENT" 2>/dev/null || true; fi
    "$ROOT/Tests/Cluster/etcd-cluster.sh" stop "$WORK/etcd" || true
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
fail() { echo "cluster.sh: $*" >&2; exit 1; }

LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
EP=$("$ROOT/Tests/Cluster/etcd-cluster.sh" start "$WORK/etcd" "$BASE")
SOCK=$WORK/agent.sock
"$ACTORKVD" --socket "$SOCK" --data-dir "$WORK/data" --etcd "$EP" --etcd-prefix bench/ 2>"$WORK/agent.log" &
AGENT=$!
for _ in $(seq 1 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ "$(redis-cli -s "$SOCK" PING 2>&1)" = PONG ] || fail "the agent did not answer PING: $(cat "$WORK/agent.log")"

# 1. Sequential round trips.
SEQ=$(python3 "$ROOT/Benchmarks/cluster_bench.py" --socket "$SOCK" --etcd "${EP%%,*}" --prefix bench/ \
    "${QUICK[@]}" "${OPS[@]}") || fail "cluster_bench.py failed"

# 2. Throughput through the agent (redis-benchmark 7 stops at an error reply and prints it).
V=xxxxxxxxxxxxxxxx
rps() {  # clients pipeline command...
    local c=$1 p=$2 out; shift 2
    out=$(redis-benchmark -s "$SOCK" -n "$N" -c "$c" -r 10000 -P "$p" -q "$@" 2>&1 | tr '\r' '\n') ||
        fail "redis-benchmark $*: $out"
    ! grep -qi 'error' <<<"$out" || fail "redis-benchmark $*: $(grep -i -m 3 error <<<"$out")"
    grep 'requests per second' <<<"$out" | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}
TP="| redis-benchmark through the agent (-r 10000, -n $N, 16-byte values) | requests/s |
| --- | ---: |"
for cp in "50 16" "50 1" "1 1"; do
    for cmd in PUT GET; do
        args=(PUT bench key:__rand_int__ "$V"); [ $cmd = GET ] && args=(GET bench key:__rand_int__)
        r=$(rps ${cp% *} ${cp#* } "${args[@]}")
        [ -n "$r" ] || fail "no result from redis-benchmark -c ${cp% *} -P ${cp#* } ${args[*]}"
        TP+=$'\n'"| \`${args[*]}\`, -c ${cp% *} -P ${cp#* } | $(printf '%.0f' "$r") |"
    done
done
# The agent's writes are in etcd under the prefix.
landed=$(curl -sf "${EP%%,*}/v3/kv/range" -d "{\"key\": \"$(printf bench/bench/key: | base64)\",
    \"range_end\": \"$(printf 'bench/bench/key;' | base64)\", \"count_only\": true}" |
    python3 -c 'import json, sys; print(json.load(sys.stdin).get("count", 0))')
[ "$landed" -gt 0 ] || fail "no key:… key in etcd after the PUT runs"

echo "etcd $(etcd --version | head -1 | cut -d' ' -f3), 3 members on 127.0.0.1 ($EP); actorkvd $ACTORKVD;" \
    "commit $(git -C "$ROOT" rev-parse --short HEAD); $landed key:… keys in etcd after the PUT runs;" \
    "load average at start $LOAD0, at end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "$SEQ"
echo
echo "$TP"
