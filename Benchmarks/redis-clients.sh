#!/usr/bin/env bash
# Redis clients against ActorKV and Redis side by side (issue #21): hash commands through
# redis-benchmark, round trips through redis-py with its defaults (RESP3), and MULTI/EXEC of 10
# HSETs through redis-py's transactional pipeline.
#
# Usage: Benchmarks/redis-clients.sh [ROUNDS]
#   ACTORKVD=path (default .build-bench/release/actorkvd), PYTHON=path (default .build-venv/bin/python,
#   which .ci/run creates with redis-py and hiredis)
#
# Each run starts a fresh server: ActorKV with --fsync everysec, Redis with --appendonly yes
# --appendfsync everysec (the same durability promise), both on a Unix socket. redis-benchmark:
# -c 50 -r 100000, 100-byte values, HSET bench f:__rand_int__ and HGET of the same after a fill,
# at -P 1 and -P 16. redis-py: one client, 20,000 HSETs then 20,000 HGETs, one round trip each.
# MULTI/EXEC: 4 processes, each 2,000 pipelines of 10 HSETs (transaction=True). The servers
# alternate, ROUNDS (default 3) times; medians printed. Asserts nothing: a measuring tool.
set -euo pipefail
ROUNDS=${1:-3}
top=$(cd "$(dirname "$0")/.." && pwd)
ACTORKVD=${ACTORKVD:-$top/.build-bench/release/actorkvd}
PYTHON=${PYTHON:-$top/.build-venv/bin/python}
V=$(printf 'v%.0s' $(seq 1 100))
WORK=$(mktemp -d /tmp/akvrc.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
"$PYTHON" -c 'import redis' || { echo "needs redis-py: python3 -m venv .build-venv && .build-venv/bin/pip install redis hiredis" >&2; exit 2; }

start() {  # target dir -> pid
    local target=$1 dir=$2
    if [ "$target" = akv ]; then
        "$ACTORKVD" --socket "$dir/s.sock" --data-dir "$dir/data" --fsync everysec >"$dir/log" 2>&1 &
    else
        redis-server --port 0 --unixsocket "$dir/s.sock" --dir "$dir" --save '' --appendonly yes --appendfsync everysec >"$dir/log" 2>&1 &
    fi
    echo $!
    for _ in $(seq 1 100); do [ -S "$dir/s.sock" ] && break; sleep 0.05; done
}
rps() {  # sock n pipeline command...
    local sock=$1 n=$2 p=$3; shift 3
    redis-benchmark -s "$sock" -c 50 -n "$n" -r 100000 -P "$p" -q "$@" 2>&1 |
        tr '\r' '\n' | grep 'requests per second' | tail -1 | sed 's/.*: \([0-9.]*\) requests.*/\1/'
}
cat >"$WORK/roundtrips.py" <<'PY'
import sys, time, redis
r = redis.Redis(unix_socket_path=sys.argv[1])
n = 20000
t = time.perf_counter()
for i in range(n): r.hset("py", f"f{i}", "v" * 100)
hset = n / (time.perf_counter() - t)
t = time.perf_counter()
for i in range(n): r.hget("py", f"f{i}")
print(f"{hset:.0f} {n / (time.perf_counter() - t):.0f}")
PY
cat >"$WORK/multi.py" <<'PY'
import sys, time, redis, multiprocessing
def worker(args):
    sock, w = args
    r = redis.Redis(unix_socket_path=sock)
    for i in range(2000):
        p = r.pipeline()
        for j in range(10): p.hset("tx", f"w{w}-{j}", i)
        p.execute()
if __name__ == "__main__":
    t = time.perf_counter()
    with multiprocessing.Pool(4) as pool: pool.map(worker, [(sys.argv[1], w) for w in range(4)])
    print(f"{4 * 2000 / (time.perf_counter() - t):.0f}")
PY
declare -A results
for round in $(seq 1 "$ROUNDS"); do
    for target in akv redis; do
        dir=$(mktemp -d "$WORK/$target.XXXXXX"); pid=$(start $target "$dir"); s=$dir/s.sock
        results[$target-hset-p1]+="$(rps "$s" 200000 1 HSET bench f:__rand_int__ "$V") "
        results[$target-hset-p16]+="$(rps "$s" 1000000 16 HSET bench f:__rand_int__ "$V") "
        results[$target-hget-p1]+="$(rps "$s" 200000 1 HGET bench f:__rand_int__) "
        results[$target-hget-p16]+="$(rps "$s" 1000000 16 HGET bench f:__rand_int__) "
        read -r a b < <("$PYTHON" "$WORK/roundtrips.py" "$s")
        results[$target-py-hset]+="$a "; results[$target-py-hget]+="$b "
        results[$target-multi10]+="$("$PYTHON" "$WORK/multi.py" "$s") "
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done
median() { printf '%s\n' $1 | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-34s %12s %12s %7s\n' "measure (median of $ROUNDS)" ActorKV Redis ratio
for m in hset-p1 hset-p16 hget-p1 hget-p16 py-hset py-hget multi10; do
    a=$(median "${results[akv-$m]}") r=$(median "${results[redis-$m]}")
    printf '%-34s %12.0f %12.0f %7.2f\n' "$m" "$a" "$r" "$(echo "$a / $r" | bc -l)"
done
echo "(hset/hget: requests/s, redis-benchmark -c 50; py-*: round trips/s, one redis-py client; multi10: EXECs of 10 HSETs/s, 4 redis-py processes)"
