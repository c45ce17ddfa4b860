#!/usr/bin/env bash
# An online backup of a large store, and what it costs the other clients meanwhile, for
# BENCHMARKS.md: ActorKV's BACKUP against Redis's BGSAVE (a fork writing dump.rdb).
#
# Usage: Benchmarks/backup.sh ACTORKVD|redis [KEYS]
#
# Starts ACTORKVD (or, with `redis`, redis-server without automatic saves) on a fresh temp
# directory, loads one namespace (hash) `big` of KEYS (default 1000000) keys with 100-byte values
# through `redis-cli --pipe`, then, while another client sends GETs one at a time
# (redis-benchmark -c 1 -n 100000), takes a backup: `BACKUP DIR/copy` (its reply comes once the
# copy is durable), or `BGSAVE` followed by polling INFO until the save ends. Prints the backup's
# wall time, its size on disk, the server's resident memory before and at its highest while the
# backup ran (sampled every 10 ms; for Redis the forked child's is not counted), and the other
# client's GET latency. Needs redis-cli and redis-benchmark (redis-tools), redis-server for
# `redis`, python3. Asserts nothing: it is a measuring tool.
set -euo pipefail
BIN=$1 KEYS=${2:-1000000}
DIR=$(mktemp -d /tmp/actorkv-backup.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
. "$(dirname "$0")/bighash.sh"
start_big_hash "$BIN" "$KEYS" "$DIR"
PID=$SERVER_PID
rss() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
echo "resident before: $(( $(rss) / 1024 )) MiB"
redis-benchmark -s "$S" -c 1 -n 100000 "${GET_OTHER[@]}" >"$DIR/bench" 2>/dev/null &
BENCH=$!
sleep 0.5
touch "$DIR/running"
(peak=0; while [ -e "$DIR/running" ]; do r=$(rss); [ "$r" -gt "$peak" ] && peak=$r; echo "$peak" >"$DIR/peak"; sleep 0.01; done) &
s=$(date +%s%N)
if [ "$BIN" = redis ]; then
    redis-cli -s "$S" BGSAVE >/dev/null
    sleep 0.01
    while redis-cli -s "$S" INFO persistence | grep -q 'rdb_bgsave_in_progress:1'; do sleep 0.01; done
    redis-cli -s "$S" INFO persistence | grep -q 'rdb_last_bgsave_status:ok'
    copy=$DIR/dump.rdb
else
    [ "$(redis-cli -s "$S" BACKUP "$DIR/copy")" = OK ]
    copy=$DIR/copy
fi
e=$(date +%s%N)
rm "$DIR/running"
sleep 0.05
echo "backup: $(( (e - s) / 1000000 )) ms wall, $(( $(du -sb "$copy" | cut -f1) / 1048576 )) MiB on disk"
echo "resident at its highest meanwhile: $(( $(cat "$DIR/peak") / 1024 )) MiB"
wait "$BENCH"
grep -E '^\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+' "$DIR/bench" | tail -1 |
    awk '{print "another client'"'"'s GETs (100,000, one at a time, the backup among them): avg " $1 " ms, p99 " $5 " ms, max " $6 " ms"}'
