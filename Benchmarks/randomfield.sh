#!/usr/bin/env bash
# HRANDFIELD on a large hash, and what it costs the other clients meanwhile, for HOTPATHS.md.
#
# Usage: Benchmarks/randomfield.sh ACTORKVD|redis [FIELDS]
#
# Starts ACTORKVD (or, with `redis`, redis-server without persistence) on a fresh temp directory,
# loads one hash (namespace) `big` of FIELDS (default 1000000) fields with 100-byte values through
# `redis-cli --pipe`, then prints the wall time of single HRANDFIELDs (one field, 5 WITHVALUES,
# -100) as redis-cli sees them (its own start included, about 5 ms), and the latency of another
# client's GETs (redis-benchmark -c 1 -n 20000) while a loop of 20 `HRANDFIELD big 3` runs, and
# the requests per second of `HRANDFIELD big` and `HRANDFIELD big -5 WITHVALUES` (redis-benchmark
# -c 50 -n 300000, -P 16 and -P 1).
# Needs redis-cli and redis-benchmark (redis-tools), redis-server for `redis`, python3. Asserts
# nothing: it is a measuring tool.
set -euo pipefail
BIN=$1 FIELDS=${2:-1000000}
DIR=$(mktemp -d /tmp/actorkv-randomfield.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$DIR"' EXIT
. "$(dirname "$0")/bighash.sh"
start_big_hash "$BIN" "$FIELDS" "$DIR"
for c in "HRANDFIELD big" "HRANDFIELD big" "HRANDFIELD big" "HRANDFIELD big 5 WITHVALUES" "HRANDFIELD big -100"; do
    s=$(date +%s%N); redis-cli -s "$S" $c >/dev/null; e=$(date +%s%N)
    echo "$c: $(( (e - s) / 1000 )) us"
done
(for _ in $(seq 1 20); do redis-cli -s "$S" HRANDFIELD big 3 >/dev/null; done) &
LOOP=$!
redis-benchmark -s "$S" -c 1 -n 20000 "${GET_OTHER[@]}" 2>/dev/null | grep -E '^\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+' | tail -1 |
    awk '{print "another client'"'"'s GETs meanwhile: avg " $1 " ms, p99 " $5 " ms, max " $6 " ms"}'
wait "$LOOP"
# Throughput: 50 clients, pipelined 16 deep and not, one field and five with values.
for P in 16 1; do
    for c in "HRANDFIELD big" "HRANDFIELD big -5 WITHVALUES"; do
        rps=$(redis-benchmark -s "$S" -c 50 -n 300000 -P "$P" --csv $c | tail -1 | cut -d, -f2 | tr -d '"')
        echo "$c, -c 50 -P $P: $rps requests/s"
    done
done
