#!/usr/bin/env bash
# Every issue target that Benchmarks/run.sh does not measure, in one go, on one actorkvd build
# against Redis 7: the hand runs of HANDRUNS.md ("Every target again, on an idle machine"),
# each through its own script, then one table of ActorKV / Redis ratios with the target beside
# each. (run.sh measures the others: PUT, GET, INCR and the contended read-modify-write.)
#
# Usage: Benchmarks/targets.sh [ROUNDS]
#   ACTORKVD=path (default .build-bench/release/actorkvd), BENCH=path to actorkv-bench (default
#   beside it); ROUNDS (default 3) alternating rounds per script (expiry: 2). Needs what the
#   scripts need: redis-server, redis-tools, and .build-venv (redis-py) for redis-clients.sh.
#   About 8 minutes on an idle 2-core machine. Each script's own output is printed as it runs.
# Asserts nothing: it is a measuring tool (a script that fails makes this one fail).
set -euo pipefail
ROUNDS=${1:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
export ACTORKVD=${ACTORKVD:-$top/.build-bench/release/actorkvd}
export BENCH=${BENCH:-$(dirname "$ACTORKVD")/actorkv-bench}
[ -x "$ACTORKVD" ] && [ -x "$BENCH" ] || { echo "targets.sh: build first: swift build -c release --scratch-path .build-bench" >&2; exit 2; }
OUT=$(mktemp -d /tmp/actorkv-targets.XXXXXX)
trap 'rm -rf "$OUT"' EXIT
cd "$top"

step() {  # name command... : runs the command, showing and keeping its output
    local name=$1; shift
    echo "== $name: $*"
    "$@" 2>&1 | tee "$OUT/$name"
}

echo "targets.sh: $("$ACTORKVD" --version 2>/dev/null || echo "$ACTORKVD"), load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
step lock1 bash Benchmarks/lock.sh "$ACTORKVD" "$ACTORKVD" "$ROUNDS" 1 no
step lock10 bash Benchmarks/lock.sh "$ACTORKVD" "$ACTORKVD" "$ROUNDS" 10 yes
step clients bash Benchmarks/redis-clients.sh "$ROUNDS"
step fan100 bash Benchmarks/fanout.sh "$ROUNDS" 100 20000 "$ACTORKVD"
step fan1000 bash Benchmarks/fanout.sh "$ROUNDS" 1000 5000 "$ACTORKVD"
step writers bash Benchmarks/writers.sh "$ROUNDS" 100 "$ACTORKVD"
step expiry bash Benchmarks/expiry.sh 2
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# The median of the numbers on stdin.
median() { sort -n | awk '{a[NR] = $1} END {if (NR) print a[int((NR + 1) / 2)]}'; }
# The median N of the lines "LABEL: N …" of a script's output that match a pattern and not an
# excluded one (lock.sh: "A …" for the build, which it runs twice as A and B, and "redis:";
# fanout.sh: "BUILD W=…" and "redis W=…").
rate() { grep -E "$2" "$OUT/$1" | grep -Ev "${3:-^$}" | sed -E 's/^[^:]*: ([0-9]+) .*/\1/' | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "" || b == "" || b == 0) print "?"; else printf "%.2f", a / b}'; }
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$3"; }

echo
echo "| target | ActorKV / Redis (medians) | target ratio |"
echo "| --- | --- | --- |"
row "#20 lock acquire + release, one client" "$(ratio "$(rate lock1 '^A ')" "$(rate lock1 '^redis:')")" "≥ 1.0"
row "#20 ... 10 clients on one lock" "$(ratio "$(rate lock10 '^A ')" "$(rate lock10 '^redis:')")" "≥ 1.0"
for m in hset-p1 hset-p16 hget-p1 hget-p16 py-hset py-hget multi10; do
    row "#21 $m" "$(awk -v m="$m" '$1 == m {print $4}' "$OUT/clients")" "≥ 1.0"
done
row "#19 fan-out, 100 watchers" "$(ratio "$(rate fan100 ' W=' '^redis')" "$(rate fan100 '^redis W=')")" "≥ 1.0"
row "#19 fan-out, 1000 watchers" "$(ratio "$(rate fan1000 ' W=' '^redis')" "$(rate fan1000 '^redis W=')")" "≥ 1.0"
row "#19 writers with 100 watchers / none (not against Redis)" "$(grep -oE '\(([0-9.]+)x\)' "$OUT/writers" | tr -d '()x' | median)" "≥ 0.8"
row "#20 GET / PUT while 1M keys expire, with / without (not against Redis)" \
    "$(sed -n 's/^akv: GET with expiry \/ without \([0-9.]*\), PUT \([0-9.]*\)/\1 \/ \2/p' "$OUT/expiry")" "≥ 0.8"
