#!/usr/bin/env bash
# Requests per second of many commands, ActorKV against Redis on the same data, to find the ones
# far behind the rest (HRANDFIELD was 0.14 of Redis before round 71; see HOTPATHS.md).
#
# Usage: Benchmarks/commands.sh ACTORKVD [PIPELINE] [REQUESTS]
#
# Starts ACTORKVD (--fsync everysec, snapshots off) and redis-server 7 without persistence
# (no RDB, no AOF: Redis's fastest, so the ratios are lower than BENCHMARKS.md's against Redis
# with AOF) on fresh sockets, writes the same hashes to both (`small`: 10 fields; `mid`: 1,000
# fields of 20 bytes; `cnt`), then runs each command with redis-benchmark -c 50 -P PIPELINE
# (default 16) -n REQUESTS (default 200,000), ActorKV then Redis, and prints both figures and
# their ratio. Compare a command's ratio with HGET's, not with 1: at -P 16 a plain read is
# about 0.7 here. Needs redis-server, redis-cli, redis-benchmark, python3. Asserts nothing: it is
# a measuring tool.
set -euo pipefail
BIN=$1 PIPELINE=${2:-16} REQUESTS=${3:-200000}
DIR=$(mktemp -d /tmp/actorkv-commands.XXXXXX)
"$BIN" --socket "$DIR/a.sock" --data-dir "$DIR/data" --snapshot-interval 0 >/dev/null 2>&1 &
AKV=$!
redis-server --port 0 --unixsocket "$DIR/r.sock" --save "" --appendonly no --daemonize yes --dir "$DIR" >/dev/null
trap 'kill $AKV 2>/dev/null || true; redis-cli -s "$DIR/r.sock" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
for _ in $(seq 1 100); do [ -S "$DIR/a.sock" ] && [ -S "$DIR/r.sock" ] && break; sleep 0.1; done
for server in a r; do
    redis-cli -s "$DIR/$server.sock" HSET small a 1 b 2 c 3 d 4 e 5 f 6 g 7 h 8 i 9 j 10 >/dev/null
    redis-cli -s "$DIR/$server.sock" HSET cnt n 0 fl 1.5 >/dev/null
    python3 -c "
import sys
args = ['HSET', 'mid'] + [w for i in range(1000) for w in ('f%d' % i, 'v' * 20)]
sys.stdout.write('*%d\r\n' % len(args) + ''.join('\$%d\r\n%s\r\n' % (len(a), a) for a in args))" |
        redis-cli -s "$DIR/$server.sock" --pipe >/dev/null
done
rps() {  # SERVER WORD...: redis-benchmark's requests per second
    local server=$1; shift
    redis-benchmark -s "$DIR/$server.sock" -c 50 -n "$REQUESTS" -P "$PIPELINE" --csv "$@" 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}
echo "commands.sh: -c 50 -P $PIPELINE -n $REQUESTS; ActorKV $BIN against $(redis-server --version | cut -d' ' -f3) without persistence"
while IFS= read -r line; do
    read -r -a words <<<"$line"
    a=$(rps a "${words[@]}" || true) r=$(rps r "${words[@]}" || true)
    # A command the other server lacks (Redis 7.0 has no HEXPIRE) gets no figure and no ratio.
    awk -v c="$line" -v a="$a" -v r="$r" 'BEGIN {
        printf "%-36s %10s %10s  %s\n", c, a == "" ? "-" : sprintf("%.0f", a), r == "" ? "-" : sprintf("%.0f", r),
               (a == "" || r == "" || r + 0 == 0) ? "-" : sprintf("%.2f", a / r) }'
done <<'COMMANDS'
PING
ECHO hello
HGET small a
HMGET small a b c d
HEXISTS small a
HSTRLEN small a
HLEN small
HGETALL small
HKEYS small
HVALS small
HGETALL mid
HSCAN small 0
HSCAN mid 0 COUNT 100
HRANDFIELD small
HRANDFIELD mid -5 WITHVALUES
HSET small a 1
HSETNX small a 1
HDEL small nothing
HINCRBY cnt n 1
HINCRBYFLOAT cnt fl 0.5
HEXPIRE small 1000 FIELDS 1 nothing
HTTL small FIELDS 1 a
TYPE small
EXISTS small
DBSIZE
KEYS s*
SCAN 0
CLIENT ID
CONFIG GET save
SELECT 0
COMMANDS
